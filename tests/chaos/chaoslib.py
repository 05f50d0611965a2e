"""Helpers shared by the chaos tests: informer factories with a fast reflector backoff, cache comparison."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from typing import Any

from kinformer.cache.factory import SharedInformerFactory
from kinformer.cache.reflector import Backoff
from kinformer.client import Client


def fast_backoff(rng: random.Random) -> Callable[[], Backoff]:
    """A reflector backoff that keeps a faulty schedule short (client-go's 0.8 s start would dominate).

    ``rng`` is drawn from once, now, so the schedule's own random sequence does not depend on when the
    reflectors are created; each reflector gets its own jitter sequence."""
    base = rng.getrandbits(32)
    serial = itertools.count()
    return lambda: Backoff(initial=0.005, cap=0.05, reset_after=1.0, rng=random.Random(base + next(serial)))


def diff_cache(informer: Any, expected: dict[str, int]) -> str:
    """'' when the informer's cache holds exactly ``expected`` ({key: rv}); else a short description."""
    indexer = informer.indexer
    keys = indexer.list_keys()
    if len(keys) == len(expected):
        for key in keys:
            obj = indexer.get_by_key(key)
            if obj is None or expected.get(key) != int(obj["metadata"]["resourceVersion"]):
                break
        else:
            return ""
    have = {k: int(o["metadata"]["resourceVersion"]) for k in keys if (o := indexer.get_by_key(k)) is not None}
    missing = sorted(set(expected) - set(have))
    extra = sorted(set(have) - set(expected))
    stale = sorted(k for k in set(have) & set(expected) if have[k] != expected[k])
    return f"missing={missing} extra={extra} stale={[(k, have[k], expected[k]) for k in stale]}"


def make_factory(client: Client, backoff: Callable[[], Backoff], *, streaming: bool = False) -> SharedInformerFactory:
    """A factory (no resync) whose reflectors back off fast; ``streaming`` lists by watch (sendInitialEvents)."""
    return SharedInformerFactory(client, resync=0.0, backoff=backoff, use_streaming_list=streaming)

"""Controller expectations (kube's pkg/controller/controller_utils.go, kube 1.32), shared by the replicaset
and deployment controllers. Pod predicates are :mod:`kinformer.cluster.podutil`'s, owner references and
adoption :mod:`.refs`'.

* :class:`Expectations` is kube's UIDTrackingControllerExpectations: after asking for N creations (or the
  deletion of named pods) a controller does not act again on that key until the informer has observed them,
  or until ``ttl`` (kube's 5 minutes) has passed.
* :class:`Wakeups` lets a controller's own informer handlers enqueue keys (``Builder.source``), so expectations
  are lowered before the key they concern is reconciled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.clock import Clock
from kinformer.controller.reconcile import Request

Obj = Mapping[str, Any]

#: kube's ExpectationsTimeout: expectations older than this are considered satisfied.
EXPECTATIONS_TTL = 300.0


def meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


@dataclass
class _Expectation:
    adds: int = 0
    deletes: set[str] = field(default_factory=set)
    timestamp: float = 0.0

    def fulfilled(self) -> bool:
        return self.adds <= 0 and not self.deletes


class Expectations:
    """Creations and deletions a controller is waiting to observe, per controller key."""

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TTL) -> None:
        self.clock = clock
        self.ttl = ttl
        self._by_key: dict[str, _Expectation] = {}

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending for ``key`` (or what is pending has expired)."""
        exp = self._by_key.get(key)
        return exp is None or exp.fulfilled() or self.clock.now() - exp.timestamp > self.ttl

    def expect_creations(self, key: str, count: int) -> None:
        self._by_key[key] = _Expectation(adds=count, timestamp=self.clock.now())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        self._by_key[key] = _Expectation(deletes=set(pod_keys), timestamp=self.clock.now())

    def creation_observed(self, key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.adds -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.deletes.discard(pod_key)

    def forget(self, key: str) -> None:
        self._by_key.pop(key, None)


class Wakeups:
    """An async iterable of Requests for ``Builder.source``: what informer handlers enqueue themselves.

    A key added again before it was taken is not queued twice (as a work queue's dirty set), so what waits
    is bounded by the number of distinct keys, however many events the informers deliver."""

    def __init__(self) -> None:
        self._pending: dict[Request, None] = {}
        self._ready = asyncio.Event()

    def add(self, namespace: str, name: str) -> None:
        self._pending[Request(namespace, name)] = None
        self._ready.set()

    def __len__(self) -> int:
        return len(self._pending)

    async def __aiter__(self) -> AsyncIterator[Request]:
        while True:
            await self._ready.wait()
            request = next(iter(self._pending))
            del self._pending[request]
            if not self._pending:
                self._ready.clear()
            yield request

"""KEP-5866's shardSelector: FNV-1a 64 over a metadata field, ``[start, end)`` ranges joined by ``||``."""

from __future__ import annotations

import random
import uuid

import pytest

from kinformer.server.endpoints.shardselector import MAX_RANGES, fnv1a64, parse_shard_selector
from kinformer.server.machinery.status import StatusError

HALVES = ("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
          "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')")


def test_fnv1a64_matches_the_published_vectors() -> None:
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_two_halves_split_every_object_exactly_once() -> None:
    low, high = (parse_shard_selector(h) for h in HALVES)
    both = parse_shard_selector(" || ".join(HALVES))
    assert low is not None and high is not None and both is not None
    rng = random.Random(7)  # uids as the server makes them (random UUIDs)
    objs = [{"metadata": {"uid": str(uuid.UUID(int=rng.getrandbits(128), version=4))}} for _ in range(500)]
    assert all(low.matches(o) != high.matches(o) for o in objs)
    assert all(both.matches(o) for o in objs)
    assert 150 < sum(low.matches(o) for o in objs) < 350
    assert low.matches({"metadata": {"uid": "a"}}) == (fnv1a64(b"a") < 2**63)


def test_namespace_field_and_empty_selector() -> None:
    sel = parse_shard_selector("shardRange(object.metadata.namespace, '0x0', '0x10000000000000000')")
    assert sel is not None and sel.matches({"metadata": {}})
    assert parse_shard_selector("") is None and parse_shard_selector("  ") is None


@pytest.mark.parametrize("text", [
    "shardRange(object.metadata.name, '0x0', '0x1')",  # unsupported field
    "shardRange(object.metadata.uid, 0x0, 0x1)",  # unquoted
    "shardRange(object.metadata.uid, '0x2', '0x1')",  # start > end
    "shardRange(object.metadata.uid, '0x0', '0x10000000000000001')",  # past 2^64
    "shardRange(object.metadata.uid, '0x0', '0x1') || shardRange(object.metadata.namespace, '0x0', '0x1')",
    "shardRange(object.metadata.uid, '0x0', '0x1') &&",
    " || ".join([HALVES[0]] * (MAX_RANGES + 1)),
    "x" * 5000,
])
def test_malformed_selectors_are_bad_requests(text: str) -> None:
    with pytest.raises(StatusError) as err:
        parse_shard_selector(text)
    assert err.value.code == 400

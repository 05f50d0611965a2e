"""The watch cache keeps few decoded versions: older ones are served from their bytes, unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest

from kinformer.server.storage.memory import MemoryStorage
from kinformer.server.storage.watchcache import WatchCache

PREFIX = "/registry/core/configmaps/"
KEY = PREFIX + "default/a"


@pytest.fixture
async def cache() -> AsyncIterator[tuple[MemoryStorage, WatchCache]]:
    storage = MemoryStorage()
    await storage.start()
    cache = WatchCache(storage)
    await cache.start()
    yield storage, cache
    await cache.stop()
    await storage.close()


def _value(n: int) -> bytes:
    return orjson.dumps({"metadata": {"name": "a", "namespace": "default"}, "data": {"n": str(n)}})


async def test_superseded_versions_are_released_and_decode_from_their_bytes(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    kv = await storage.create(KEY, _value(1))
    for n in (2, 3):
        kv = await storage.update(KEY, _value(n), kv.mod_revision)
    await wc.sync()
    ring = list(wc.buckets[PREFIX].ring)
    v1, v2, v3 = (ev.cur for ev in ring)
    assert [ev.type for ev in ring] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert ring[2].prev is v2 and ring[1].prev is v1
    # the current version and the one it replaced stay decoded (one dict, handed out as is) ...
    assert v3.obj is v3.obj and v2.obj is v2.obj
    assert wc.buckets[PREFIX].objects[KEY] is v3
    # ... an older one is released: each read decodes its bytes again, equal to what was served
    assert v1.obj is not v1.obj
    assert v1.obj == orjson.loads(v1.raw)
    assert v1.obj["data"] == {"n": "1"} and v1.obj["metadata"]["resourceVersion"] == str(v1.rev)
    v1.obj["data"]["n"] = "changed"  # a reader's copy: the version itself cannot change
    assert v1.obj["data"] == {"n": "1"}


async def test_a_deleted_key_leaves_no_superseded_version_behind(cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    kv = await storage.create(KEY, _value(1))
    kv = await storage.update(KEY, _value(2), kv.mod_revision)
    await storage.delete(KEY, kv.mod_revision)
    await wc.sync()
    bucket = wc.buckets[PREFIX]
    added, modified, deleted = bucket.ring
    assert not bucket.superseded and KEY not in bucket.objects
    assert added.cur.obj is not added.cur.obj  # released when the delete superseded its successor
    assert deleted.prev is modified.cur and deleted.prev.obj["data"] == {"n": "2"}
    assert deleted.cur.obj["data"] == {"n": "2"}


async def test_a_version_replaced_long_ago_is_not_kept_once_its_event_leaves_the_window() -> None:
    storage = MemoryStorage()
    await storage.start()
    wc = WatchCache(storage, size=2)
    await wc.start()
    try:
        kv = await storage.create(KEY, _value(1))
        await storage.update(KEY, _value(2), kv.mod_revision)
        await wc.sync()
        assert KEY in wc.buckets[PREFIX].superseded
        for n in range(2):  # two writes of other keys push the key's events out of a window of two
            await storage.create(f"{PREFIX}default/other-{n}", _value(n))
        await wc.sync()
        assert KEY not in wc.buckets[PREFIX].superseded and wc.buckets[PREFIX].objects[KEY].obj["data"] == {"n": "2"}
    finally:
        await wc.stop()
        await storage.close()



async def test_a_stopped_cache_holds_no_objects_and_reloads_them_on_start(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    """What the cache held goes at stop, by reference counting though the server's controllers and the cache
    refer to each other (a cycle only the collector would free, with all it holds)."""
    storage, wc = cache
    await storage.create(KEY, _value(1))
    await wc.sync()
    assert wc.buckets[PREFIX].objects
    await wc.stop()
    assert wc.buckets == {}
    await wc.start()
    assert orjson.loads(wc.buckets[PREFIX].objects[KEY].raw)["data"] == {"n": "1"}

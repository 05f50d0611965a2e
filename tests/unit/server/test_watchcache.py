"""The watch cache keeps few decoded versions (older ones are served from their bytes, unchanged), and a write
calls only the listeners that want its resource."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest

from kinformer.server.storage.base import Compacted
from kinformer.server.storage.memory import MemoryStorage
from kinformer.server.storage.watchcache import CachedEvent, WatchCache

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


async def _three_versions(storage: MemoryStorage, wc: WatchCache) -> list[CachedEvent]:
    kv = await storage.create(KEY, _value(1))
    for n in (2, 3):
        kv = await storage.update(KEY, _value(n), kv.mod_revision)
    await wc.sync()
    return list(wc.buckets[PREFIX].ring)


def _released(co: Any) -> bool:
    """Each read of a released version decodes its bytes again (a new dict); a decoded one hands out one dict."""
    return co.obj is not co.obj


async def test_only_the_current_version_stays_decoded_and_older_ones_decode_from_their_bytes(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    ring = await _three_versions(storage, wc)
    v1, v2, v3 = (ev.cur for ev in ring)
    assert [ev.type for ev in ring] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert ring[2].prev is v2 and ring[1].prev is v1
    assert wc.buckets[PREFIX].objects[KEY] is v3 and not _released(v3)
    assert _released(v2) and _released(v1) and not wc.buckets[PREFIX].superseded
    assert v1.obj == orjson.loads(v1.raw)
    assert v1.obj["data"] == {"n": "1"} and v1.obj["metadata"]["resourceVersion"] == str(v1.rev)
    v1.obj["data"]["n"] = "changed"  # a reader's copy: the version itself cannot change
    assert v1.obj["data"] == {"n": "1"}
    assert v1.api_version is None and v3.api_version is None  # kept beside the bytes: these values have none


async def test_listeners_read_the_replaced_version_decoded(cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    seen: list[bool] = []
    wc.add_listener(lambda prefix, ev: seen.append(ev.prev is None or not _released(ev.prev)))
    await _three_versions(storage, wc)
    assert seen == [True, True, True]


async def test_a_watcher_with_a_selector_keeps_the_replaced_version_decoded(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    sub = wc.subscribe(PREFIX, wc.revision, filtered=True)
    assert sub is not None
    v1, v2, v3 = (ev.cur for ev in await _three_versions(storage, wc))
    assert wc.buckets[PREFIX].superseded == {KEY: v2}
    assert not _released(v3) and not _released(v2) and _released(v1)
    wc.unsubscribe(PREFIX, sub[0])
    kv = await storage.get(KEY)
    assert kv is not None
    await storage.update(KEY, _value(4), kv.mod_revision)
    await wc.sync()
    assert _released(v3) and not wc.buckets[PREFIX].superseded  # no such watcher left


async def test_the_writers_object_is_read_by_the_listeners_then_dropped_and_decoded_once_on_demand(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    offered = {"metadata": {"name": "a", "namespace": "default", "managedFields": [{"manager": "m"}]},
               "data": {"n": "1"}}
    seen: list[bool] = []
    wc.add_listener(lambda prefix, ev: seen.append(ev.cur.obj is offered))
    raw = orjson.dumps(offered)
    kv = await storage.create(KEY, raw)
    offered["metadata"]["resourceVersion"] = str(kv.mod_revision)
    wc.offer(KEY, kv.mod_revision, offered, orjson.dumps(offered))
    await wc.sync()
    co = wc.buckets[PREFIX].objects[KEY]
    assert seen == [True]
    assert co.obj is not offered and co.obj == offered  # dropped after the listeners, decoded again once
    assert not _released(co)
    assert co.meta == {"name": "a", "namespace": "default", "resourceVersion": str(kv.mod_revision)}
    assert co.meta is co.meta


async def test_a_watcher_with_a_selector_reads_the_objects_as_they_were_decoded(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    assert wc.subscribe(PREFIX, wc.revision, filtered=True) is not None
    kept: list[dict[str, Any]] = []
    wc.add_listener(lambda prefix, ev: kept.append(ev.cur.obj))
    await storage.create(KEY, _value(1))
    await wc.sync()
    assert wc.buckets[PREFIX].objects[KEY].obj is kept[0]


async def test_a_replaced_versions_meta_is_not_kept(cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    v1, _, _ = (ev.cur for ev in await _three_versions(storage, wc))
    assert v1.meta == {"name": "a", "namespace": "default", "resourceVersion": str(v1.rev)}
    assert v1.meta is not v1.meta


async def test_cached_objects_and_events_are_not_tracked_by_the_cyclic_collector(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    import gc

    storage, wc = cache
    ring = await _three_versions(storage, wc)
    assert not any(gc.is_tracked(o) for ev in ring for o in (ev, ev.cur))


async def test_a_deleted_key_leaves_no_decoded_version_behind(cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    kv = await storage.create(KEY, _value(1))
    kv = await storage.update(KEY, _value(2), kv.mod_revision)
    await storage.delete(KEY, kv.mod_revision)
    await wc.sync()
    bucket = wc.buckets[PREFIX]
    added, modified, deleted = bucket.ring
    assert not bucket.superseded and KEY not in bucket.objects
    assert _released(added.cur) and _released(deleted.prev) and _released(deleted.cur)
    assert deleted.prev is modified.cur and deleted.prev.obj["data"] == {"n": "2"}
    assert deleted.cur.obj["data"] == {"n": "2"}


async def test_a_deleted_object_stays_decoded_for_a_watcher_with_a_selector(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    assert wc.subscribe(PREFIX, wc.revision, filtered=True) is not None
    kv = await storage.create(KEY, _value(1))
    await storage.delete(KEY, kv.mod_revision)
    await wc.sync()
    added, deleted = wc.buckets[PREFIX].ring
    assert not _released(deleted.cur) and _released(added.cur) and not wc.buckets[PREFIX].superseded


async def test_a_version_replaced_long_ago_is_not_kept_once_its_event_leaves_the_window() -> None:
    storage = MemoryStorage()
    await storage.start()
    wc = WatchCache(storage, size=2)
    await wc.start()
    try:
        assert wc.subscribe(PREFIX, wc.revision, filtered=True) is not None
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


SECRETS = "/registry/core/secrets/"


def _recorder(calls: list[tuple[str, str, str]], name: str) -> Callable[[str, CachedEvent], None]:
    def listener(prefix: str, ev: CachedEvent) -> None:
        calls.append((name, prefix, ev.type))
    return listener


async def test_a_write_calls_only_the_listeners_of_its_prefix_and_those_of_every_prefix_in_order(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    calls: list[tuple[str, str, str]] = []
    wc.add_listener(_recorder(calls, "all-1"))
    wc.add_listener(_recorder(calls, "configmaps"), (PREFIX,))
    wc.add_listener(_recorder(calls, "all-2"), None)
    wc.add_listener(_recorder(calls, "secrets"), [SECRETS])
    wc.add_listener(_recorder(calls, "both"), {PREFIX, SECRETS})
    kv = await storage.create(KEY, _value(1))
    await storage.create(SECRETS + "default/s", _value(1))
    await storage.delete(KEY, kv.mod_revision)
    await storage.create("/registry/core/pods/default/p", _value(1))
    await wc.sync()
    assert calls == [
        ("all-1", PREFIX, "ADDED"), ("configmaps", PREFIX, "ADDED"), ("all-2", PREFIX, "ADDED"),
        ("both", PREFIX, "ADDED"),
        ("all-1", SECRETS, "ADDED"), ("all-2", SECRETS, "ADDED"), ("secrets", SECRETS, "ADDED"),
        ("both", SECRETS, "ADDED"),
        ("all-1", PREFIX, "DELETED"), ("configmaps", PREFIX, "DELETED"), ("all-2", PREFIX, "DELETED"),
        ("both", PREFIX, "DELETED"),
        ("all-1", "/registry/core/pods/", "ADDED"), ("all-2", "/registry/core/pods/", "ADDED"),
    ]


async def test_a_listener_and_its_on_reset_are_removed_together(cache: tuple[MemoryStorage, WatchCache]) -> None:
    _, wc = cache
    calls: list[tuple[str, str, str]] = []
    kept, dropped = _recorder(calls, "kept"), _recorder(calls, "dropped")
    wc.add_listener(kept, on_reset=lambda: calls.append(("kept", "", "reset")))
    wc.add_listener(dropped, (PREFIX,), on_reset=lambda: calls.append(("dropped", "", "reset")))
    wc.add_listener(_recorder(calls, "no reset"))
    for reset in wc.reset_listeners:
        reset()
    wc.remove_listener(dropped)
    for reset in wc.reset_listeners:
        reset()
    assert calls == [("kept", "", "reset"), ("dropped", "", "reset"), ("kept", "", "reset")]


async def test_a_failing_listener_keeps_neither_the_others_nor_the_cache_from_the_event(
        cache: tuple[MemoryStorage, WatchCache], caplog: pytest.LogCaptureFixture) -> None:
    storage, wc = cache
    calls: list[tuple[str, str, str]] = []

    def failing(prefix: str, ev: CachedEvent) -> None:
        raise RuntimeError("listener broke")

    wc.add_listener(failing, (PREFIX,))
    wc.add_listener(_recorder(calls, "after"), (PREFIX,))
    wc.add_listener(failing)
    wc.add_listener(_recorder(calls, "last"))
    with caplog.at_level(logging.ERROR, logger="kinformer.server.storage.watchcache"):
        kv = await storage.create(KEY, _value(1))
        await storage.update(KEY, _value(2), kv.mod_revision)
        await wc.sync()
    assert calls == [("after", PREFIX, "ADDED"), ("last", PREFIX, "ADDED"),
                     ("after", PREFIX, "MODIFIED"), ("last", PREFIX, "MODIFIED")]
    assert [r.message for r in caplog.records].count("watch cache listener failed") == 4
    assert wc.buckets[PREFIX].objects[KEY].obj["data"] == {"n": "2"} and wc.revision == kv.mod_revision + 1


async def test_listeners_added_or_removed_between_writes_are_seen_by_the_next_write(
        cache: tuple[MemoryStorage, WatchCache]) -> None:
    storage, wc = cache
    calls: list[tuple[str, str, str]] = []
    first, scoped, late = _recorder(calls, "first"), _recorder(calls, "scoped"), _recorder(calls, "late")
    wc.add_listener(first, (PREFIX,))
    kv = await storage.create(KEY, _value(1))
    await wc.sync()
    wc.add_listener(late)  # the bucket's listeners were worked out at the first write
    wc.add_listener(scoped, (PREFIX,))
    kv = await storage.update(KEY, _value(2), kv.mod_revision)
    await wc.sync()
    wc.remove_listener(first)
    wc.remove_listener(late)
    wc.remove_listener(_recorder(calls, "never added"))  # a no-op
    await storage.update(KEY, _value(3), kv.mod_revision)
    await wc.sync()
    assert [(name, ev) for name, _, ev in calls] == [
        ("first", "ADDED"), ("first", "MODIFIED"), ("late", "MODIFIED"), ("scoped", "MODIFIED"),
        ("scoped", "MODIFIED")]


@pytest.mark.parametrize("prefix", ["/registry/core/", "/registry/core/configmaps", "core/configmaps/",
                                    "/registry/core/configmaps/default/", "/registry//configmaps/", 7])
async def test_a_listener_prefix_that_is_not_a_resource_prefix_is_refused(
        cache: tuple[MemoryStorage, WatchCache], prefix: Any) -> None:
    _, wc = cache
    with pytest.raises(ValueError, match="not of the form /registry/<group>/<plural>/"):
        wc.add_listener(_recorder([], "bad"), (PREFIX, prefix))
    with pytest.raises(TypeError, match="not one string"):
        wc.add_listener(_recorder([], "bad"), PREFIX)
    storage, _ = cache
    await storage.create(KEY, _value(1))
    await wc.sync()
    assert wc.buckets[PREFIX].listeners == ()  # nothing was added


class _CompactingStorage(MemoryStorage):
    """A memory store whose watch fails with Compacted at the first event after :meth:`compact_next` (as etcd's
    watch fails when the history it was to send has been compacted away)."""

    fail_next = False

    def compact_next(self) -> None:
        self.fail_next = True

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Any]:
        async for ev in super().watch(prefix, start_revision):
            if self.fail_next:
                self.fail_next = False
                raise Compacted(start_revision, ev.kv.mod_revision)
            yield ev


async def test_a_compacted_source_reloads_the_cache_and_calls_on_reset_instead_of_the_lost_events() -> None:
    storage = _CompactingStorage()
    await storage.start()
    wc = WatchCache(storage)
    await wc.start()
    calls: list[tuple[str, str, str]] = []
    try:
        wc.add_listener(_recorder(calls, "with reset"), (PREFIX,), on_reset=lambda: calls.append(("reset", "", "")))
        await storage.create(KEY, _value(1))
        await wc.sync()
        storage.compact_next()
        await storage.create(PREFIX + "default/b", _value(2))  # the event the cache never sees
        await wc.sync()
        assert calls == [("with reset", PREFIX, "ADDED"), ("reset", "", "")]
        assert set(wc.buckets[PREFIX].objects) == {KEY, PREFIX + "default/b"}  # reloaded from the store
        await storage.create(PREFIX + "default/c", _value(3))  # the cache follows the store again
        await wc.sync()
        assert calls[-1] == ("with reset", PREFIX, "ADDED") and len(calls) == 3
        assert PREFIX + "default/c" in wc.buckets[PREFIX].objects
    finally:
        await wc.stop()
        await storage.close()

"""SharedIndexInformer: cache-first delta handling, handlers (isolation, resync, late join, removal), transform,
mutation detection, against FakeSource and FakeClock."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
import pytest

from kinformer.cache.delta_fifo import DeletedFinalStateUnknown
from kinformer.cache.fake import FakeSource
from kinformer.cache.shared_informer import (
    CacheMutationError,
    ResourceEventHandler,
    SharedIndexInformer,
    strip_managed_fields,
)
from kinformer.cache.transforms import for_class, strip_last_applied
from kinformer.client.objects import LazyObject, decode_list
from kinformer.client.watch import decode_watch_line
from kinformer.clock import FakeClock
from kinformer.listwatch import ListOptions, ListResult, WatchEvent
from testlib import cancelled_future, cm, direct_batches, wait_until


class Recorder:
    """Records notifications as tuples; plain (sync) callbacks by default."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
        self.events.append(("add", obj["metadata"]["name"], is_in_initial_list))

    def on_update(self, old: Any, new: Any, is_resync: bool = False) -> None:
        self.events.append(("update", new["metadata"]["name"], new["data"]["v"], is_resync, old is new))

    def on_delete(self, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            self.events.append(("tombstone", obj.key))
        else:
            self.events.append(("delete", obj["metadata"]["name"]))

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == kind]


def make_informer(src: FakeSource, clock: FakeClock | None = None, **kwargs: Any) -> SharedIndexInformer:
    """An informer on a fake clock; no idle-watch watchdog unless asked (it would be one more clock sleeper)."""
    kwargs.setdefault("watch_idle_timeout", None)
    return SharedIndexInformer(src, clock=clock or FakeClock(), rng=random.Random(5), name="cms", **kwargs)


async def test_cache_is_updated_before_handlers_and_decides_add_vs_update() -> None:
    src = FakeSource()
    src.create(cm("a"))
    inf = make_informer(src)
    seen: list[tuple[str, bool, Any]] = []

    def on_add(obj: Any) -> None:
        seen.append(("add", inf.indexer.get_by_key("default/" + obj["metadata"]["name"]) is obj, None))

    def on_update(old: Any, new: Any) -> None:
        seen.append(("update", inf.indexer.get_by_key("default/a") is new, old["data"]["v"]))

    inf.add_event_handler(on_add=on_add, on_update=on_update)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        await wait_until(lambda: len(seen) == 1)  # handlers lag the cache: the next change must not overtake
        src.update(cm("a", value="2"))
        await wait_until(lambda: len(seen) == 2)
        src.create(cm("b"))
        await wait_until(lambda: len(seen) == 3)
        assert seen == [("add", True, None), ("update", True, "1"), ("add", True, None)]
        assert inf.lister().get("b", "default")["metadata"]["name"] == "b"
        assert [o["metadata"]["name"] for o in inf.lister().list(namespace="default")] != []
        # one lister, handed out again (a handler may ask for one per event), reading the live cache
        lister = inf.lister()
        assert inf.lister() is lister and lister.indexer is inf.indexer
        src.create(cm("c"))
        await wait_until(lambda: len(seen) == 4)
        assert lister.get("c", "default")["metadata"]["name"] == "c"
    finally:
        await inf.stop()
    assert inf.is_stopped


async def test_relist_after_410_sends_tombstones_for_objects_deleted_meanwhile() -> None:
    src = FakeSource()
    for name in ("keep", "gone", "changed"):
        src.create(cm(name))
    clock = FakeClock()
    inf = make_informer(src, clock)
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        src.close_watches()  # no events: a very short watch -> backoff
        await clock.wait_for_waiters(1)
        src.delete("gone", "default")
        src.update(cm("changed", value="2"))
        src.compact()
        clock.step(5)  # rewatch from the old RV: 410 -> relist after another backoff
        await clock.wait_for_waiters(1)
        clock.step(10)
        await wait_until(lambda: len(rec.events) == 5)
        # RealFIFO's Replace: tombstones for vanished keys first, then the listed objects
        assert rec.events[3:] == [("tombstone", "default/gone"), ("update", "changed", "2", False, False)]
        assert sorted(inf.indexer.list_keys()) == ["default/changed", "default/keep"]
        assert inf.stats.reflector.relists == 1
    finally:
        await inf.stop()


async def test_default_transform_strips_managed_fields_and_can_be_replaced() -> None:
    src = FakeSource()
    obj = cm("a")
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    src.create(obj)
    inf = make_informer(src)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        cached = inf.indexer.get_by_key("default/a")
        assert "managedFields" not in cached["metadata"] and cached["metadata"]["name"] == "a"
        with pytest.raises(RuntimeError):
            inf.set_transform(None)
    finally:
        await inf.stop()
    raw = make_informer(src)
    raw.set_transform(None)
    raw.start()
    try:
        await raw.wait_for_sync(5)
        assert "managedFields" in raw.indexer.get_by_key("default/a")["metadata"]
    finally:
        await raw.stop()
    plain = {"metadata": {"name": "x"}}
    assert strip_managed_fields(plain) is plain


def test_for_class_chooses_what_the_transform_does_for_a_class() -> None:
    lazy = LazyObject.from_json(b'{"metadata": {"name": "a", "managedFields": [{"manager": "m"}]}, "data": {}}')
    method = for_class(strip_managed_fields, LazyObject)
    assert method is LazyObject.without_managed_fields
    assert method(lazy).to_dict() == strip_managed_fields(lazy).to_dict() == {"metadata": {"name": "a"}, "data": {}}
    assert for_class(strip_managed_fields, dict) is strip_managed_fields
    assert for_class(strip_last_applied, LazyObject) is strip_last_applied


class WireListerWatcher:
    """A FakeSource's lists and watches sent through the client's decoders as JSON bytes (what a
    ClientListerWatcher hands the reflector), with the client's form that decodes without managedFields."""

    def __init__(self, src: FakeSource, drop_managed_fields: bool = False) -> None:
        self.src = src
        self.drop = drop_managed_fields

    def without_managed_fields(self) -> WireListerWatcher:
        return WireListerWatcher(self.src, drop_managed_fields=True)

    async def list(self, options: ListOptions) -> ListResult:
        result = await self.src.list(options)
        body = orjson.dumps({"kind": "ConfigMapList", "apiVersion": "v1", "items": result.items,
                             "metadata": {"resourceVersion": result.resource_version}})
        items, rv, _, _ = decode_list(body, drop_managed_fields=self.drop)
        return ListResult(items, rv)  # type: ignore[arg-type]

    async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        async for ev in self.src.watch(options):
            line = orjson.dumps({"type": ev.type, "object": ev.object})
            yield decode_watch_line(line, drop_managed_fields=self.drop)


def managed(name: str, value: str = "1") -> dict[str, Any]:
    obj = cm(name, value=value)
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:data": {"f:v": {}}}}]
    obj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": name}
    return obj


@pytest.mark.parametrize("default", [strip_managed_fields, strip_last_applied])
async def test_default_transform_done_while_decoding_caches_the_very_same_objects(default: Any) -> None:
    src = FakeSource()
    src.create(managed("listed"))
    seen: list[Any] = []

    def users(obj: Any) -> Any:  # a user transform: the plain path, objects arrive with managedFields
        seen.append(obj)
        return default(obj)

    informers = [make_informer(WireListerWatcher(src), transform=t) for t in (default, users)]
    for inf in informers:
        inf.start()
    try:
        for inf in informers:
            await inf.wait_for_sync(5)
        src.create(managed("watched"))
        src.update(managed("listed", value="2"))
        for inf in informers:
            await wait_until(lambda inf=inf: inf.indexer.get_by_key("default/watched") is not None and
                             inf.indexer.get_by_key("default/listed")["data"]["v"] == "2")
        cut, plain = (inf.indexer for inf in informers)
        assert sorted(cut.list_keys()) == sorted(plain.list_keys()) == ["default/listed", "default/watched"]
        for key in cut.list_keys():
            got, want = cut.get_by_key(key), plain.get_by_key(key)
            assert got.to_json() == want.to_json() and got == want and "managedFields" not in got["metadata"]
        assert seen and all("managedFields" in obj["metadata"] for obj in seen)
        assert informers[0]._reflectors[0].lw.drop and not informers[1]._reflectors[0].lw.drop
    finally:
        for inf in informers:
            await inf.stop()


@contextlib.asynccontextmanager
async def manual(inf: SharedIndexInformer) -> AsyncIterator[Callable[[], Any]]:
    """Drive an informer by hand (no reflector): run its listeners in a task group; yield an async drain()."""
    inf._started = True

    async def drain() -> None:
        while len(inf._fifo):
            await inf._fifo.pop(inf._handle_deltas)

    async with asyncio.TaskGroup() as tg:
        for listener in inf._listeners:
            listener.start(tg)
        try:
            yield drain
        finally:
            for listener in inf._listeners:
                listener.stop()


async def test_resync_reaches_only_due_handlers_and_skips_pending_keys() -> None:
    clock = FakeClock()
    inf = SharedIndexInformer(FakeSource(), clock=clock, resync=0.0)
    fast, slow, never = Recorder(), Recorder(), Recorder()
    fast_reg = inf.add_event_handler(fast, resync=10.0)
    inf.add_event_handler(slow, resync=30.0)
    inf.add_event_handler(never)
    assert inf._check_period == 10.0 and fast_reg.resync_period == 10.0
    async with manual(inf) as drain:
        fifo = inf._fifo
        a1, b1 = {**cm("a"), "metadata": {"name": "a", "namespace": "default", "resourceVersion": "1"}}, \
            {**cm("b"), "metadata": {"name": "b", "namespace": "default", "resourceVersion": "2"}}
        fifo.replace([a1, b1], "2")
        await drain()
        a2 = {**a1, "metadata": {**a1["metadata"], "resourceVersion": "3"}, "data": {"v": "2"}}
        fifo.update(a2)  # pending when the resync happens
        clock.step(10)
        assert inf._should_resync()
        fifo.resync()
        await drain()
        await wait_until(lambda: len(fast.events) == 4 and len(never.events) == 3 and len(slow.events) == 3)
        assert fast.events[2:] == [("update", "a", "2", False, False), ("update", "b", "1", True, True)]
        assert slow.events[2:] == never.events[2:] == [("update", "a", "2", False, False)]
        clock.step(20)
        assert inf._should_resync()
        fifo.resync()
        await drain()
        await wait_until(lambda: len(slow.events) == 5 and len(fast.events) == 6)
        assert never.events[3:] == []


async def test_replaced_with_unchanged_rv_is_a_resync() -> None:
    inf = SharedIndexInformer(FakeSource(), clock=FakeClock())
    rec = Recorder()
    inf.add_event_handler(rec)
    async with manual(inf) as drain:
        a1 = {"metadata": {"name": "a", "namespace": "d", "resourceVersion": "1"}, "data": {"v": "1"}}
        inf._fifo.replace([a1], "1")
        await drain()
        inf._fifo.replace([dict(a1)], "1")  # relist, nothing changed: no handler is due
        await drain()
        a2 = {**a1, "metadata": {**a1["metadata"], "resourceVersion": "2"}, "data": {"v": "2"}}
        inf._fifo.replace([a2], "2")
        await drain()
        await wait_until(lambda: len(rec.events) == 2)
        assert rec.events == [("add", "a", True), ("update", "a", "2", False, False)]


async def test_slow_and_raising_handlers_block_nobody() -> None:
    src = FakeSource()
    clock = FakeClock()
    inf = make_informer(src, clock)
    release_async = asyncio.Event()
    release_thread = threading.Event()
    stuck_async: list[str] = []

    async def slow_async(obj: Any) -> None:
        await release_async.wait()
        stuck_async.append(obj["metadata"]["name"])

    def slow_sync(obj: Any) -> None:
        release_thread.wait(10)

    def boom(obj: Any) -> None:
        raise ValueError("handler bug")

    fast = Recorder()
    slow_reg = inf.add_event_handler(on_add=slow_async)
    thread_reg = inf.add_event_handler(on_add=slow_sync)
    boom_reg = inf.add_event_handler(on_add=boom)
    inf.add_event_handler(fast)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        for i in range(50):
            src.create(cm(f"o{i}"))
        await wait_until(lambda: len(fast.events) == 50 and boom_reg.errors == 50 and boom_reg.pending == 0)
        assert len(inf.indexer) == 50
        assert slow_reg.pending == 50 and thread_reg.pending == 50
        clock.step(7)
        assert slow_reg.lag_seconds == 7.0 and boom_reg.lag_seconds == 0.0
        release_async.set()
        release_thread.set()
        await wait_until(lambda: slow_reg.pending == 0 and thread_reg.pending == 0)
        assert stuck_async == [f"o{i}" for i in range(50)]
        src.create(cm("late"))
        await wait_until(lambda: boom_reg.errors == 51 and len(fast.events) == 51)
    finally:
        release_thread.set()
        await inf.stop()


async def test_late_handler_gets_every_cached_object_once_and_own_has_synced() -> None:
    src = FakeSource()
    for i in range(20):
        src.create(cm(f"o{i}"))
    inf = make_informer(src)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        gate = threading.Event()
        late = Recorder()

        def on_add(obj: Any, is_in_initial_list: bool = False) -> None:
            gate.wait(10)
            late.on_add(obj, is_in_initial_list)

        reg = inf.add_event_handler(on_add=on_add, on_update=late.on_update)
        assert inf.has_synced() and not reg.has_synced()
        waiter = asyncio.create_task(reg.wait_for_sync())
        src.update(cm("o3", value="2"))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        gate.set()
        assert await asyncio.wait_for(waiter, 5) and reg.has_synced()
        await wait_until(lambda: len(late.events) == 21)
        adds = late.of("add")
        assert sorted(e[1] for e in adds) == sorted(f"o{i}" for i in range(20))
        assert all(e[2] for e in adds)
        assert late.events[-1] == ("update", "o3", "2", False, False)
    finally:
        await inf.stop()


async def test_per_registration_has_synced_waits_for_initial_notifications() -> None:
    src = FakeSource()
    for i in range(5):
        src.create(cm(f"o{i}"))
    inf = make_informer(src)
    gate = asyncio.Event()

    async def slow(obj: Any) -> None:
        await gate.wait()

    slow_reg = inf.add_event_handler(on_add=slow)
    fast_reg = inf.add_event_handler(on_add=lambda obj: None)
    assert not fast_reg.has_synced()
    inf.start()
    try:
        await inf.wait_for_sync(5)
        await wait_until(fast_reg.has_synced)
        assert not slow_reg.has_synced()
        gate.set()
        await wait_until(slow_reg.has_synced)
    finally:
        await inf.stop()


async def test_remove_stops_delivery() -> None:
    src = FakeSource()
    inf = make_informer(src)
    kept, removed = Recorder(), Recorder()
    inf.add_event_handler(kept)
    reg = inf.add_event_handler(removed)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        src.create(cm("a"))
        await wait_until(lambda: len(kept.events) == 1 and len(removed.events) == 1)
        reg.remove()
        reg.remove()
        assert not reg.active and inf.registrations == 1
        src.create(cm("b"))
        await wait_until(lambda: len(kept.events) == 2)
        assert len(removed.events) == 1
    finally:
        await inf.stop()


async def test_handler_object_with_async_methods_and_flags() -> None:
    src = FakeSource()
    src.create(cm("a"))
    got: list[tuple[Any, ...]] = []

    class Handler(ResourceEventHandler):
        async def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:
            got.append(("add", is_in_initial_list))

        async def on_update(self, old: Any, new: Any, *, is_resync: bool) -> None:
            got.append(("update", is_resync))

    inf = make_informer(src)
    inf.add_event_handler(Handler())
    inf.start()
    try:
        await inf.wait_for_sync(5)
        src.update(cm("a", value="2"))
        src.delete("a", "default")  # base-class no-op: never called, never fails
        await wait_until(lambda: len(got) == 2 and len(inf.indexer) == 0)
        assert got == [("add", True), ("update", False)]
    finally:
        await inf.stop()


async def test_add_indexers_before_and_after_start() -> None:
    src = FakeSource()
    src.create(cm("a", app="web"))
    src.create(cm("b", app="db"))
    inf = make_informer(src, indexers={"by_name": lambda o: [o["metadata"]["name"]]})
    inf.start()
    try:
        await inf.wait_for_sync(5)
        inf.add_indexers({"by_app": lambda o: [o["metadata"]["labels"].get("app", "")]})
        assert [o["metadata"]["name"] for o in inf.indexer.by_index("by_app", "web")] == ["a"]
        src.update(cm("b", app="web"))
        await wait_until(lambda: len(inf.indexer.by_index("by_app", "web")) == 2)
        assert inf.indexer.by_index("by_name", "b")[0]["metadata"]["labels"]["app"] == "web"
    finally:
        await inf.stop()


async def test_mutation_detector() -> None:
    src = FakeSource()
    src.create(cm("a"))
    src.create(cm("b"))
    inf = make_informer(src)
    inf.enable_mutation_detector(interval=0, raise_on_mutation=True)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        assert inf.check_mutations() == []
        inf.indexer.get_by_key("default/b")["data"]["v"] = "mutated"
        with pytest.raises(CacheMutationError, match="default/b"):
            inf.check_mutations()
    finally:
        await inf.stop()


async def test_stop_is_idempotent_and_run_returns() -> None:
    inf = make_informer(FakeSource())
    task = inf.start()
    await inf.wait_for_sync(5)
    await inf.stop()
    await inf.stop()
    assert task.done() and not task.cancelled() and inf.is_stopped
    with pytest.raises(RuntimeError):
        await inf.run()


async def test_watch_error_handler_hook() -> None:
    src = FakeSource()
    seen: list[BaseException] = []
    inf = make_informer(src)
    inf.set_watch_error_handler(lambda reflector, exc: seen.append(exc))
    src.fail_next_list(ConnectionResetError("reset"))
    clock = inf.clock
    inf.start()
    try:
        assert isinstance(clock, FakeClock)
        await clock.wait_for_waiters(1)
        clock.step(2)
        assert await inf.wait_for_sync(5)
        assert [type(e) for e in seen] == [ConnectionResetError]
    finally:
        await inf.stop()


async def test_periodic_resync_end_to_end() -> None:
    src = FakeSource()
    src.create(cm("a"))
    clock = FakeClock()
    inf = make_informer(src, clock, resync=10.0)
    due, never = Recorder(), Recorder()
    inf.add_event_handler(due)
    inf.add_event_handler(never, resync=0)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        await wait_until(lambda: len(due.events) == 1 and len(never.events) == 1)
        await clock.wait_for_waiters(1)  # the reflector's resync timer
        clock.step(10)
        await wait_until(lambda: len(due.events) == 2)
        assert due.events[1] == ("update", "a", "1", True, True)
        assert inf.stats.reflector.resyncs == 1
        clock.step(10)
        await wait_until(lambda: len(due.events) == 3)
        assert never.events == [("add", "a", True)]
    finally:
        await inf.stop()


async def test_deleted_event_for_unknown_key_is_ignored() -> None:
    src = FakeSource()
    src.create(cm("known"))

    class WithGhost:
        def __init__(self) -> None:
            self.first = True

        async def list(self, options: Any) -> Any:
            return await src.list(options)

        def watch(self, options: Any) -> Any:
            inner = src.watch(options)
            if not self.first:
                return inner
            self.first = False

            async def gen() -> Any:
                from kinformer.listwatch import WatchEvent

                ghost = {"metadata": {"name": "ghost", "namespace": "default", "resourceVersion": "1"}}
                yield WatchEvent("DELETED", ghost)
                async for event in inner:
                    yield event
            return gen()

    rec = Recorder()
    inf = SharedIndexInformer(WithGhost(), clock=FakeClock(), rng=random.Random(1))
    inf.add_event_handler(rec)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        src.delete("known", "default")
        await wait_until(lambda: len(rec.events) == 2)
        assert rec.events == [("add", "known", True), ("delete", "known")]
        assert inf.stats.reflector.deleted == 2 and len(inf.indexer) == 0
    finally:
        await inf.stop()


async def test_transform_error_on_one_watched_object_does_not_stop_the_informer() -> None:
    src = FakeSource()
    src.create(cm("a"))

    def transform(obj: Any) -> Any:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("cannot transform this object")
        return obj

    inf = make_informer(src, transform=transform)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        src.create(cm("bad"))
        src.create(cm("after"))
        # client-go logs a store error for one watch event and goes on with the next one
        await wait_until(lambda: "default/after" in inf.indexer, timeout=2)
    finally:
        await inf.stop()


async def test_handler_raising_cancelled_error_keeps_receiving_events() -> None:
    src = FakeSource()
    src.create(cm("a"))
    inf = make_informer(src)
    seen: list[str] = []

    async def on_add(obj: Any) -> None:
        seen.append(obj["metadata"]["name"])
        if obj["metadata"]["name"] == "a":
            await cancelled_future()  # e.g. awaiting a shared future someone else cancelled

    reg = inf.add_event_handler(on_add=on_add)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        await wait_until(lambda: seen == ["a"])
        src.create(cm("b"))
        await wait_until(lambda: "b" in seen, timeout=2)
        assert reg.errors == 1
    finally:
        await inf.stop()


async def test_removed_plain_handler_gets_no_more_notifications() -> None:
    src = FakeSource()
    for name in ("a", "b", "c"):
        src.create(cm(name))
    inf = make_informer(src)
    entered = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    def on_add(obj: Any) -> None:
        calls.append(obj["metadata"]["name"])
        if len(calls) == 1:
            entered.set()
            release.wait(5)

    reg = inf.add_event_handler(on_add=on_add)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        await wait_until(entered.is_set)
        reg.remove()  # documented: "Stop and forget a handler; pending notifications are dropped"
        release.set()
        for thread in threading.enumerate():
            if thread.name.startswith("kinformer-handler-review#"):
                await asyncio.to_thread(thread.join, 5)
        assert calls == [calls[0]], f"called after remove(): {calls[1:]}"
    finally:
        release.set()
        await inf.stop()


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
async def test_plain_handler_returning_a_coroutine_is_awaited() -> None:
    src = FakeSource()
    src.create(cm("a"))
    inf = make_informer(src)
    seen: list[str] = []

    async def record(obj: Any) -> None:
        seen.append(obj["metadata"]["name"])

    # as_reconcile_func awaits what a plain reconciler returns; handlers should do the same
    inf.add_event_handler(on_add=lambda obj: record(obj))
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        await wait_until(lambda: seen == ["a"], timeout=2)
    finally:
        await inf.stop()


async def test_gc_freeze_keeps_the_synced_cache_out_of_the_cyclic_collector() -> None:
    import gc

    src = FakeSource()
    for i in range(30):
        src.create(cm(f"o{i}"))
    inf = make_informer(src, gc_freeze=True)
    frozen_before = gc.get_freeze_count()
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        await wait_until(lambda: gc.get_freeze_count() > frozen_before, what="a freeze at sync")
        assert len(inf.indexer) == 30
        src.create(cm("later"))
        await wait_until(lambda: len(inf.indexer) == 31)
    finally:
        await inf.stop()
        gc.unfreeze()


async def test_a_watch_event_the_cache_rejects_is_counted_and_the_informer_goes_on() -> None:
    def by_owner(obj: Any) -> list[str]:
        if obj["metadata"]["name"] == "boom":
            raise ValueError("index function bug")
        return ["x"]

    src = FakeSource()
    inf = make_informer(src, indexers={"owner": by_owner})
    rec = Recorder()
    inf.add_event_handler(rec)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        src.create(cm("boom"))
        src.create(cm("ok"))
        await wait_until(lambda: rec.events == [("add", "ok", False)])
        stats = inf.stats
        assert stats.process_errors == 1 and stats.reflector.store_errors == 0  # the informer's, not the watch's
        assert inf.indexer.list_keys() == ["default/ok"] and len(inf._fifo) == 0
    finally:
        await inf.stop()


class ScriptedLW:
    """Lists nothing at RV 10; its watch delivers the batches pushed with :meth:`push`, one event at a time."""

    def __init__(self) -> None:
        self.batches: asyncio.Queue[list[WatchEvent]] = asyncio.Queue()
        self.rv = 10

    def push(self, *events: tuple[str, dict[str, Any]]) -> None:
        batch = []
        for kind, obj in events:
            self.rv += 1
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
            batch.append(WatchEvent(kind, obj))
        self.batches.put_nowait(batch)

    async def list(self, options: ListOptions) -> ListResult:
        return ListResult([], "10")

    async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        async for batch in self.watch_batches(options):
            for event in batch:
                yield event

    async def watch_batches(self, options: ListOptions) -> AsyncIterator[list[WatchEvent]]:
        while True:
            yield await self.batches.get()


class OneByOneLW(ScriptedLW):
    """The same watch without ``watch_batches``: the reflector gets every event alone."""

    watch_batches = None  # type: ignore[assignment]

    async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        while True:
            for event in await self.batches.get():
                yield event


class AsyncRecorder(Recorder):
    async def on_add(self, obj: Any, is_in_initial_list: bool = False) -> None:  # type: ignore[override]
        super().on_add(obj, is_in_initial_list)

    async def on_update(self, old: Any, new: Any, is_resync: bool = False) -> None:  # type: ignore[override]
        super().on_update(old, new, is_resync)

    async def on_delete(self, obj: Any) -> None:  # type: ignore[override]
        super().on_delete(obj)


async def started(lw: ScriptedLW, **kwargs: Any) -> tuple[SharedIndexInformer, list[int], Recorder, Recorder]:
    """A started, synced informer on ``lw`` with a plain and an async recorder; the list records the size of
    every batch handed to the informer's direct path."""
    inf = make_informer(lw, **kwargs)
    direct_calls = direct_batches(inf)
    plain, coro = Recorder(), AsyncRecorder()
    inf.add_event_handler(plain)
    inf.add_event_handler(coro)
    inf.start()
    assert await inf.wait_for_sync(5)
    return inf, direct_calls, plain, coro


_SCRIPT = [(("ADDED", cm("a")), ("ADDED", cm("b")), ("MODIFIED", cm("a", value="2"))),
           (("DELETED", cm("b")), ("DELETED", cm("ghost")), ("ADDED", cm("c")), ("ADDED", cm("c", value="3"))),
           (("MODIFIED", cm("c", value="4")),)]
_EXPECTED = [("add", "a", False), ("add", "b", False), ("update", "a", "2", False, False), ("delete", "b"),
             ("add", "c", False), ("update", "c", "3", False, False), ("update", "c", "4", False, False)]


async def run_script(lw: ScriptedLW) -> tuple[list[int], dict[str, Any], list[Any], str]:
    """_SCRIPT through an informer on ``lw``: the sizes of the direct calls, the cache, its namespace index and
    the cache's resourceVersion, once both handlers saw _EXPECTED."""
    inf, direct_calls, plain, coro = await started(lw)
    try:
        for batch in _SCRIPT:
            lw.push(*batch)
        await wait_until(lambda: len(plain.events) == len(coro.events) == len(_EXPECTED))
        assert plain.events == coro.events == _EXPECTED
        assert inf.stats.deltas == 8 and inf.stats.process_errors == 0
        return (direct_calls, {k: inf.indexer.get_by_key(k) for k in inf.indexer.list_keys()},
                inf.indexer.by_index("namespace", "default"), inf.cache_resource_version)
    finally:
        await inf.stop()


async def test_a_watch_batch_applied_in_one_call_gives_the_cache_and_notifications_of_one_by_one() -> None:
    batched = await run_script(ScriptedLW())
    one_by_one = await run_script(OneByOneLW())
    assert batched[0] == [3, 4, 1] and one_by_one[0] == [1] * 8  # one direct call per batch
    assert batched[1:] == one_by_one[1:]
    assert sorted(batched[1]) == ["default/a", "default/c"] and batched[3] == "18"


async def test_a_keyless_object_in_a_batch_is_counted_and_skipped_and_the_rest_applied() -> None:
    lw = ScriptedLW()
    inf, direct_calls, plain, coro = await started(lw)
    try:
        keyless = {"metadata": {"namespace": "default"}, "data": {"v": "1"}}
        lw.push(("ADDED", cm("a")), ("ADDED", keyless), ("MODIFIED", cm("a", value="2")))
        await wait_until(lambda: len(coro.events) == 2 and len(plain.events) == 2)
        assert coro.events == [("add", "a", False), ("update", "a", "2", False, False)] == plain.events
        stats = inf.stats
        assert stats.process_errors == 1 and stats.reflector.store_errors == 0 and direct_calls == [3]
        assert inf.indexer.list_keys() == ["default/a"] and inf.last_sync_resource_version == "13"
    finally:
        await inf.stop()


async def test_a_failed_delta_is_logged_with_the_cache_lock_released() -> None:
    lw = ScriptedLW()
    inf, _, plain, coro = await started(lw)
    lock_free: list[bool] = []

    class ReadsTheCache(logging.Handler):  # e.g. a handler that reports the cache's size
        def emit(self, record: logging.LogRecord) -> None:
            acquired = inf.indexer.lock.acquire(timeout=1)
            lock_free.append(acquired)
            if acquired:
                inf.indexer.lock.release()

    handler = ReadsTheCache(logging.ERROR)
    logger = logging.getLogger("kinformer.cache.shared_informer")
    logger.addHandler(handler)
    try:
        lw.push(("ADDED", {"metadata": {"namespace": "default"}}), ("ADDED", cm("a")))
        await wait_until(lambda: len(coro.events) == 1 and len(plain.events) == 1)
        assert lock_free == [True] and inf.stats.process_errors == 1
    finally:
        logger.removeHandler(handler)
        await inf.stop()


async def test_an_index_function_raising_mid_batch_skips_that_delta_only() -> None:
    def by_owner(obj: Any) -> list[str]:
        if obj["data"]["v"] == "boom":
            raise ValueError("index function bug")
        return [obj["metadata"]["name"]]

    lw = ScriptedLW()
    inf, direct_calls, plain, coro = await started(lw, indexers={"owner": by_owner})
    try:
        lw.push(("ADDED", cm("a")), ("MODIFIED", cm("a", value="boom")), ("ADDED", cm("b", value="boom")),
                ("ADDED", cm("c")))
        await wait_until(lambda: len(coro.events) == 2 and len(plain.events) == 2)
        assert coro.events == [("add", "a", False), ("add", "c", False)] == plain.events
        assert inf.stats.process_errors == 2 and direct_calls == [4]
        assert inf.indexer.get_by_key("default/a")["data"]["v"] == "1"  # the failed update left it as it was
        assert sorted(inf.indexer.list_keys()) == ["default/a", "default/c"]
        assert inf.indexer.index_keys("owner", "c") == ["default/c"] and not inf.indexer.index_keys("owner", "b")
    finally:
        await inf.stop()


async def test_a_slow_handler_blocks_nobody_when_batches_are_applied_in_one_call() -> None:
    lw = ScriptedLW()
    release = threading.Event()
    entered = threading.Event()

    def slow(obj: Any) -> None:
        entered.set()
        release.wait(10)

    inf, direct_calls, plain, coro = await started(lw)
    slow_reg = inf.add_event_handler(on_add=slow)
    try:
        lw.push(*[("ADDED", cm(f"o{i}")) for i in range(5)])
        lw.push(*[("ADDED", cm(f"o{i}")) for i in range(5, 10)])
        await wait_until(lambda: len(coro.events) == 10 and len(plain.events) == 10)
        await wait_until(entered.is_set)
        assert len(inf.indexer) == 10 and slow_reg.pending == 10 and direct_calls == [5, 5]
        release.set()
        await wait_until(lambda: slow_reg.pending == 0 and slow_reg.processed == 10)
    finally:
        release.set()
        await inf.stop()


def _labelled_web(obj: Any) -> bool:
    return obj["metadata"]["labels"].get("app") == "web"


async def test_accepts_filters_before_buffering_and_an_object_leaving_the_filter_is_seen() -> None:
    """Only accepted changes reach the handler (the initial list too); an update from accepted to rejected
    is delivered (old or new), a later change of the rejected object is not, nor its delete."""
    src = FakeSource()
    src.create(cm("web-1", app="web"))
    src.create(cm("db-1", app="db"))
    inf = make_informer(src)
    rec, everything = Recorder(), Recorder()
    reg = inf.add_event_handler(rec, accepts=_labelled_web)
    inf.add_event_handler(everything)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        await wait_until(reg.has_synced)
        assert rec.events == [("add", "web-1", True)]
        src.update(cm("db-1", value="2", app="db"))
        src.update(cm("web-1", value="2", app="db"))  # leaves the filter
        src.update(cm("web-1", value="3", app="db"))  # outside it
        src.update(cm("db-1", value="3", app="web"))  # enters it
        src.delete("web-1", "default")
        src.delete("db-1", "default")
        await wait_until(lambda: len(everything.events) == 8)
        await wait_until(lambda: len(rec.events) == 4)
        assert rec.events[1:] == [("update", "web-1", "2", False, False), ("update", "db-1", "3", False, False),
                                  ("delete", "db-1")]
        assert reg.processed == 4 and reg.errors == 0
    finally:
        await inf.stop()


async def test_a_late_filtered_handler_gets_only_the_cached_objects_it_accepts() -> None:
    src = FakeSource()
    for i in range(6):
        src.create(cm(f"o{i}", app="web" if i % 2 else "db"))
    inf = make_informer(src)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        rec = Recorder()
        reg = inf.add_event_handler(rec, accepts=_labelled_web)
        assert await reg.wait_for_sync()
        await wait_until(lambda: len(rec.events) == 3)
        assert sorted(rec.events) == [("add", "o1", True), ("add", "o3", True), ("add", "o5", True)]
        assert reg.pending == 0
    finally:
        await inf.stop()


async def test_a_raising_accepts_is_a_handler_error_and_the_informer_goes_on() -> None:
    src = FakeSource()
    inf = make_informer(src)
    rec, other = Recorder(), Recorder()

    def fussy(obj: Any) -> bool:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("cannot judge")
        return True

    reg = inf.add_event_handler(rec, accepts=fussy)
    inf.add_event_handler(other)
    inf.start()
    try:
        await inf.wait_for_sync(5)
        src.create(cm("bad"))
        src.create(cm("good"))
        await wait_until(lambda: len(rec.events) == 2 and len(other.events) == 2)
        assert [e[1] for e in rec.events] == ["bad", "good"] and reg.errors == 1
        assert inf.stats.process_errors == 0
    finally:
        await inf.stop()


async def test_accepts_filters_a_watch_batch_applied_in_one_call() -> None:
    lw = ScriptedLW()
    inf, direct_calls, _, coro = await started(lw)
    rec = Recorder()
    reg = inf.add_event_handler(rec, accepts=_labelled_web)
    try:
        assert await reg.wait_for_sync()
        lw.push(("ADDED", cm("web-1", app="web")), ("ADDED", cm("db-1", app="db")),
                ("MODIFIED", cm("web-1", value="2", app="db")), ("MODIFIED", cm("web-1", value="3", app="db")))
        await wait_until(lambda: len(coro.events) == 4)
        await wait_until(lambda: reg.processed == 2)
        assert direct_calls == [4] and rec.events == [("add", "web-1", False), ("update", "web-1", "2", False, False)]
    finally:
        await inf.stop()

"""Reflector resourceVersion state machine, failures and backoff, against FakeSource and FakeClock."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from kinformer import errors
from kinformer.cache.delta_fifo import DeltaFIFO, DeltaType
from kinformer.cache.fake import FakeSource
from kinformer.cache.reflector import Backoff, Reflector
from kinformer.cache.store import Indexer
from kinformer.clock import FakeClock
from kinformer.listwatch import ListOptions, ListResult, TweakedListerWatcher, WatchEvent
from testlib import cm, wait_until


class RecordingStore:
    """Records what the reflector does to its store."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, Any]] = []
        self.replaced: list[tuple[list[Any], str]] = []
        self.resyncs = 0

    def add(self, obj: Any) -> None:
        self.ops.append(("add", obj["metadata"]["name"]))

    def update(self, obj: Any) -> None:
        self.ops.append(("update", obj["metadata"]["name"]))

    def delete(self, obj: Any) -> None:
        self.ops.append(("delete", obj["metadata"]["name"]))

    def replace(self, objs: list[Any], resource_version: str) -> None:
        self.replaced.append((list(objs), resource_version))

    def resync(self) -> None:
        self.resyncs += 1


class Env:
    def __init__(self, src: FakeSource | None = None, **kwargs: Any) -> None:
        self.src = src if src is not None else FakeSource()
        self.clock = FakeClock()
        self.store: RecordingStore = kwargs.pop("store", None) or RecordingStore()
        self.errors: list[BaseException] = []
        lw = kwargs.pop("lw", self.src)
        self.reflector = Reflector(lw, self.store, clock=self.clock, rng=random.Random(7),
                                   watch_error_handler=lambda r, e: self.errors.append(e), **kwargs)
        self.task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Env:
        self.task = asyncio.create_task(self.reflector.run())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.reflector.stop()
        assert self.task is not None
        await asyncio.wait_for(self.task, 5)

    async def synced(self, lists: int = 1) -> None:
        await wait_until(lambda: len(self.store.replaced) >= lists and self.src.open_watches > 0)

    async def step_backoff(self, seconds: float = 70.0) -> None:
        await self.clock.wait_for_waiters(1)
        self.clock.step(seconds)


async def test_first_list_is_paginated_at_rv_0_and_watch_starts_from_it() -> None:
    src = FakeSource()
    for i in range(1200):
        src.create(cm(f"o{i:04d}"))
    async with Env(src) as env:
        await env.synced()
        reqs = src.list_requests
        assert [(r.resource_version, r.limit, bool(r.continue_)) for r in reqs] == [
            ("0", 500, False), (None, 500, True), (None, 500, True)]
        items, rv = env.store.replaced[0]
        assert rv == "1200" and len(items) == 1200
        assert len({o["metadata"]["name"] for o in items}) == 1200
        watch = src.watch_requests[0]
        assert watch.resource_version == "1200" and watch.allow_watch_bookmarks
        assert 300 <= watch.timeout_seconds < 600
        assert env.reflector.last_sync_resource_version == "1200"


async def test_server_ignoring_limit_is_fine() -> None:
    src = FakeSource(watch_cache=True)
    for i in range(700):
        src.create(cm(f"o{i}"))
    async with Env(src) as env:
        await env.synced()
        assert len(src.list_requests) == 1 and len(env.store.replaced[0][0]) == 700


async def test_dropped_watch_resumes_from_last_rv_without_relist_or_loss() -> None:
    async with Env() as env:
        await env.synced()
        for i in range(3):
            env.src.create(cm(f"a{i}"))
        await wait_until(lambda: len(env.store.ops) == 3)
        last = env.reflector.last_sync_resource_version
        env.src.break_watches()
        env.src.update(cm("a1"))
        env.src.delete("a0", "default")
        await wait_until(lambda: len(env.store.ops) == 5)
        assert env.store.ops == [("add", "a0"), ("add", "a1"), ("add", "a2"), ("update", "a1"), ("delete", "a0")]
        assert env.src.watch_requests[-1].resource_version == last
        assert len(env.src.list_requests) == 1 and env.reflector.stats.relists == 0
        assert isinstance(env.errors[0], ConnectionError)
        assert env.reflector.last_sync_resource_version == env.src.resource_version


async def test_clean_close_rewatches_immediately_without_relist() -> None:
    async with Env() as env:
        await env.synced()
        env.src.create(cm("x"))
        await wait_until(lambda: len(env.store.ops) == 1)
        env.src.close_watches()
        env.src.create(cm("y"))
        await wait_until(lambda: len(env.store.ops) == 2)
        assert len(env.src.watch_requests) == 2 and env.src.watch_requests[1].resource_version == "1"
        assert len(env.src.list_requests) == 1 and env.errors == []
        assert env.reflector.stats.watch_restarts == 1


async def test_very_short_watch_backs_off_then_rewatches() -> None:
    async with Env() as env:
        await env.synced()
        env.src.close_watches()  # no event, no time passed: counts as a failure
        await env.clock.wait_for_waiters(1)
        assert len(env.src.watch_requests) == 1 and "very short watch" in str(env.errors[-1])
        env.clock.step(1.6)
        await wait_until(lambda: len(env.src.watch_requests) == 2 and env.src.open_watches == 1)
        assert len(env.src.list_requests) == 1


async def test_expired_watch_relists_at_last_rv_then_consistently() -> None:
    async with Env() as env:
        await env.synced()
        env.src.create(cm("keep"))
        env.src.create(cm("gone"))
        await wait_until(lambda: len(env.store.ops) == 2)
        last = env.reflector.last_sync_resource_version
        env.src.close_watches()  # events seen: rewatch at once
        await wait_until(lambda: len(env.src.watch_requests) == 2 and env.src.open_watches == 1)
        env.src.break_watches()  # no events on this one: back off
        await env.clock.wait_for_waiters(1)
        env.src.delete("gone", "default")
        env.src.create(cm("new"))
        env.src.compact()
        env.clock.step(5)  # rewatch from `last` -> ERROR 410 -> relist (after a backoff)
        await env.step_backoff()
        await env.synced(lists=2)
        rvs = [r.resource_version for r in env.src.list_requests]
        assert rvs == ["0", last, ""]
        assert not env.reflector.is_last_sync_resource_version_unavailable
        items, rv = env.store.replaced[-1]
        assert sorted(o["metadata"]["name"] for o in items) == ["keep", "new"]
        assert rv == env.src.resource_version == env.reflector.last_sync_resource_version
        assert any(errors.is_expired(e) for e in env.errors)
        assert env.reflector.stats.relists == 1


async def test_bookmarks_only_advance_the_resource_version() -> None:
    src = FakeSource()
    lw = src.lister_watcher("configmaps", namespace="mine")
    async with Env(src, lw=lw) as env:
        await env.synced()
        src.create(cm("other", ns="theirs"))
        src.create(cm("other2", ns="theirs"))
        src.bookmark()
        await wait_until(lambda: env.reflector.stats.bookmarks == 1)
        assert env.reflector.last_sync_resource_version == "2"
        assert env.store.ops == [] and len(env.store.replaced) == 1


async def test_watch_open_failures_back_off_and_rewatch_without_relist() -> None:
    async with Env() as env:
        await env.synced()
        env.src.fail_next_watch(ConnectionRefusedError("refused"))
        env.src.fail_next_watch(errors.TooManyRequests("slow down"))
        env.src.create(cm("a"))
        await wait_until(lambda: len(env.store.ops) == 1)
        env.src.close_watches()
        await wait_until(lambda: len(env.src.watch_requests) == 2)
        await env.step_backoff(1.6)
        await wait_until(lambda: len(env.src.watch_requests) == 3)
        await env.step_backoff(3.2)
        await wait_until(lambda: len(env.src.watch_requests) == 4 and env.src.open_watches == 1)
        assert [type(e) for e in env.errors] == [ConnectionRefusedError, errors.TooManyRequests]
        assert len(env.src.list_requests) == 1
        assert {r.resource_version for r in env.src.watch_requests[1:]} == {"1"}


async def test_error_event_other_than_expired_backs_off_and_rewatches() -> None:
    class ErrorOnce:
        def __init__(self, src: FakeSource) -> None:
            self.src, self.sent = src, False

        async def list(self, options: ListOptions) -> ListResult:
            return await self.src.list(options)

        def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
            if self.sent:
                return self.src.watch(options)
            self.sent = True

            async def gen() -> AsyncIterator[WatchEvent]:
                yield WatchEvent("ERROR", {"kind": "Status", "code": 500, "reason": "InternalError",
                                           "message": "boom"})
            return gen()

    src = FakeSource()
    async with Env(src, lw=ErrorOnce(src)) as env:
        await wait_until(lambda: len(env.store.replaced) == 1)
        await env.step_backoff(1.6)
        await wait_until(lambda: src.open_watches == 1)
        assert isinstance(env.errors[0], errors.ServerError)
        assert len(src.list_requests) == 1


async def test_list_failure_backs_off_and_relists() -> None:
    async with Env() as env:
        env.src.fail_next_list(errors.ServerError("down"))
        env.src.fail_next_list(ConnectionRefusedError("refused"))
        await env.step_backoff(1.6)
        await env.step_backoff(3.2)
        await env.synced()
        assert len(env.src.list_requests) == 3 and env.reflector.stats.list_errors == 2
        assert [type(e) for e in env.errors] == [errors.ServerError, ConnectionRefusedError]


async def test_expired_continue_token_falls_back_to_full_list() -> None:
    src = FakeSource()
    for i in range(800):
        src.create(cm(f"o{i:03d}"))

    class CompactAfterFirstPage:
        async def list(self, options: ListOptions) -> ListResult:
            result = await src.list(options)
            if options.continue_ is None and options.limit:
                src.create(cm("late"))
                src.compact()
            return result

        def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
            return src.watch(options)

    async with Env(src, lw=CompactAfterFirstPage()) as env:
        await env.synced()
        reqs = [(r.resource_version, r.limit, bool(r.continue_)) for r in src.list_requests]
        assert reqs == [("0", 500, False), (None, 500, True), ("0", None, False)]
        items, rv = env.store.replaced[0]
        assert len(items) == 801 and rv == "801"


async def test_too_large_rv_on_relist_switches_to_consistent_list() -> None:
    async with Env() as env:
        await env.synced()
        env.src.create(cm("a"))
        await wait_until(lambda: len(env.store.ops) == 1)
        env.src.fail_next_watch(errors.Expired("gone"))
        env.src.fail_next_list(errors.ServerTimeout("Too large resource version: 99, current: 1"))
        env.src.close_watches()
        await env.step_backoff()
        await env.synced(lists=2)
        assert [r.resource_version for r in env.src.list_requests] == ["0", "1", ""]


async def test_backoff_schedule_jitter_cap_and_reset() -> None:
    clock = FakeClock()
    backoff = Backoff(clock=clock, rng=random.Random(3))
    delays = [backoff.next_delay() for _ in range(9)]
    bases = [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0]
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay < 2 * base
    clock.step(119)
    assert backoff.next_delay() >= 30.0
    clock.step(121)
    assert 0.8 <= backoff.next_delay() < 1.6
    no_jitter = Backoff(clock=clock, jitter=0.0)
    assert [no_jitter.next_delay() for _ in range(3)] == [0.8, 1.6, 3.2]


async def test_resync_calls_store_when_should_resync_allows() -> None:
    allow = [False]
    async with Env(resync_period=10.0, should_resync=lambda: allow[0]) as env:
        await env.synced()
        await env.clock.wait_for_waiters(1)
        env.clock.step(10)
        await env.clock.wait_for_waiters(1)
        assert env.store.resyncs == 0
        allow[0] = True
        env.clock.step(10)
        await wait_until(lambda: env.store.resyncs == 1)


async def test_streaming_list_replaces_then_continues_on_the_same_watch() -> None:
    src = FakeSource()
    for i in range(5):
        src.create(cm(f"o{i}"))
    async with Env(src, use_streaming_list=True) as env:
        await env.synced()
        assert src.list_requests == []
        first = src.watch_requests[0]
        assert first.send_initial_events and first.resource_version_match == "NotOlderThan"
        assert first.resource_version == ""
        items, rv = env.store.replaced[0]
        assert len(items) == 5 and rv == "5"
        src.create(cm("later"))
        await wait_until(lambda: env.store.ops == [("add", "later")])
        assert len(src.watch_requests) == 1


async def test_streaming_list_falls_back_to_list() -> None:
    src = FakeSource()
    src.create(cm("a"))
    src.fail_next_watch(errors.MethodNotAllowed("no watch-list"))
    async with Env(src, use_streaming_list=True) as env:
        await env.synced()
        assert len(src.list_requests) == 1 and env.store.replaced[0][1] == "1"


async def test_tweaked_lister_watcher_applies_selectors_to_copies() -> None:
    src = FakeSource()
    src.create(cm("web", app="web"))
    src.create(cm("db", app="db"))

    def tweak(o: ListOptions) -> None:
        o.label_selector = "app=web"

    lw = TweakedListerWatcher(src, tweak)
    opts = ListOptions(resource_version="0")
    result = await lw.list(opts)
    assert [o["metadata"]["name"] for o in result.items] == ["web"] and opts.label_selector is None
    assert src.list_requests[-1].label_selector == "app=web"


def test_list_options_to_query() -> None:
    opts = ListOptions(resource_version="0", limit=500, allow_watch_bookmarks=True, timeout_seconds=300,
                       send_initial_events=True, resource_version_match="NotOlderThan", label_selector="a=b",
                       field_selector="metadata.name=x", continue_="tok")
    assert opts.to_query() == {
        "resourceVersion": "0", "resourceVersionMatch": "NotOlderThan", "limit": "500", "continue": "tok",
        "labelSelector": "a=b", "fieldSelector": "metadata.name=x", "timeoutSeconds": "300",
        "allowWatchBookmarks": "true", "sendInitialEvents": "true"}
    assert ListOptions().to_query() == {}


@pytest.mark.parametrize("watch_cache", [False, True])
async def test_fake_source_selectors_and_transitions(watch_cache: bool) -> None:
    src = FakeSource(watch_cache=watch_cache)
    lw = src.lister_watcher("configmaps", label_selector="app=web")
    watch = lw.watch(ListOptions(resource_version="0"))
    src.create(cm("a", app="web"))
    src.update(cm("a", app="db"))
    src.update(cm("a", app="web"))
    src.create(cm("b", app="db"))
    got = [(await anext(watch)) for _ in range(3)]
    await watch.aclose()
    assert [e.type for e in got] == ["ADDED", "DELETED", "ADDED"]
    listed = await lw.list(ListOptions())
    assert [o["metadata"]["name"] for o in listed.items] == ["a"]
    with pytest.raises(errors.ServerTimeout):
        await src.list(ListOptions(resource_version="99"))


async def test_fake_source_pagination_compaction_and_exact_reads() -> None:
    src = FakeSource()
    for i in range(5):
        src.create(cm(f"o{i}"))
    page = await src.list(ListOptions(limit=2))
    assert [o["metadata"]["name"] for o in page.items] == ["o0", "o1"] and page.remaining_item_count == 3
    src.delete("o2", "default")
    page2 = await src.list(ListOptions(limit=2, continue_=page.continue_))
    assert [o["metadata"]["name"] for o in page2.items] == ["o2", "o3"]  # the snapshot of the first page
    exact = await src.list(ListOptions(resource_version="3", resource_version_match="Exact"))
    assert [o["metadata"]["name"] for o in exact.items] == ["o0", "o1", "o2"] and exact.resource_version == "3"
    src.compact()
    with pytest.raises(errors.Expired):
        await src.list(ListOptions(limit=2, continue_=page2.continue_))
    with pytest.raises(errors.Expired):
        await src.list(ListOptions(resource_version="3"))
    watch = src.watch(ListOptions(resource_version="3"))
    event = await anext(watch)
    assert event.type == "ERROR" and errors.is_expired(errors.from_status(event.object))
    with pytest.raises(StopAsyncIteration):
        await anext(watch)


@pytest.mark.parametrize("garbage", ["-5", "abc", "1" * 23, "007", "18446744073709551616", " 5"])
async def test_bookmark_with_an_invalid_resource_version_is_ignored(garbage: str) -> None:
    async with Env() as env:
        await env.synced()
        env.src.create(cm("a"))
        await wait_until(lambda: env.reflector.last_sync_resource_version == "1")
        env.src.bookmark(garbage)
        await wait_until(lambda: env.reflector.stats.bad_resource_versions == 1)
        assert env.reflector.last_sync_resource_version == "1"
        env.src.create(cm("b"))
        await wait_until(lambda: env.reflector.last_sync_resource_version == "2")
        env.src.close_watches()
        await wait_until(lambda: len(env.src.watch_requests) == 2)
        assert [r.resource_version for r in env.src.watch_requests] == ["0", "2"]
        assert env.store.ops == [("add", "a"), ("add", "b")] and env.reflector.stats.bookmarks == 0


async def test_list_refused_as_bad_request_falls_back_to_a_consistent_list() -> None:
    async with Env() as env:
        await env.synced()
        env.src.create(cm("a"))
        await wait_until(lambda: env.reflector.last_sync_resource_version == "1")
        env.src.fail_next_watch(errors.BadRequest("invalid resource version"))
        env.src.fail_next_list(errors.BadRequest("invalid resource version"))
        env.src.close_watches()
        await env.step_backoff(1.6)  # one backoff before the relist, then at once the fallback
        await env.synced(lists=2)
        assert [r.resource_version for r in env.src.list_requests] == ["0", "1", ""]
        assert env.store.replaced[-1][1] == "1" and not env.reflector.is_last_sync_resource_version_unavailable


async def test_list_with_an_invalid_resource_version_fails_and_is_retried() -> None:
    src = FakeSource()
    src.create(cm("a"))
    calls: list[str | None] = []

    class GarbageFirstList:
        async def list(self, options: ListOptions) -> ListResult:
            calls.append(options.resource_version)
            result = await src.list(options)
            return ListResult(result.items, "-5" if len(calls) == 1 else result.resource_version)

        def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
            return src.watch(options)

    async with Env(src, lw=GarbageFirstList()) as env:
        await wait_until(lambda: len(calls) == 1)
        assert env.store.replaced == [] and env.reflector.stats.bad_resource_versions == 1
        await env.step_backoff(1.6)
        await env.synced()
        assert env.store.replaced[0][1] == "1" and calls == ["0", "0"]


async def test_resource_version_going_backwards_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    src = FakeSource()

    class Backwards:
        async def list(self, options: ListOptions) -> ListResult:
            return ListResult([], "10")

        async def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
            for rv in ("11", "12", "9"):
                yield WatchEvent("ADDED", {"metadata": {"name": f"o{rv}", "namespace": "d", "resourceVersion": rv}})
            await asyncio.Event().wait()

    with caplog.at_level("WARNING", logger="kinformer.cache.reflector"):
        async with Env(src, lw=Backwards()) as env:
            await wait_until(lambda: len(env.store.ops) == 3)
            assert env.reflector.stats.resource_version_regressions == 1
            assert env.reflector.last_sync_resource_version == "9"
    assert any("went back in resourceVersion from 12 to 9" in r.getMessage() for r in caplog.records)


async def test_silent_watch_is_reopened_from_the_last_rv_after_the_idle_timeout() -> None:
    async with Env(watch_idle_timeout=90.0) as env:
        await env.synced()
        env.src.create(cm("a"))
        await wait_until(lambda: env.reflector.last_sync_resource_version == "1")
        await env.clock.wait_for_waiters(1)  # the watchdog
        env.clock.step(60)
        env.src.bookmark()  # a healthy idle watch: the server's bookmark keeps it alive
        await wait_until(lambda: env.reflector.stats.bookmarks == 1)
        env.clock.step(60)
        await asyncio.sleep(0)
        assert env.reflector.stats.idle_watch_restarts == 0 and len(env.src.watch_requests) == 1
        assert env.reflector.seconds_since_last_event() == 60.0
        env.clock.step(30)  # 90 s without anything: dead
        await wait_until(lambda: len(env.src.watch_requests) == 2)
        assert env.reflector.stats.idle_watch_restarts == 1
        assert [r.resource_version for r in env.src.watch_requests] == ["0", "1"]
        assert len(env.src.list_requests) == 1
        env.src.create(cm("b"))
        await wait_until(lambda: env.store.ops == [("add", "a"), ("add", "b")])


async def test_staleness_keeps_growing_across_silent_reopens() -> None:
    """Reopening a watch is not news: only a list, an event or a bookmark received resets the staleness."""
    async with Env(watch_idle_timeout=1.0) as env:
        await env.synced()
        for reopens in range(1, 4):
            await env.clock.wait_for_waiters(1)  # the watchdog of the open watch
            env.clock.step(1.0)
            await wait_until(lambda n=reopens: len(env.src.watch_requests) == n + 1)
        assert env.reflector.stats.idle_watch_restarts == 3
        assert env.reflector.seconds_since_last_event() == 3.0
        env.src.bookmark()
        await wait_until(lambda: env.reflector.seconds_since_last_event() == 0.0)


async def test_garbage_bookmark_then_lost_history_relists_and_converges() -> None:
    """The wedge of a garbage BOOKMARK: after it the watch breaks and the history is gone; the relist asks for
    the last sane RV, then a consistent list, and the informer's cache matches the server again."""
    from kinformer.cache.shared_informer import SharedIndexInformer

    src = FakeSource()
    src.create(cm("a"))
    clock = FakeClock()
    inf = SharedIndexInformer(src, clock=clock, rng=random.Random(3), watch_idle_timeout=None)
    inf.start()
    try:
        assert await inf.wait_for_sync(5)
        src.bookmark("-5")
        await wait_until(lambda: inf.stats.reflector.bad_resource_versions == 1)
        src.delete("a", "default")
        src.create(cm("b"))
        src.compact()
        src.fail_next_list(errors.BadRequest("invalid resource version"))
        src.break_watches()  # re-watch from RV 1: 410 -> relist at 1 (refused, 400) -> list at ""
        await wait_until(lambda: len(src.watch_requests) == 2)
        await clock.wait_for_waiters(1)
        clock.step(1.6)
        await wait_until(lambda: inf.indexer.list_keys() == ["default/b"])
        rvs = [r.resource_version for r in src.list_requests] + [r.resource_version for r in src.watch_requests]
        assert "-5" not in rvs and [r.resource_version for r in src.list_requests] == ["0", "1", ""]
        assert inf.cache_resource_version == src.resource_version
    finally:
        await inf.stop()


async def test_reflector_stop_before_run_starts_is_not_lost() -> None:
    src = FakeSource()
    reflector = Reflector(src, DeltaFIFO(known_objects=Indexer()), clock=FakeClock(), rng=random.Random(3))
    task = asyncio.create_task(reflector.run())
    reflector.stop()
    done, _ = await asyncio.wait({task}, timeout=2)
    try:
        assert task in done, "run() ignored the earlier stop()"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class BatchedLW:
    """Lists an empty collection at RV 10; its watch comes as the given batches (then stays open, silent).
    Its one-event ``watch`` fails the test: a reflector must prefer ``watch_batches``."""

    def __init__(self, batches: list[list[WatchEvent]]) -> None:
        self.batches = batches
        self.requests: list[ListOptions] = []

    async def list(self, options: ListOptions) -> ListResult:
        return ListResult([], "10")

    def watch(self, options: ListOptions) -> AsyncIterator[WatchEvent]:
        raise AssertionError("watch() used although watch_batches() is offered")

    async def watch_batches(self, options: ListOptions) -> AsyncIterator[list[WatchEvent]]:
        self.requests.append(options)
        batches, self.batches = self.batches, []
        for batch in batches:
            yield batch
        await asyncio.Event().wait()


def _ev(kind: str, name: str, rv: str) -> WatchEvent:
    return WatchEvent(kind, {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv}})


async def test_watch_batches_are_applied_in_order_with_one_staleness_mark_per_batch() -> None:
    lw = BatchedLW([[_ev("ADDED", "a", "11"), _ev("ADDED", "b", "12")],
                    [_ev("MODIFIED", "a", "13"), _ev("BOOKMARK", "", "14"), _ev("DELETED", "b", "15")]])

    def tweak(o: ListOptions) -> None:
        o.label_selector = "app=web"

    async with Env(lw=TweakedListerWatcher(lw, tweak)) as env:
        await wait_until(lambda: len(env.store.ops) == 4)
        assert env.store.ops == [("add", "a"), ("add", "b"), ("update", "a"), ("delete", "b")]
        assert env.reflector.last_sync_resource_version == "15" and env.reflector.stats.bookmarks == 1
        assert [(r.resource_version, r.label_selector) for r in lw.requests] == [("10", "app=web")]
        assert env.reflector.last_event_at == env.clock.now()
        env.clock.step(3.0)
        assert env.reflector.seconds_since_last_event() == 3.0


async def test_each_resource_version_of_a_batch_is_checked_as_it_is_taken() -> None:
    """Sanity and order per event, whatever the last RV: a 20-digit RV above 2**64 - 1 is ignored even right
    after a sane 20-digit one it exceeds; one going back, or repeated, is followed (a regression logged)."""
    top = str(2**64 - 1)
    lw = BatchedLW([[_ev("ADDED", "a", "11"), _ev("ADDED", "b", top[:-1] + "0"), _ev("ADDED", "c", str(2**64)),
                     _ev("MODIFIED", "a", "12"), _ev("MODIFIED", "a", "12"), _ev("MODIFIED", "a", "012"),
                     _ev("MODIFIED", "a", top)]])
    async with Env(lw=lw) as env:
        await wait_until(lambda: len(env.store.ops) == 5)
        assert env.store.ops == [("add", "a"), ("add", "b"), ("update", "a"), ("update", "a"), ("update", "a")]
        stats = env.reflector.stats
        assert stats.bad_resource_versions == 2 and stats.resource_version_regressions == 1
        assert env.reflector.last_sync_resource_version == top
        assert stats.events == {"ADDED": 2, "MODIFIED": 3, "DELETED": 0, "BOOKMARK": 0, "ERROR": 0}


class BatchStore(RecordingStore):
    """A store that takes a watch batch's deltas in one call (as a RealFIFO); rejects objects named "bad"."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[tuple[DeltaType, str]]] = []

    def add_watch_deltas(self, deltas: list[tuple[DeltaType, Any]]) -> list[tuple[DeltaType, Exception]]:
        self.calls.append([(kind, obj["metadata"]["name"]) for kind, obj in deltas])
        return [(kind, ValueError("no key")) for kind, obj in deltas if obj["metadata"]["name"] == "bad"]


async def test_a_store_with_add_watch_deltas_gets_each_batch_in_one_call_in_order() -> None:
    lw = BatchedLW([[_ev("ADDED", "a", "11"), _ev("ADDED", "b", "12")],
                    [_ev("MODIFIED", "a", "13"), _ev("BOOKMARK", "", "14"), _ev("DELETED", "b", "15")],
                    [_ev("BOOKMARK", "", "16")]])
    store = BatchStore()
    reflector = Reflector(lw, store, clock=FakeClock(), rng=random.Random(7))
    task = asyncio.create_task(reflector.run())
    try:
        await wait_until(lambda: reflector.last_sync_resource_version == "16")
        # a batch of bookmarks only makes no call; the per-event methods are never used
        assert store.calls == [[(DeltaType.ADDED, "a"), (DeltaType.ADDED, "b")],
                               [(DeltaType.UPDATED, "a"), (DeltaType.DELETED, "b")]] and store.ops == []
        assert reflector.stats.events == {"ADDED": 2, "MODIFIED": 1, "DELETED": 1, "BOOKMARK": 2, "ERROR": 0}
    finally:
        reflector.stop()
        await asyncio.wait_for(task, 5)


def _status_event() -> WatchEvent:
    return WatchEvent("ERROR", {"kind": "Status", "code": 500, "reason": "InternalError", "message": "boom"})


@pytest.mark.parametrize("batched", [False, True], ids=["per-event store", "batch store"])
async def test_an_error_event_mid_batch_ends_the_watch_after_the_events_before_it(batched: bool) -> None:
    lw = BatchedLW([[_ev("ADDED", "a", "11"), _status_event(), _ev("ADDED", "c", "13")]])
    async with Env(lw=lw, store=BatchStore() if batched else RecordingStore()) as env:
        await wait_until(lambda: len(env.errors) == 1)
        await env.step_backoff(1.6)
        await wait_until(lambda: len(lw.requests) == 2)  # backed off, re-watched (no relist) from "a"'s RV
        applied = env.store.calls if isinstance(env.store, BatchStore) else [env.store.ops]
        assert applied == ([[(DeltaType.ADDED, "a")]] if batched else [[("add", "a")]])
        assert isinstance(env.errors[0], errors.ServerError) and env.reflector.stats.error_events == 1
        assert [r.resource_version for r in lw.requests] == ["10", "11"] and len(env.store.replaced) == 1


class RejectingStore(RecordingStore):
    def add(self, obj: Any) -> None:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("no key")
        super().add(obj)


@pytest.mark.parametrize("store_type", [RejectingStore, BatchStore])
async def test_a_delta_the_store_rejects_is_counted_and_the_rest_of_its_batch_applied(
        store_type: type[RecordingStore]) -> None:
    lw = BatchedLW([[_ev("ADDED", "a", "11"), _ev("ADDED", "bad", "12"), _ev("ADDED", "c", "13")],
                    [_ev("ADDED", "bad", "14")]])
    store = store_type()
    reflector = Reflector(lw, store, clock=FakeClock(), rng=random.Random(7))
    task = asyncio.create_task(reflector.run())
    try:
        await wait_until(lambda: reflector.stats.store_errors == 2)
        applied = store.calls if isinstance(store, BatchStore) else [store.ops]
        if isinstance(store, BatchStore):
            assert applied[0] == [(DeltaType.ADDED, "a"), (DeltaType.ADDED, "bad"), (DeltaType.ADDED, "c")]
        else:
            assert applied == [[("add", "a"), ("add", "c")]]
        # as client-go: the RV of an event the store rejected is taken (the watch resumes after it)
        assert reflector.last_sync_resource_version == "14" and reflector.stats.added == 4
    finally:
        reflector.stop()
        await asyncio.wait_for(task, 5)


async def test_a_batch_of_objects_of_several_classes_is_transformed_object_by_object() -> None:
    from kinformer.cache.transforms import strip_managed_fields
    from kinformer.client.objects import LazyObject

    def pod(name: str, rv: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
                             "managedFields": [{"manager": "m"}]}}

    lazy = [LazyObject.from_json(orjson.dumps(pod(n, rv))) for n, rv in (("a", "11"), ("c", "13"))]
    lw = BatchedLW([[WatchEvent("ADDED", lazy[0]), WatchEvent("ADDED", pod("b", "12")), WatchEvent("ADDED", lazy[1])]])
    got: list[Any] = []

    class Store(RecordingStore):
        def add_watch_deltas(self, deltas: list[tuple[DeltaType, Any]]) -> list[tuple[DeltaType, Exception]]:
            got.extend(obj for _, obj in deltas)
            return []

    async with Env(lw=lw, store=Store(), transform=strip_managed_fields) as env:
        await wait_until(lambda: len(got) == 3)
        assert [type(o) for o in got] == [LazyObject, dict, LazyObject]
        assert [(o["metadata"]["name"], "managedFields" in o["metadata"]) for o in got] == [
            ("a", False), ("b", False), ("c", False)]
        assert env.reflector.last_sync_resource_version == "13"


async def test_a_transform_replaced_between_batches_applies_from_the_next_batch() -> None:
    batches: asyncio.Queue[list[WatchEvent]] = asyncio.Queue()

    class QueuedLW(BatchedLW):
        async def watch_batches(self, options: ListOptions) -> AsyncIterator[list[WatchEvent]]:
            while True:
                yield await batches.get()

    store = BatchStore()
    reflector = Reflector(QueuedLW([]), store, clock=FakeClock(), rng=random.Random(7),
                          transform=lambda o: {"metadata": {**o["metadata"], "name": "first"}})
    task = asyncio.create_task(reflector.run())
    try:
        batches.put_nowait([_ev("ADDED", "a", "11")])
        await wait_until(lambda: len(store.calls) == 1)
        reflector.transform = lambda o: {"metadata": {**o["metadata"], "name": "second"}}
        batches.put_nowait([_ev("ADDED", "b", "12")])
        await wait_until(lambda: len(store.calls) == 2)
        assert store.calls == [[(DeltaType.ADDED, "first")], [(DeltaType.ADDED, "second")]]
    finally:
        reflector.stop()
        await asyncio.wait_for(task, 5)

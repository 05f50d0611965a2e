"""WorkQueue: de-duplication, one worker per key, requeue at done, shutdown and drain."""

from __future__ import annotations

import asyncio
import random
import threading
from collections import deque
from collections.abc import Coroutine, Hashable
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kinformer.workqueue import ShutDown, WorkQueue
from testlib import wait_until


def get_now(coro: Coroutine[Any, Any, Hashable]) -> Hashable:
    """Run ``q.get()`` to completion without an event loop; fails if it would suspend."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise AssertionError("get() suspended although an item was queued")


async def test_fifo_order_and_dedupe() -> None:
    q = WorkQueue()
    for key in ["a", "b", "a", "c", "b"]:
        q.add(key)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0
    assert q.processing_count == 3


def test_get_with_a_queued_item_does_not_suspend() -> None:
    q = WorkQueue()
    q.add("a")
    assert get_now(q.get()) == "a"
    assert q.is_processing("a")
    assert not q.is_dirty("a")


async def test_processing_item_is_not_handed_to_a_second_getter() -> None:
    q = WorkQueue()
    q.add("a")
    assert await q.get() == "a"
    q.add("a")
    assert len(q) == 0 and q.is_dirty("a")
    second = asyncio.create_task(q.get())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not second.done()
    q.done("a")
    assert await asyncio.wait_for(second, 2) == "a"
    assert q.is_processing("a") and not q.is_dirty("a")


async def test_readd_while_processing_is_queued_once_at_done() -> None:
    q = WorkQueue()
    q.add("a")
    await q.get()
    q.add("a")
    q.add("a")
    q.add("b")
    assert len(q) == 1
    q.done("a")
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["b", "a"]


async def test_done_without_readd_does_not_requeue() -> None:
    q = WorkQueue()
    q.add("a")
    await q.get()
    q.done("a")
    assert len(q) == 0 and q.processing_count == 0
    q.done("a")  # not processing: ignored
    q.done("never-seen")
    assert len(q) == 0


async def test_get_waits_without_busy_waiting() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert len(q._getters) == 1
    for _ in range(10):
        await asyncio.sleep(0)
    assert not getter.done()
    assert len(q._getters) == 1  # still the same single parked future, no polling
    q.add("x")
    assert await asyncio.wait_for(getter, 2) == "x"


async def test_each_add_wakes_one_waiting_getter() -> None:
    q = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await wait_until(lambda: len(q._getters) == 3)
    q.add(1)
    q.add(2)
    await wait_until(lambda: sum(g.done() for g in getters) == 2)
    q.add(3)
    assert sorted(await asyncio.wait_for(asyncio.gather(*getters), 2)) == [1, 2, 3]


async def test_cancelled_getter_passes_its_wakeup_on() -> None:
    q = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await wait_until(lambda: len(q._getters) == 2)
    q.add("a")  # wakes `first` ...
    first.cancel()  # ... which leaves before it runs
    assert await asyncio.wait_for(second, 2) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert q.processing_count == 1 and len(q) == 0


async def test_cancelled_waiting_getter_is_forgotten() -> None:
    q = WorkQueue()
    getter = asyncio.create_task(q.get())
    await wait_until(lambda: len(q._getters) == 1)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    assert len(q._getters) == 0
    q.add("a")
    assert len(q) == 1


async def test_shutdown_hands_out_queued_items_then_raises() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("b")
    q.shutdown()
    assert q.shutting_down
    q.add("c")  # dropped
    assert len(q) == 2
    assert await q.get() == "a"
    assert await q.get() == "b"
    with pytest.raises(ShutDown):
        await q.get()
    q.shutdown()  # idempotent


async def test_shutdown_releases_all_waiting_getters() -> None:
    q = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(4)]
    await wait_until(lambda: len(q._getters) == 4)
    q.shutdown()
    results = await asyncio.wait_for(asyncio.gather(*getters, return_exceptions=True), 2)
    assert all(isinstance(r, ShutDown) for r in results)


async def test_readd_in_flight_after_shutdown_is_dropped() -> None:
    q = WorkQueue()
    q.add("a")
    await q.get()
    q.shutdown()
    q.add("a")
    q.done("a")
    with pytest.raises(ShutDown):
        await q.get()


async def test_dirty_in_flight_item_is_still_handed_out_after_shutdown() -> None:
    q = WorkQueue()
    q.add("a")
    await q.get()
    q.add("a")  # dirty while processing, before shutdown
    q.shutdown()
    q.done("a")
    assert await q.get() == "a"


async def test_shutdown_with_drain_waits_for_in_flight_items() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("b")
    await q.get()
    await q.get()
    drain = asyncio.create_task(q.shutdown_with_drain())
    await wait_until(lambda: len(q._drain_waiters) == 1)
    assert q.shutting_down
    q.add("c")  # ignored
    q.done("a")
    for _ in range(5):
        await asyncio.sleep(0)
    assert not drain.done()
    q.done("b")
    await asyncio.wait_for(drain, 2)
    assert len(q) == 0


async def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    q = WorkQueue()
    await asyncio.wait_for(q.shutdown_with_drain(), 2)
    assert q.shutting_down


async def test_shutdown_cuts_a_pending_drain_short() -> None:
    q = WorkQueue()
    q.add("a")
    await q.get()
    drain = asyncio.create_task(q.shutdown_with_drain())
    await wait_until(lambda: len(q._drain_waiters) == 1)
    q.shutdown()
    await asyncio.wait_for(drain, 2)
    assert q.is_processing("a")


async def test_drain_completes_when_last_item_is_requeued_at_done() -> None:
    q = WorkQueue()
    q.add("a")
    await q.get()
    q.add("a")
    drain = asyncio.create_task(q.shutdown_with_drain())
    await wait_until(lambda: len(q._drain_waiters) == 1)
    q.done("a")  # requeued, nothing in flight any more
    await asyncio.wait_for(drain, 2)
    assert await q.get() == "a"


async def test_add_threadsafe_from_another_thread() -> None:
    q = WorkQueue()
    threads = [threading.Thread(target=lambda i=i: q.add_threadsafe(i)) for i in range(8)]
    for thread in threads:
        thread.start()
    got = {await asyncio.wait_for(q.get(), 2) for _ in range(8)}
    for thread in threads:
        thread.join(2)
    assert got == set(range(8))


def test_add_threadsafe_needs_a_loop() -> None:
    q = WorkQueue("unbound")
    with pytest.raises(RuntimeError, match="event loop"):
        q.add_threadsafe("a")


def test_queue_outlives_an_event_loop() -> None:
    """A queue made outside any loop binds to the loop that waits on it, and to the next one."""
    q: WorkQueue[str] = WorkQueue("rebind")
    assert repr(q) == "<WorkQueue 'rebind' queued=0 processing=0>"

    async def round_trip(key: str) -> str:
        getter = asyncio.create_task(q.get())
        await wait_until(lambda: len(q._getters) == 1)
        threading.Thread(target=q.add_threadsafe, args=(key,)).start()
        item = await asyncio.wait_for(getter, 2)
        q.done(item)
        return item

    assert asyncio.run(round_trip("first")) == "first"
    assert asyncio.run(round_trip("second")) == "second"


async def test_concurrent_workers_never_share_a_key_and_process_every_add() -> None:
    """Stress: 4 workers that yield mid-item, producers hammering a hot set of keys."""
    q = WorkQueue()
    rng = random.Random(7)
    keys = [f"k{i}" for i in range(12)]
    active: set[Hashable] = set()
    added_version: dict[Hashable, int] = {}
    seen_version: dict[Hashable, int] = {}
    version = 0
    violations: list[Hashable] = []

    async def worker() -> None:
        while True:
            try:
                key = await q.get()
            except ShutDown:
                return
            if key in active:
                violations.append(key)
            active.add(key)
            seen_version[key] = added_version[key]  # everything added up to now is handled by this pass
            for _ in range(rng.randrange(3)):
                await asyncio.sleep(0)
            active.discard(key)
            q.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(4)]
    for _ in range(3000):
        version += 1
        key = rng.choice(keys)
        added_version[key] = version
        q.add(key)
        if rng.random() < 0.3:
            await asyncio.sleep(0)
    await wait_until(lambda: len(q) == 0 and q.processing_count == 0, timeout=10)
    await asyncio.wait_for(q.shutdown_with_drain(), 5)
    await asyncio.wait_for(asyncio.gather(*workers), 5)
    assert violations == []
    assert seen_version == added_version


class QueueMachine(RuleBasedStateMachine):
    """Model-based check of the queue invariants (driven synchronously through get's fast path)."""

    def __init__(self) -> None:
        super().__init__()
        self.q = WorkQueue()
        self.queue: deque[int] = deque()
        self.dirty: set[int] = set()
        self.processing: set[int] = set()
        self.shut = False

    @rule(key=st.integers(0, 5))
    def add(self, key: int) -> None:
        self.q.add(key)
        if self.shut or key in self.dirty:
            return
        self.dirty.add(key)
        if key not in self.processing:
            self.queue.append(key)

    @precondition(lambda self: bool(self.queue))
    @rule()
    def get(self) -> None:
        item = get_now(self.q.get())
        expected = self.queue.popleft()
        assert item == expected
        assert item not in self.processing, "handed out while processing"
        self.processing.add(item)
        self.dirty.discard(item)

    @precondition(lambda self: bool(self.processing))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(key)
        self.processing.discard(key)
        if key in self.dirty:
            self.queue.append(key)

    @rule(key=st.integers(0, 5))
    def done_unknown(self, key: int) -> None:
        if key not in self.processing:
            self.q.done(key)

    @precondition(lambda self: not self.shut)
    @rule()
    def shutdown(self) -> None:
        self.q.shutdown()
        self.shut = True

    @invariant()
    def matches_model(self) -> None:
        assert len(self.q) == len(self.queue)
        assert self.q.processing_count == len(self.processing)
        assert list(self.q._queue) == list(self.queue)

    def teardown(self) -> None:
        """Every dirty item is handed out exactly once more once the workers finish."""
        pending = set(self.dirty)
        for key in list(self.processing):
            self.q.done(key)
        handed: list[int] = []
        while len(self.q):
            key = get_now(self.q.get())
            handed.append(key)
            self.q.done(key)
        assert sorted(handed) == sorted(pending)


QueueMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_queue_model = QueueMachine.TestCase

"""DelayingQueue: add_after with an injected clock, earliest time wins, early wake-up, shutdown."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kinformer.clock import REAL_CLOCK, FakeClock
from kinformer.workqueue import DelayingQueue, ShutDown
from testlib import wait_until


async def settle() -> None:
    """Let already-runnable callbacks run (used only before asserting that nothing happened)."""
    for _ in range(10):
        await asyncio.sleep(0)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_non_positive_delay_adds_now(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 0)
    q.add_after("b", -1.5)
    assert len(q) == 2
    assert q.waiting_count == 0


async def test_item_is_added_when_its_time_comes(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    assert len(q) == 0 and q.waiting_count == 1
    clock.step(0.5)
    await settle()
    assert len(q) == 0
    clock.step(0.5)
    await wait_until(lambda: len(q) == 1)
    assert q.waiting_count == 0
    assert await q.get() == "a"


async def test_earliest_ready_time_wins(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 10.0)
    q.add_after("a", 5.0)
    q.add_after("a", 20.0)  # later: ignored
    assert q.waiting_count == 1
    await clock.wait_for_waiters(1)
    clock.step(5.0)
    await wait_until(lambda: len(q) == 1)
    assert await q.get() == "a"
    q.done("a")
    clock.step(15.0)  # past the stale 10 s and 20 s entries
    await settle()
    assert len(q) == 0 and q.waiting_count == 0


async def test_sooner_item_wakes_the_waiter_early(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("late", 10.0)
    await clock.wait_for_waiters(1)
    assert clock.next_deadline() == pytest.approx(clock.now() + 10.0)
    q.add_after("soon", 1.0)
    await wait_until(lambda: clock.next_deadline() == pytest.approx(clock.now() + 1.0))
    clock.step(1.0)
    await wait_until(lambda: len(q) == 1)
    assert await q.get() == "soon"
    assert q.waiting_count == 1
    clock.step(9.0)
    await wait_until(lambda: len(q) == 1)
    assert await q.get() == "late"


async def test_items_become_ready_in_time_order(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 3.0)
    q.add_after("b", 1.0)
    q.add_after("c", 2.0)
    await clock.wait_for_waiters(1)
    clock.step(3.0)
    await wait_until(lambda: len(q) == 3)
    assert [await q.get() for _ in range(3)] == ["b", "c", "a"]


async def test_delayed_add_of_a_queued_item_is_deduplicated(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add("a")
    q.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    clock.step(1.0)
    await wait_until(lambda: q.waiting_count == 0)
    assert len(q) == 1


async def test_delayed_readd_of_an_in_flight_item_requeues_at_done(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add("a")
    assert await q.get() == "a"
    q.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    clock.step(1.0)
    await wait_until(lambda: q.is_dirty("a"))
    assert len(q) == 0
    q.done("a")
    assert await q.get() == "a"


async def test_waiter_sleeps_when_idle_and_restarts_for_new_items(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    clock.step(1.0)
    await wait_until(lambda: len(q) == 1)
    await settle()
    assert clock.waiters == 0  # nothing to wait for: no timer
    q.add_after("b", 2.0)
    await clock.wait_for_waiters(1)
    clock.step(2.0)
    await wait_until(lambda: len(q) == 2)


async def test_shutdown_stops_the_waiter_and_drops_waiting_items(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 1.0)
    await clock.wait_for_waiters(1)
    task = q._waiter_task
    assert task is not None
    q.shutdown()
    await wait_until(task.done)
    assert q.waiting_count == 0
    q.add_after("b", 1.0)
    q.add_after("c", 0)
    clock.step(5.0)
    await settle()
    assert len(q) == 0
    with pytest.raises(ShutDown):
        await q.get()


async def test_async_with_ends_the_waiter(clock: FakeClock) -> None:
    async with DelayingQueue(clock=clock) as q:
        q.add_after("a", 1.0)
        task = q._waiter_task
        assert task is not None
    assert task.done() and q.shutting_down


async def test_getter_waiting_on_empty_queue_gets_the_delayed_item(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    getter = asyncio.create_task(q.get())
    q.add_after("a", 2.0)
    await clock.wait_for_waiters(1)
    clock.step(2.0)
    assert await asyncio.wait_for(getter, 2) == "a"


async def test_real_clock_smoke() -> None:
    q = DelayingQueue(clock=REAL_CLOCK)
    q.add_after("a", 0.01)
    assert await asyncio.wait_for(q.get(), 2) == "a"
    q.shutdown()


async def test_add_after_threadsafe(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    thread = threading.Thread(target=q.add_after_threadsafe, args=("a", 1.0))
    thread.start()
    thread.join(2)
    await clock.wait_for_waiters(1)
    clock.step(1.0)
    assert await asyncio.wait_for(q.get(), 2) == "a"


def test_add_after_needs_a_running_loop(clock: FakeClock) -> None:
    q = DelayingQueue(clock=clock)
    with pytest.raises(RuntimeError, match="running event loop"):
        q.add_after("a", 1.0)
    assert q.waiting_count == 0


@pytest.mark.parametrize("turns", range(6))
async def test_time_that_passes_while_the_waiter_reschedules_is_not_slept_again(turns: int) -> None:
    """An earlier item wakes the waiter, which races a new sleep against the next wake-up. If the clock
    moves before that sleep has started, the item is still ready at its time, not a whole delay later."""
    clock = FakeClock()
    q = DelayingQueue(clock=clock)
    q.add_after("late", 60.0)
    await clock.wait_for_waiters(1)
    q.add_after("soon", 0.005)
    for _ in range(turns):
        await asyncio.sleep(0)
    clock.step(0.005)
    await wait_until(lambda: len(q) == 1, timeout=2.0, what="'soon' to be ready")
    assert q.waiting_count == 1
    q.shutdown()

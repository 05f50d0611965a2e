"""PriorityQueue: priority order, aging bound, dedup semantics of the work queue, honest backoff."""

from __future__ import annotations

import asyncio

import pytest

from kinformer.clock import FakeClock
from kinformer.workqueue import ItemExponentialFailureRateLimiter, ShutDown
from kinformer.workqueue.priority_queue import LOW_PRIORITY, PriorityQueue
from testlib import wait_until


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def _drain(q: PriorityQueue, n: int) -> list:
    out = []
    for _ in range(n):
        item = await q.get()
        q.done(item)
        out.append(item)
    return out


async def test_higher_priority_first_fifo_within_a_priority(clock: FakeClock) -> None:
    async with PriorityQueue(clock=clock) as q:
        q.add("low1", LOW_PRIORITY)
        q.add("a")
        q.add("low2", LOW_PRIORITY)
        q.add("b")
        q.add("urgent", 10)
        q.add("a", LOW_PRIORITY)  # asked again lower: keeps its priority and its place
        q.add("low2", 5)  # asked again higher: moves up
        assert len(q) == 5
        assert await _drain(q, 5) == ["urgent", "low2", "a", "b", "low1"]


async def test_aging_serves_an_old_item_before_newer_ones(clock: FakeClock) -> None:
    async with PriorityQueue(clock=clock, max_wait=5.0) as q:
        q.add("initial", LOW_PRIORITY)
        q.add("e0")
        assert await _drain(q, 1) == ["e0"]
        clock.step(4.9)
        q.add("e1")
        assert await _drain(q, 1) == ["e1"]  # not aged yet: the newer, higher item wins
        clock.step(0.1)
        q.add("e2", 100)
        assert await _drain(q, 2) == ["initial", "e2"]  # aged: served before any newer item


async def test_without_aging_low_items_wait_behind_every_newer_item(clock: FakeClock) -> None:
    async with PriorityQueue(clock=clock, max_wait=None) as q:
        q.add("initial", LOW_PRIORITY)
        for i in range(3):
            clock.step(100)
            q.add(f"e{i}")
            assert await _drain(q, 1) == [f"e{i}"]
        assert await _drain(q, 1) == ["initial"]


async def test_readd_while_processing_keeps_the_highest_priority(clock: FakeClock) -> None:
    async with PriorityQueue(clock=clock) as q:
        q.add("k", LOW_PRIORITY)
        assert await q.get() == "k"
        q.add("k", LOW_PRIORITY)
        q.add("k", 7)
        q.add("other", 1)
        assert len(q) == 1  # "k" waits for done()
        q.done("k")
        assert await _drain(q, 2) == ["k", "other"]


async def test_add_after_keeps_the_priority(clock: FakeClock) -> None:
    async with PriorityQueue(clock=clock) as q:
        q.add_after("late-urgent", 1.0, priority=10)
        q.add("now")
        await clock.wait_for_waiters()
        clock.step(1.0)
        await wait_until(lambda: len(q) == 2, what="delayed item ready")
        assert await _drain(q, 2) == ["late-urgent", "now"]


async def test_failures_count_only_after_the_backoff_was_honoured(clock: FakeClock) -> None:
    limiter = ItemExponentialFailureRateLimiter(1.0, 1000.0)
    async with PriorityQueue(limiter, clock=clock) as q:
        q.add_rate_limited("k")  # failure 1: 1 s backoff
        assert q.num_requeues("k") == 1
        for _ in range(5):  # unrelated events re-run "k" early; it fails again each time
            q.add("k")
            assert await q.get() == "k"
            q.add_rate_limited("k")
            q.done("k")
        assert q.num_requeues("k") == 1  # plain RateLimitingQueue: 6 (and a 32 s delay)
        await clock.wait_for_waiters()
        clock.step(1.0)
        await wait_until(lambda: len(q) == 1, what="backoff over")
        assert await q.get() == "k"
        q.add_rate_limited("k")  # after an honoured backoff: counted, 2 s
        q.done("k")
        assert q.num_requeues("k") == 2
        q.forget("k")
        assert q.num_requeues("k") == 0


async def test_shutdown_drains_then_raises(clock: FakeClock) -> None:
    q = PriorityQueue(clock=clock)
    q.add("a", LOW_PRIORITY)
    q.add("b")
    q.shutdown()
    q.add("c")
    assert await _drain(q, 2) == ["b", "a"]
    with pytest.raises(ShutDown):
        await asyncio.wait_for(q.get(), 1)
    await q.aclose()


def test_negative_max_wait_is_refused() -> None:
    with pytest.raises(ValueError):
        PriorityQueue(max_wait=-1)

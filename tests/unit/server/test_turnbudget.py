"""The event loop's turn budget: requests start while the turn has budget left, wait fairly for later turns."""

from __future__ import annotations

import asyncio

import pytest

from kinformer.server.filters.turnbudget import TurnBudget, TurnTimeout


class FakeTimer:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_requests_start_within_the_budget_then_wait_for_the_next_turn() -> None:
    timer = FakeTimer()
    turns = TurnBudget(0.005, timer=timer)
    assert turns.try_start() and turns.try_start()  # the turn opened with the first request
    timer.now = 0.006
    assert not turns.try_start()  # the turn has spent its budget
    waiter = asyncio.create_task(turns.wait("a"))
    await asyncio.sleep(0)  # the waiter queued (asyncio runs ready callbacks in order)
    assert turns.waiting == 1
    assert not turns.try_start()  # a newcomer queues behind the waiter, whatever the budget says
    await asyncio.wait_for(waiter, 5)  # the loop came round: started
    assert turns.waiting == 0


async def test_waiters_are_woken_round_robin_across_flows() -> None:
    timer = FakeTimer()
    turns = TurnBudget(0.005, timer=timer)
    assert turns.try_start()
    timer.now = 1.0  # one request took the whole turn: the next turns wake few
    order: list[str] = []

    async def request(flow: str) -> None:
        await turns.wait(flow)
        order.append(flow)

    hog = [asyncio.create_task(request("hog")) for _ in range(6)]
    other = asyncio.create_task(request("other"))  # queued after the hog's burst
    await asyncio.wait_for(asyncio.gather(*hog, other), 5)
    assert order.index("other") <= 1, order  # not behind the hog's burst
    assert turns.waiting == 0


async def test_a_wait_is_bounded_and_leaves_nothing_behind() -> None:
    timer = FakeTimer()
    turns = TurnBudget(0.005, max_wait=0.0, timer=timer)
    assert turns.try_start()
    timer.now = 1.0
    with pytest.raises(TurnTimeout):
        await turns.wait("a")
    assert turns.waiting == 0 and not turns._flows and turns._woken == 0


async def test_a_cancelled_waiter_leaves_nothing_behind() -> None:
    timer = FakeTimer()
    turns = TurnBudget(0.005, timer=timer)
    assert turns.try_start()
    timer.now = 1.0
    waiter = asyncio.create_task(turns.wait("a"))
    await asyncio.sleep(0)
    assert turns.waiting == 1
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    assert turns.waiting == 0 and not turns._flows and turns._woken == 0
    await asyncio.sleep(0)
    await asyncio.sleep(0)  # the loop came round: a new turn, nobody waiting
    assert turns.try_start()


async def test_a_waiter_cancelled_just_before_the_turn_is_skipped_and_the_next_one_woken() -> None:
    """The waiter's future is cancelled at once, its task unqueues it only when it next runs: the turn that
    comes first skips it and wakes the next waiter."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    timer = FakeTimer()
    turns = TurnBudget(0.005, timer=timer)
    assert turns.try_start()
    timer.now = 1.0
    await asyncio.sleep(0)  # that turn ends with nobody waiting
    first = asyncio.create_task(turns.wait("a"))
    second = asyncio.create_task(turns.wait("b"))
    await asyncio.sleep(0)  # both queued; the next turn is scheduled to run before the first can unqueue
    assert turns.waiting == 2
    first.cancel()
    await asyncio.wait_for(second, 5)
    await asyncio.gather(first, return_exceptions=True)
    assert first.cancelled() and not errors
    assert turns.waiting == 0 and not turns._flows and turns._woken == 0


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        TurnBudget(0)

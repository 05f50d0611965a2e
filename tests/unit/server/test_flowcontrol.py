"""Flow control: seats shared fairly between flows, bounded queues and waits, seats given back while waiting."""

from __future__ import annotations

import asyncio

import pytest

from kinformer.server.filters.flowcontrol import FlowControl, PriorityLevel, Rejected, Seat, seat_context, seat_released
from testlib import wait_until


async def _queued(level: PriorityLevel, key: str) -> asyncio.Task[Seat]:
    """Start an acquire for ``key`` that has to queue; returns once it is in the queue."""
    before = level.queued
    task = asyncio.create_task(level.acquire(key))
    await wait_until(lambda: level.queued > before or task.done())
    assert not task.done()
    return task


async def test_a_freed_seat_goes_to_the_queued_flow_holding_the_fewest() -> None:
    level = PriorityLevel("test", 2)
    hog = [await level.acquire("hog"), await level.acquire("hog")]
    hog_queued = [await _queued(level, "hog") for _ in range(3)]
    other = await _queued(level, "other")
    level.release(hog[0])
    seat = await asyncio.wait_for(other, 5)
    assert seat.held and seat.flow.key == "other"
    assert not any(t.done() for t in hog_queued)
    assert (level.inflight, level.queued) == (2, 3)
    level.release(seat)  # "other" is gone: the hog's queue is served in order
    assert (await asyncio.wait_for(hog_queued[0], 5)).held
    for task in hog_queued[1:]:
        task.cancel()
    await asyncio.gather(*hog_queued[1:], return_exceptions=True)
    assert level.queued == 0


async def test_a_full_queue_is_rejected_and_the_others_still_queue() -> None:
    level = PriorityLevel("test", 1, queue_length=2)
    held = await level.acquire("a")
    waiting = [await _queued(level, "a") for _ in range(2)]
    with pytest.raises(Rejected, match="queue is full"):
        await level.acquire("a")
    other = await _queued(level, "b")  # another user's queue is not full
    assert level.rejected == 1
    level.release(held)  # equal seats held (none): the flow queued longest goes first
    first = await asyncio.wait_for(waiting[0], 5)
    assert not other.done()
    level.release(first)  # then "b", whose turn it is: "a" was just served
    level.release(await asyncio.wait_for(other, 5))
    level.release(await asyncio.wait_for(waiting[1], 5))
    assert (level.inflight, level.queued) == (0, 0)


async def test_queue_wait_is_bounded_and_leaves_nothing_queued() -> None:
    level = PriorityLevel("test", 1, queue_wait=0.01)
    held = await level.acquire("a")
    with pytest.raises(Rejected, match="waited"):
        await level.acquire("b")
    assert (level.queued, level.inflight, level.flow_inflight("b")) == (0, 1, 0)
    level.release(held)
    assert (level.inflight, level._flows) == (0, {})  # idle flows are dropped


async def test_no_seats_rejects_at_once() -> None:
    with pytest.raises(Rejected):
        await PriorityLevel("test", 0).acquire("a")


async def test_a_cancelled_queued_request_gives_nothing_away() -> None:
    level = PriorityLevel("test", 1)
    held = await level.acquire("a")
    task = await _queued(level, "b")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert level.queued == 0
    level.release(held)
    assert level.inflight == 0
    # granted and cancelled before it could run: the seat comes back
    held = await level.acquire("a")
    task = await _queued(level, "b")
    level.release(held)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (level.inflight, level.queued) == (0, 0)


async def test_waiting_gives_the_seat_back_and_is_bounded_per_flow() -> None:
    level = PriorityLevel("test", 1, max_waits=2)
    first = await level.acquire("a")
    async with level.waiting(first):
        assert not first.held and level.inflight == 0
        other = await level.acquire("b")  # the seat is free while "a" waits
        level.release(other)
        second = await level.acquire("a")
        async with level.waiting(second):
            third = await level.acquire("a")
            with pytest.raises(Rejected, match="at most 2 reads"):
                async with level.waiting(third):
                    pass
            assert third.held  # a refused wait keeps its seat until the request ends
            level.release(third)
        assert second.held
        level.release(second)
    assert first.held
    level.release(first)
    assert (level.inflight, level.queued, level._flows) == (0, 0, {})


async def test_a_failed_wait_takes_no_seat_again() -> None:
    level = PriorityLevel("test", 1)
    seat = await level.acquire("a")
    with pytest.raises(RuntimeError):
        async with level.waiting(seat):
            raise RuntimeError("timed out")
    assert not seat.held and level.inflight == 0
    level.release(seat)  # releasing an unheld seat is a no-op
    assert level.inflight == 0


async def test_a_seat_whose_request_ended_is_not_taken_again() -> None:
    """A task a request started runs in a copy of the request's context, seat included: once the request gave
    its seat back, a wait in that task must not take a seat that nobody would give back."""
    level = PriorityLevel("test", 1)
    seat = await level.acquire("a")
    token = seat_context.set(seat)
    try:
        level.release(seat)  # the request ended
        async with seat_released():
            pass
    finally:
        seat_context.reset(token)
    assert not seat.held and level.inflight == 0


async def test_try_acquire_takes_a_free_seat_only_when_nobody_queues() -> None:
    level = PriorityLevel("test", 1)
    seat = level.try_acquire("a")
    assert seat is not None and seat.held and level.flow_inflight("a") == 1
    assert level.try_acquire("b") is None  # no free seat
    queued = await _queued(level, "b")
    level.release(seat)  # the seat goes to the queued flow, not to a newcomer
    assert level.try_acquire("c") is None
    level.release(await asyncio.wait_for(queued, 5))
    assert (level.inflight, level.queued, level.flow_inflight("b")) == (0, 0, 0)


async def test_an_uncontended_seat_keeps_its_flow_only_while_held_or_waiting() -> None:
    level = PriorityLevel("test", 2)
    first, second = level.try_acquire("a"), level.try_acquire("a")
    assert first is not None and second is not None and level.flow_inflight("a") == 2
    level.release(first)
    level.release(first)  # released once only
    assert (level.inflight, level.flow_inflight("a")) == (1, 1)
    level.release(second)
    assert (level.inflight, level._flows) == (0, {})  # the idle flow is dropped
    seat = level.try_acquire("a")
    assert seat is not None
    seat_context.set(seat)
    async with seat_released():  # a flow waiting with its seat given back is kept
        assert (level.inflight, list(level._flows)) == (0, ["a"])
    level.release(seat)
    assert (level.inflight, level._flows) == (0, {})


def test_masters_are_exempt_from_the_shared_level() -> None:
    from types import SimpleNamespace

    from kinformer.server.auth.authentication import USER_KEY, UserInfo

    fc = FlowControl(5)

    def request(user: UserInfo | None) -> SimpleNamespace:
        data = {USER_KEY: user} if user is not None else {}
        return SimpleNamespace(get=data.get, remote="10.0.0.1")

    admin = request(UserInfo("admin", groups=("system:masters",)))
    assert fc.classify(admin) == (fc.exempt, "user:admin")  # type: ignore[arg-type]
    assert fc.classify(request(UserInfo("bob"))) == (fc.default, "user:bob")  # type: ignore[arg-type]
    assert fc.classify(request(None)) == (fc.default, "addr:10.0.0.1")  # type: ignore[arg-type]

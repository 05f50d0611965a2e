"""first_completed and task_group: every task they start has ended when they return."""

from __future__ import annotations

import asyncio

import pytest

from kinformer.aio import first_completed, task_group


async def test_first_completed_returns_the_first_and_cancels_the_rest() -> None:
    slow_cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            slow_cancelled.set()
            raise

    async def fast() -> str:
        return "done"

    index, future = await first_completed(slow(), fast())
    assert (index, future.result()) == (1, "done")
    assert slow_cancelled.is_set(), "the loser has ended before first_completed returned"


async def test_first_completed_reports_a_failure_without_raising() -> None:
    async def boom() -> None:
        raise ValueError("boom")

    index, future = await first_completed(asyncio.Event().wait(), boom())
    assert index == 1 and isinstance(future.exception(), ValueError)


async def test_cancelling_the_caller_cancels_every_awaitable() -> None:
    ended: list[str] = []

    async def wait(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            ended.append(name)

    caller = asyncio.create_task(first_completed(wait("a"), wait("b")))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert sorted(ended) == ["a", "b"]


async def test_first_completed_needs_an_awaitable() -> None:
    with pytest.raises(ValueError):
        await first_completed()


async def test_task_group_raises_the_child_failure_itself() -> None:
    async def boom() -> None:
        raise KeyError("k")

    with pytest.raises(KeyError):
        async with task_group() as group:
            group.create_task(boom())
            group.create_task(asyncio.Event().wait())

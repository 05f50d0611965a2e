"""Small structured-concurrency helpers shared by the library and the server.

Invariant: every task a helper here starts has ended (finished or cancelled and awaited) by the time the
helper returns or raises, so callers never leave a task behind.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any


async def first_completed(*aws: Awaitable[Any]) -> tuple[int, asyncio.Future[Any]]:
    """Run ``aws`` concurrently until one ends; cancel the others and wait until they have ended.

    Returns ``(index, future)`` of the first awaitable, in argument order, among those that had ended when
    the wait returned; the caller reads its outcome with ``result()`` / ``exception()`` / ``cancelled()``
    (an exception is not raised here). If the caller is cancelled, every awaitable is cancelled and awaited
    before ``CancelledError`` propagates.
    """
    if not aws:
        raise ValueError("first_completed needs at least one awaitable")
    futures = [asyncio.ensure_future(aw) for aw in aws]
    try:
        done, _ = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in futures:
            future.cancel()
        await asyncio.gather(*futures, return_exceptions=True)
    index = next(i for i, future in enumerate(futures) if future in done)
    return index, futures[index]


@contextlib.asynccontextmanager
async def task_group() -> AsyncIterator[asyncio.TaskGroup]:
    """An :class:`asyncio.TaskGroup` that raises its first child's failure as itself, not wrapped in an
    ``ExceptionGroup`` (the others are attached as the cause), so callers keep catching plain exceptions."""
    try:
        async with asyncio.TaskGroup() as group:
            yield group
    except BaseExceptionGroup as failures:
        raise failures.exceptions[0] from (failures if len(failures.exceptions) > 1 else None)


__all__ = ["first_completed", "task_group"]

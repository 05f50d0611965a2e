"""kube's ``slowStartBatch``: run calls in batches of 1, 2, 4, ... so a call that keeps failing (a quota, a
webhook) costs one request per sync, not hundreds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def slow_start_batch(items: Sequence[T], call: Callable[[T], Awaitable[object]],
                           initial: int = 1) -> tuple[int, BaseException | None]:
    """``slowStartBatch``: call ``call`` on the items a batch at a time (each batch concurrently, twice the
    size of the last); stop after the first batch in which a call failed. Returns how many calls succeeded
    and the first error (None when none failed); the items after the failing batch are never called."""
    done, successes, size = 0, 0, max(1, initial)
    while done < len(items):
        batch = items[done:done + size]
        results = await asyncio.gather(*(call(item) for item in batch), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        successes += len(batch) - len(errors)
        if errors:
            return successes, errors[0]
        done += len(batch)
        size *= 2
    return successes, None


async def slow_start(items: Sequence[T], call: Callable[[T], Awaitable[object]], initial: int = 1) -> int:
    """:func:`slow_start_batch` that re-raises the first error; returns the number of calls made."""
    successes, error = await slow_start_batch(items, call, initial)
    if error is not None:
        raise error
    return successes

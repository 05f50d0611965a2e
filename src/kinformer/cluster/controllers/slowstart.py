"""kube's ``slowStartBatch``: run calls in batches of 1, 2, 4, ... so a call that keeps failing (a quota, a
webhook) costs one request per sync, not hundreds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def slow_start(items: Sequence[T], call: Callable[[T], Awaitable[object]], initial: int = 1) -> int:
    """Call ``call`` on every item, a batch at a time (each batch concurrently, twice the size of the last);
    stop after the first batch in which a call failed and re-raise its first error. Returns the number of
    calls that succeeded when none failed."""
    done, size = 0, max(1, initial)
    while done < len(items):
        batch = items[done:done + size]
        results = await asyncio.gather(*(call(item) for item in batch), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        done += len(batch)
        size *= 2
    return done

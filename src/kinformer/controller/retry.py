"""Retrying an optimistic-concurrency write on Conflict (client-go ``util/retry.RetryOnConflict``).

``await retry_on_conflict(attempt)`` calls ``attempt()`` (which must read the latest object itself) up to
``steps`` times while it raises :class:`~kinformer.errors.Conflict`, ``delay`` seconds apart with 10 %
jitter: client-go's DefaultRetry (5 steps, 10 ms). The last Conflict is re-raised.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.errors import Conflict

__all__ = ["DEFAULT_RETRY_STEPS", "retry_on_conflict"]

T = TypeVar("T")
DEFAULT_RETRY_STEPS = 5


async def retry_on_conflict(attempt: Callable[[], Awaitable[T]], *, steps: int = DEFAULT_RETRY_STEPS,
                            delay: float = 0.01, clock: Clock = REAL_CLOCK) -> T:
    """``await attempt()``, again after each Conflict, at most ``steps`` times in all."""
    for step in range(1, steps + 1):
        try:
            return await attempt()
        except Conflict:
            if step == steps:
                raise
        await clock.sleep(delay * random.uniform(1.0, 1.1))
    raise AssertionError("unreachable")  # pragma: no cover

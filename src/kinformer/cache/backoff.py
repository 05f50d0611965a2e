"""The reflector's error backoff: client-go's exponential backoff manager (apimachinery wait/backoff.go)."""

from __future__ import annotations

import random

from kinformer.clock import REAL_CLOCK, Clock

__all__ = ["Backoff"]


class Backoff:
    """client-go's exponential backoff manager: ``initial * factor**n`` capped at ``cap``, then jittered to
    ``[d, d * (1 + jitter))``; the schedule restarts when ``reset_after`` seconds passed since the last delay."""

    __slots__ = ("_clock", "_duration", "_last", "_rng", "cap", "factor", "initial", "jitter", "reset_after")

    def __init__(self, *, initial: float = 0.8, factor: float = 2.0, jitter: float = 1.0, cap: float = 30.0,
                 reset_after: float = 120.0, clock: Clock = REAL_CLOCK, rng: random.Random | None = None) -> None:
        self.initial = initial
        self.factor = factor
        self.jitter = jitter
        self.cap = cap
        self.reset_after = reset_after
        self._clock = clock
        self._rng = rng or random.Random()
        self._duration = initial
        self._last: float | None = None

    def next_delay(self) -> float:
        """The next delay; advances the schedule."""
        now = self._clock.now()
        if self._last is None or now - self._last > self.reset_after:
            self._duration = self.initial
        self._last = now
        base = self._duration
        self._duration = min(self._duration * self.factor, self.cap)
        if self.jitter > 0:
            base += self._rng.random() * self.jitter * base
        return base

    def reset(self) -> None:
        self._duration = self.initial
        self._last = None

    async def wait(self) -> float:
        """Sleep the next delay on the clock; returns it."""
        delay = self.next_delay()
        await self._clock.sleep(delay)
        return delay

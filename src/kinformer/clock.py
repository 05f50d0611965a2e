"""An injectable clock, so backoff, resync, delaying queues and leases are testable without sleeps.

Every component that waits or measures time takes a ``clock`` argument (default :data:`REAL_CLOCK`).
``Clock.now()`` is monotonic seconds; ``Clock.sleep(d)`` waits ``d`` seconds of that clock.

:class:`FakeClock` only moves when a test calls :meth:`FakeClock.step` (or :meth:`FakeClock.set`);
sleepers whose deadline is reached are woken in deadline order. ``FakeClock.waiters`` lets a test
wait until the code under test is actually asleep before it advances time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    """What kinformer needs from time."""

    def now(self) -> float:
        """Monotonic seconds."""
        ...

    def wall(self) -> float:
        """Seconds since the epoch (for timestamps written to objects)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock; a non-positive value yields once."""
        ...


class RealClock:
    """The process's monotonic clock and asyncio's sleep.

    ``now`` is ``time.monotonic`` itself (no Python frame per reading: the informer reads it per event)."""

    now = staticmethod(time.monotonic)

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


REAL_CLOCK = RealClock()


async def sleep_until(clock: Clock, deadline: float) -> None:
    """Wait until ``clock.now() >= deadline``.

    The remaining time is read when the wait starts, not when it is scheduled: wrapped in a task (as a
    race against another future), the wait may start only after the clock has moved, and a duration
    computed beforehand would then be slept on top of the time that already passed.
    """
    await clock.sleep(deadline - clock.now())


class FakeClock:
    """A clock that advances only when told to. Safe to use from one event loop.

    Invariant: a sleeper is woken exactly when ``now() >= its deadline`` after a step, never before.
    """

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._heap: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._changed: asyncio.Event | None = None

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (self._now + seconds, next(self._seq), fut))
        self._notify()
        await fut

    @property
    def waiters(self) -> int:
        """Number of sleepers still pending."""
        self._heap = [entry for entry in self._heap if not entry[2].done()]
        heapq.heapify(self._heap)
        return len(self._heap)

    def next_deadline(self) -> float | None:
        """The earliest pending deadline, or None."""
        return self._heap[0][0] if self.waiters else None

    def step(self, seconds: float) -> None:
        """Advance by ``seconds`` and wake every sleeper whose deadline has come."""
        self.set(self._now + seconds)

    def set(self, when: float) -> None:
        """Move the clock to ``when`` (never backwards)."""
        self._now = max(self._now, when)
        while self._heap and self._heap[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(None)

    async def wait_for_waiters(self, count: int = 1, timeout: float = 5.0) -> None:
        """Wait (in real time, bounded) until at least ``count`` coroutines sleep on this clock."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.waiters < count:
            if loop.time() > deadline:
                raise TimeoutError(f"expected {count} sleepers on the fake clock, have {self.waiters}")
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=0.05)
            except TimeoutError:
                pass
            self._changed = None

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()

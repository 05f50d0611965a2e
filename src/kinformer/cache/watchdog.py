"""Dead-watch detection: an idle deadline on the injected clock around the consumption of one watch.

A watch can stay open while nothing arrives (a half-dead connection, a proxy that stopped forwarding, a
server that stopped writing). kube-apiserver sends a BOOKMARK about once a minute to a watch that asked for
them, so a healthy idle watch is never silent for long; :class:`IdleWatchdog` ends a watch that has been
silent (no event, no bookmark) for ``timeout`` seconds.

Usage (the consumer calls :meth:`IdleWatchdog.touch` for every event, or passes ``last_seen``, a function
returning the clock time of the last arrival; the watchdog is a task the context owns, cancelled and awaited
on exit)::

    async with IdleWatchdog(clock, 90.0) as dog:
        async for event in watch:
            dog.touch()
            ...

On expiry the body is cancelled and the ``async with`` raises :class:`WatchIdle` (as ``asyncio.timeout``
does for its deadline; a cancellation from outside is never turned into WatchIdle).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import TracebackType

from kinformer.clock import Clock

__all__ = ["IdleWatchdog", "WatchIdle"]


class WatchIdle(TimeoutError):
    """A watch delivered nothing for its idle timeout."""


class IdleWatchdog:
    """Cancels the task that entered it once ``timeout`` clock seconds pass without :meth:`touch`.

    Invariant: the watchdog fires only when, as it wakes, ``clock.now() - last arrival >= timeout`` (the last
    arrival is the last :meth:`touch`, entering, or what ``last_seen()`` returns, whichever is latest).
    """

    __slots__ = ("_cancelling", "_clock", "_last_seen_fn", "_task", "_watcher", "expired", "last_seen", "timeout")

    def __init__(self, clock: Clock, timeout: float, last_seen: Callable[[], float] | None = None) -> None:
        if timeout <= 0:
            raise ValueError("IdleWatchdog needs a positive timeout")
        self._clock = clock
        self.timeout = timeout
        self._last_seen_fn = last_seen
        self.last_seen = clock.now()
        self.expired = False
        self._task: asyncio.Task[object] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._cancelling = 0

    def touch(self) -> None:
        """Something arrived: the idle deadline starts again."""
        self.last_seen = self._clock.now()

    async def __aenter__(self) -> IdleWatchdog:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("IdleWatchdog must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self.last_seen = self._clock.now()
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="watch-idle-watchdog")
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        watcher = self._watcher
        if watcher is not None:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        task = self._task
        if self.expired and task is not None and task.uncancel() <= self._cancelling \
                and exc_type is asyncio.CancelledError:
            raise WatchIdle(f"nothing arrived for {self.timeout:g}s") from exc

    async def _watch(self) -> None:
        clock = self._clock
        seen = self._last_seen_fn
        while True:
            last = self.last_seen if seen is None else max(self.last_seen, seen())
            left = last + self.timeout - clock.now()
            if left <= 0:
                break
            await clock.sleep(left)
        self.expired = True
        assert self._task is not None
        self._task.cancel()

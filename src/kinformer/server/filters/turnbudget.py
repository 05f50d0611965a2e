"""A budget of request work per turn of the event loop, so that I/O is polled often whatever arrives at once.

The server runs every request on one event loop. A burst (a thousand connections whose requests arrive
together) puts a thousand request starts in one turn of the loop, which runs them all before it polls its
sockets again: a health probe or another user's request that arrives meanwhile waits for the whole burst.
Go's scheduler would preempt; here the flow control dispatch (:mod:`.flowcontrol`) asks :class:`TurnBudget`:

* A turn starts with the first request dispatched in it and ends when the loop comes round (a callback
  scheduled at its start runs on the next turn, after the loop polled its sockets).
* A request may start while its turn has run for less than ``budget`` seconds and nobody waits; otherwise it
  waits for a later turn. Each turn wakes waiters round-robin across flows (one per flow in turn, so one
  client's burst cannot keep another's request waiting behind it), as many as fit in the budget at the
  pace of the turn before (at least :data:`MIN_WAKE`); a woken request starts at once.
* A wait is bounded (``max_wait`` seconds, then :class:`TurnTimeout`); a cancelled waiter leaves nothing behind.

Health probes and watches are not dispatched by flow control, so they never wait here. Without a burst
(each turn starts a few requests) no request waits; the cost is a clock read per request and one
callback per turn.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections import deque
from collections.abc import Callable

__all__ = ["DEFAULT_TURN_BUDGET", "MIN_WAKE", "TurnBudget", "TurnTimeout"]

DEFAULT_TURN_BUDGET = 0.005
MIN_WAKE = 2


class TurnTimeout(Exception):
    """A request waited longer than ``max_wait`` for a turn with budget left."""


class TurnBudget:
    """See the module docstring. ``timer`` reads seconds of a monotonic clock (injectable for tests)."""

    def __init__(self, budget: float = DEFAULT_TURN_BUDGET, *, max_wait: float = 15.0,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        if budget <= 0 or max_wait < 0:
            raise ValueError("turn budget must be > 0 and max_wait >= 0")
        self.budget = budget
        self.max_wait = max_wait
        self.timer = timer
        self.waiting = 0
        self._flows: dict[str, deque[asyncio.Future[None]]] = {}  # insertion order = round-robin order
        self._woken = 0  # woken waiters that have not resumed yet: newcomers queue behind them
        self._turn_open = False
        self._start = 0.0
        self._started = 0  # requests started in the current turn
        self._context = contextvars.Context()  # the turn callback's (it reads none): no copy per turn

    def try_start(self) -> bool:
        """Whether a request may start now (counted as started); False: it must :meth:`wait`."""
        now = self.timer()
        if not self._turn_open:  # as _open, inline: the first request of a turn, most often the only one
            self._turn_open = True
            self._start = now
            self._started = 0
            asyncio.get_running_loop().call_soon(self._next_turn, context=self._context)
        elif now - self._start >= self.budget:
            return False
        if self.waiting or self._woken:
            return False
        self._started += 1
        return True

    async def wait(self, flow: str) -> None:
        """Wait for a turn with budget left (the request has started when this returns)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._flows.get(flow)
        if queue is None:
            queue = self._flows[flow] = deque()
        queue.append(fut)
        self.waiting += 1
        if not self._turn_open:
            self._open(self.timer())
        try:
            async with asyncio.timeout(self.max_wait):
                await fut
        except TimeoutError:
            raise TurnTimeout(f"waited {self.max_wait:g}s for the server's event loop") from None
        finally:
            if fut.done() and not fut.cancelled():
                self._woken -= 1
            else:
                fut.cancel()
                self._unqueue(flow, queue, fut)

    def _open(self, now: float) -> None:
        self._turn_open = True
        self._start = now
        self._started = 0
        asyncio.get_running_loop().call_soon(self._next_turn, context=self._context)

    def _unqueue(self, flow: str, queue: deque[asyncio.Future[None]], fut: asyncio.Future[None]) -> None:
        try:
            queue.remove(fut)
        except ValueError:
            return
        self.waiting -= 1
        if not queue and self._flows.get(flow) is queue:
            del self._flows[flow]

    def _next_turn(self) -> None:
        """The loop came round: if requests wait, open a new turn and wake about a budget's worth of them."""
        self._turn_open = False
        if not self.waiting:
            return
        now = self.timer()
        elapsed, started = now - self._start, self._started
        # as many as fit in the budget at the pace of the turn that ends (at most twice as many as it started)
        pace = int(started * self.budget / elapsed) if elapsed > 0 else 2 * started
        wake = max(MIN_WAKE, min(2 * started, pace))
        self._open(now)
        while wake > 0 and self._flows:
            for flow in list(self._flows):  # one per flow, in turn
                queue = self._flows[flow]
                fut = queue.popleft()
                self.waiting -= 1
                del self._flows[flow]
                if queue:  # to the back of the round-robin order
                    self._flows[flow] = queue
                if fut.done():  # cancelled, its task not yet resumed to unqueue it: no turn spent on it
                    continue
                fut.set_result(None)
                self._woken += 1
                self._started += 1
                wake -= 1
                if wake == 0:
                    break

"""API Priority and Fairness, reduced to what an embedded server needs: seats shared fairly between users.

kube-apiserver classifies each request into a priority level (by flow schemas) and, inside a level,
into a flow (by user); a level has a number of seats (concurrent requests) and queues per flow, and
dispatches queued requests fairly across flows. Here, with the same names:

* **Priority levels.** ``exempt``: users in the ``system:masters`` group, on seats of their own (as many
  as the shared level has), never competing with anyone else. ``global-default``: everybody else,
  ``seats`` seats (``APIServer(max_inflight=...)``, ``kinformer serve --max-requests-inflight``).
* **Flows.** One per user (kube's ``ByUser`` distinguisher), or per remote address for requests without
  an authenticated user.
* **Fair dispatch.** A request takes a free seat at once when nobody is queued in its level. Otherwise it
  waits in its flow's queue; each freed seat goes to the queued flow holding the fewest seats (the
  longest-waiting among equals), so one user's burst cannot keep the others out: a newcomer gets the
  next seat that frees. Seats are never taken back from a running request.
* **Bounded waits.** A flow queues at most ``queue_length`` requests (kube's default queue length, 50)
  for at most ``queue_wait`` seconds (15: a quarter of kube's 60 s request timeout, as kube); beyond
  either the request is answered 429 ``TooManyRequests`` with ``Retry-After: 1``. A level with no seats
  refuses at once.
* **Waiting is not work.** A read that waits for the watch cache to reach a future resourceVersion (up to
  3 s) gives its seat back while it waits (:func:`seat_released`), takes it again fairly afterwards, and a
  user may have at most ``max_waits`` such waits at once (429 beyond), so such reads cannot pile up on
  the seats.
* **A budget per turn of the event loop** (:mod:`.turnbudget`): every seated request, exempt ones too, starts
  only while the loop's current turn has run for less than ``turn_budget`` seconds (5 ms); otherwise it waits
  (round-robin across flows) for a later turn, after the loop polled its sockets again. A burst of requests
  arriving together is spread over turns instead of running in one, so probes and other users are served
  between its parts; the wait counts against ``queue_wait`` (429 beyond).
* **Long-running requests** (watches) take no seat: they are counted by the per-client watch limit
  (:mod:`.limits`). Health probes (``/healthz``, ``/livez``, ``/readyz``) are never queued nor refused.

Invariants: a level's seats in use never exceed its seat count; a queued request is either granted a seat
(and then released exactly once) or removed from its queue, whatever ends its wait (grant, timeout,
cancellation); flows without queued or running requests are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from aiohttp import web

from ..auth.authentication import USER_KEY, UserInfo
from ..machinery import status as st
from .limits import client_key
from .turnbudget import DEFAULT_TURN_BUDGET, TurnBudget

__all__ = ["FlowControl", "PriorityLevel", "Rejected", "seat_context", "seat_released"]

EXEMPT_GROUP = "system:masters"
RETRY_AFTER = 1
DEFAULT_SEATS = 1000
DEFAULT_QUEUE_LENGTH = 50
DEFAULT_QUEUE_WAIT = 15.0
DEFAULT_MAX_WAITS = 10


class Rejected(Exception):
    """A request refused by flow control; answered 429 with ``Retry-After``."""

    def response(self) -> web.Response:
        return st.StatusError(429, "TooManyRequests", str(self), details={"retryAfterSeconds": RETRY_AFTER},
                              headers={"Retry-After": str(RETRY_AFTER)}).response()


class _Flow:
    """One flow of a level: the seats it holds, its waits and its queue (a plain class: one per request)."""

    __slots__ = ("inflight", "key", "queue", "queued_since", "waits")

    def __init__(self, key: str) -> None:
        self.key = key
        self.inflight = 0
        self.waits = 0
        self.queue: deque[asyncio.Future[None]] = deque()
        self.queued_since = 0.0


class Seat:
    """One request's place in a level; ``held`` while it occupies a seat."""

    __slots__ = ("flow", "held", "level")

    def __init__(self, level: PriorityLevel, flow: _Flow) -> None:
        self.level = level
        self.flow = flow
        self.held = False


class PriorityLevel:
    """``seats`` seats shared fairly by flows (see the module docstring for the rules)."""

    def __init__(self, name: str, seats: int, *, queue_length: int = DEFAULT_QUEUE_LENGTH,
                 queue_wait: float = DEFAULT_QUEUE_WAIT, max_waits: int = DEFAULT_MAX_WAITS) -> None:
        if seats < 0 or queue_length < 0 or queue_wait < 0 or max_waits < 0:
            raise ValueError("flow control limits must be >= 0")
        self.name = name
        self.seats = seats
        self.queue_length = queue_length
        self.queue_wait = queue_wait
        self.max_waits = max_waits
        self.inflight = 0
        self.queued = 0
        self.rejected = 0
        self._flows: dict[str, _Flow] = {}

    def flow_inflight(self, key: str) -> int:
        """Seats the flow ``key`` holds now."""
        flow = self._flows.get(key)
        return flow.inflight if flow is not None else 0

    def try_acquire(self, key: str) -> Seat | None:
        """A held seat for flow ``key`` when one is free and nobody is queued (the rule of :meth:`acquire`
        without a wait); None otherwise. Spares the uncontended request a coroutine."""
        if self.inflight >= self.seats or self.queued:
            return None
        flow = self._flows.get(key)
        if flow is None:
            flow = self._flows[key] = _Flow(key)
        seat = Seat(self, flow)
        seat.held = True  # as _grant, inline: this is every uncontended request's path
        flow.inflight += 1
        self.inflight += 1
        return seat

    async def acquire(self, key: str) -> Seat:
        """A held seat for flow ``key``: at once, or after a fair, bounded wait; :class:`Rejected` otherwise."""
        seat = Seat(self, self._flows.get(key) or self._flows.setdefault(key, _Flow(key)))
        await self._take(seat)
        return seat

    async def _take(self, seat: Seat) -> None:
        flow = seat.flow = self._flows.setdefault(seat.flow.key, seat.flow)
        if self.inflight < self.seats and not self.queued:
            self._grant(seat)
            return
        if self.seats == 0 or len(flow.queue) >= self.queue_length:
            self._reject(flow)
            raise Rejected(f"Too many requests: the {self.name} priority level is busy and this user's queue "
                           f"is full ({self.queue_length} requests), please try again later.")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if not flow.queue:
            flow.queued_since = loop.time()
        flow.queue.append(fut)
        self.queued += 1
        try:
            async with asyncio.timeout(self.queue_wait):
                await fut
        except BaseException as e:
            if fut.done() and not fut.cancelled():  # granted just as the wait ended: give the seat back
                seat.held = True
                self.release(seat)
            else:
                fut.cancel()
                self._unqueue(flow, fut)
            if isinstance(e, TimeoutError):
                self._reject(flow)
                raise Rejected(f"Too many requests: waited {self.queue_wait:g}s in the {self.name} priority "
                               "level's queue, please try again later.") from None
            raise
        seat.held = True

    def _grant(self, seat: Seat) -> None:
        seat.held = True
        seat.flow.inflight += 1
        self.inflight += 1

    def _unqueue(self, flow: _Flow, fut: asyncio.Future[None]) -> None:
        with contextlib.suppress(ValueError):
            flow.queue.remove(fut)
            self.queued -= 1
        self._forget(flow)

    def _reject(self, flow: _Flow) -> None:
        self.rejected += 1
        self._forget(flow)

    def _forget(self, flow: _Flow) -> None:
        if not flow.inflight and not flow.queue and not flow.waits:
            self._flows.pop(flow.key, None)

    def release(self, seat: Seat) -> None:
        """Give ``seat`` back (no-op when not held) and hand freed seats to queued flows, fairly."""
        if not seat.held:
            return
        seat.held = False
        flow = seat.flow
        flow.inflight -= 1
        self.inflight -= 1
        if self.queued:
            self._dispatch()
            self._forget(flow)
        elif not flow.inflight and not flow.waits:  # as _forget, inline: nothing queued, so no queue
            self._flows.pop(flow.key, None)

    def _dispatch(self) -> None:
        while self.inflight < self.seats and self.queued:
            flow = min((f for f in self._flows.values() if f.queue), key=lambda f: (f.inflight, f.queued_since))
            fut = flow.queue.popleft()
            self.queued -= 1
            if flow.queue:
                flow.queued_since = asyncio.get_running_loop().time()
            if fut.done():
                continue
            flow.inflight += 1
            self.inflight += 1
            fut.set_result(None)

    @contextlib.asynccontextmanager
    async def waiting(self, seat: Seat) -> AsyncIterator[None]:
        """Give the seat back for a wait that does no work; take it again (fairly) when the wait succeeds."""
        flow = seat.flow
        if flow.waits >= self.max_waits:
            self._reject(flow)
            raise Rejected(f"Too many requests: at most {self.max_waits} reads per user may wait for a newer "
                           "resourceVersion at once, please try again later.")
        flow.waits += 1
        self.release(seat)
        try:
            yield
        finally:
            flow.waits -= 1
        await self._take(seat)


class FlowControl:
    """The two priority levels and the classification of requests into them."""

    def __init__(self, seats: int = DEFAULT_SEATS, *, queue_length: int = DEFAULT_QUEUE_LENGTH,
                 queue_wait: float = DEFAULT_QUEUE_WAIT, max_waits: int = DEFAULT_MAX_WAITS,
                 turn_budget: float = DEFAULT_TURN_BUDGET) -> None:
        opts: dict[str, Any] = {"queue_length": queue_length, "queue_wait": queue_wait, "max_waits": max_waits}
        self.exempt = PriorityLevel("exempt", seats, **opts)
        self.default = PriorityLevel("global-default", seats, **opts)
        self.turns = TurnBudget(turn_budget, max_wait=queue_wait)

    def classify(self, request: web.Request, key: str | None = None,
                 user: UserInfo | None = None) -> tuple[PriorityLevel, str]:
        """The level and flow key of ``request`` (``key``: its :func:`~.limits.client_key`, when known;
        ``user``: its user, by default the one authentication stored in it)."""
        if user is None:
            user = request.get(USER_KEY)
        level = self.exempt if user is not None and EXEMPT_GROUP in user.groups else self.default
        return level, key or client_key(request, user)


# The seat of the request the current task serves (set by the handler chain, :mod:`.handlerchain`, and never
# reset: the request's task ends with it; a seat left there once its request ended is no longer held).
seat_context: contextvars.ContextVar[Seat | None] = contextvars.ContextVar("kinformer_flowcontrol_seat", default=None)


@contextlib.asynccontextmanager
async def seat_released() -> AsyncIterator[None]:
    """Around a wait that does no work (the watch cache catching up): the current request's seat is given
    back meanwhile and taken again afterwards. Outside flow control (no seat held) it only runs the block."""
    seat = seat_context.get()
    if seat is None or not seat.held:
        yield
        return
    try:
        async with seat.level.waiting(seat):
            yield
    except Rejected as e:
        raise st.StatusError(429, "TooManyRequests", str(e), details={"retryAfterSeconds": RETRY_AFTER},
                             headers={"Retry-After": str(RETRY_AFTER)}) from None

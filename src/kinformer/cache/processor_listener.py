"""One event handler's buffer and worker: client-go's processorListener (shared_informer.go).

The informer hands every change to each registered :class:`ProcessorListener` as a :class:`Notification`;
the listener delivers them to its handler's callbacks in its own task, so a slow or failing handler delays
nobody else.

Invariants:

* Each listener has an unbounded FIFO buffer and one task; notifications reach the handler in the order they
  were enqueued. A handler whose callbacks are all coroutine functions is awaited in that task, on the loop.
  A handler with any plain callback gets one worker thread of its own (so its callbacks may block, and keep
  their order) that drains the buffer by itself and sleeps only when the buffer is empty: the loop wakes it
  only then, so a busy stream changes threads rarely instead of once per batch. Its coroutine callbacks
  (and awaitables its plain ones return) run on the loop while the thread waits for them.
* A callback's exception is logged and counted (:attr:`ProcessorListener.errors`); it never stops the listener.
* ``pending`` counts notifications queued or being delivered; ``initial_pending`` those of the initial list
  (adds with ``is_in_initial_list``) not yet delivered (enqueued ones counted by the loop, delivered ones by
  whoever delivers: each counter has one writer).
* After :meth:`ProcessorListener.stop` nothing more is delivered (a plain batch stops at the next item).
* A listener with an ``accepts`` predicate is offered every notification (:attr:`ProcessorListener.offer`) and
  buffers only those it accepts, judged on the informer's side before buffering (client-go's
  FilteringResourceEventHandler judges after): an add by its object, an update by its old *or* new object (a
  handler still sees an object leave its filter), a delete by the deleted object (a tombstone's last known
  object; a tombstone without one is delivered). A rejected notification takes no buffer entry, wakes nobody
  and is not counted in ``pending``, ``processed`` or ``initial_pending``. An ``accepts`` that raises is logged
  and counted (``accept_errors``, written by the loop only, as ``errors`` is by the deliverer only; a
  registration's ``errors`` is their sum) and the notification is delivered. A notification of a kind the
  handler has no callback for is not judged: it is dropped there (the handler would do nothing with it).

Callbacks run on a worker thread must treat cached objects as read-only and must not touch asyncio objects
of the informer's loop except through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.cache.waiters import park, wake_all
from kinformer.clock import Clock

if TYPE_CHECKING:
    from kinformer.cache.shared_informer import SharedIndexInformer

__all__ = [
    "HandlerCallback",
    "Notification",
    "NotificationKind",
    "ProcessorListener",
    "ResourceEventHandler",
    "ResourceEventHandlerRegistration",
]

log = logging.getLogger(__name__)

_BATCH = 1024
#: Seconds a plain handler's sleeping worker thread is left asleep after a notification arrives, so that what
#: arrives meanwhile is handed over with it (at most ``_BATCH`` notifications wait: more wake it at once).
_HANDOFF_DELAY = 0.001


class NotificationKind(enum.IntEnum):
    """Which callback a notification is for (the index into a listener's callbacks)."""

    ADD = 0
    UPDATE = 1
    DELETE = 2


ADD, UPDATE, DELETE = NotificationKind.ADD, NotificationKind.UPDATE, NotificationKind.DELETE


class Notification(NamedTuple):
    """One change for one handler.

    ``obj`` is the added or deleted object, or the old object of an update; ``new`` is the update's new
    object (None otherwise). ``flag`` is ``is_in_initial_list`` for an add and ``is_resync`` for an update.
    ``enqueued_at`` is the informer clock's time when the change was handed out (for lag).
    """

    kind: NotificationKind
    obj: Any
    new: Any
    flag: bool
    enqueued_at: float


class ResourceEventHandler:
    """Base class for handler objects: override what you need; each method may be ``async def``.

    ``on_update`` may declare ``is_resync`` and ``on_add`` ``is_in_initial_list`` (keyword parameters) to
    be told about resyncs and initial-list adds. The no-op methods of this base class are never called.
    """

    def on_add(self, obj: Any, is_in_initial_list: bool = False) -> Any:
        """An object appeared in the cache."""

    def on_update(self, old: Any, new: Any) -> Any:
        """An object changed in the cache, or a resync (``old is new``)."""

    def on_delete(self, obj: Any) -> Any:
        """An object left the cache; may be a :class:`DeletedFinalStateUnknown` tombstone."""


_NOOPS = {ResourceEventHandler.on_add, ResourceEventHandler.on_update, ResourceEventHandler.on_delete}


def _accepts_keyword(fn: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    param = params.get(name)
    if param is not None:
        return param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY)
    return any(p.kind is p.VAR_KEYWORD for p in params.values())


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = type(fn).__dict__.get("__call__") if not inspect.isroutine(fn) else None
    return call is not None and inspect.iscoroutinefunction(call)


@dataclass(slots=True)
class HandlerCallback:
    """One callback as inspected once at registration: absent (``fn`` None), async or plain, and whether it
    takes the notification's flag as a keyword."""

    fn: Callable[..., Any] | None
    is_async: bool = False
    flag_kw: bool = False

    @classmethod
    def of(cls, fn: Callable[..., Any] | None, keyword: str | None) -> HandlerCallback:
        if fn is None or getattr(fn, "__func__", None) in _NOOPS:
            return cls(None)
        return cls(fn, _is_async(fn), bool(keyword and _accepts_keyword(fn, keyword)))


Callbacks = tuple[HandlerCallback, HandlerCallback, HandlerCallback]


def callbacks_of(handler: Any, on_add: Callable[..., Any] | None, on_update: Callable[..., Any] | None,
                 on_delete: Callable[..., Any] | None) -> Callbacks:
    """The (add, update, delete) callbacks of a handler object and/or keyword callbacks (which win)."""
    if handler is not None:
        on_add = on_add or getattr(handler, "on_add", None)
        on_update = on_update or getattr(handler, "on_update", None)
        on_delete = on_delete or getattr(handler, "on_delete", None)
    return (HandlerCallback.of(on_add, "is_in_initial_list"), HandlerCallback.of(on_update, "is_resync"),
            HandlerCallback.of(on_delete, None))


class ProcessorListener:
    """One handler's buffer, task and (for plain callbacks) worker thread (client-go's processorListener)."""

    __slots__ = ("_current", "_delivered_initial", "_enqueued_initial", "_executor", "_handoff", "_heard",
                 "_inflight", "_inflight_done", "_initial_waiters", "_loop", "_sleeping", "_task", "_threaded",
                 "_waiter", "_wake_worker", "accept_errors", "accepts", "active", "buffer", "callbacks", "errors",
                 "name", "next_resync", "offer", "offer_all", "processed", "resync_period")

    def __init__(self, callbacks: Callbacks, resync_period: float, clock: Clock, name: str,
                 accepts: Callable[[Any], bool] | None = None) -> None:
        self.callbacks = callbacks
        self.accepts = accepts
        #: By notification kind: whether the handler has a callback for it (a filtered one drops the others
        #: unjudged).
        self._heard = tuple(cb.fn is not None for cb in callbacks)
        #: How the informer hands over a notification: :meth:`enqueue`, or :meth:`_enqueue_accepted` when filtered.
        self.offer: Callable[[Notification], None] = self.enqueue if accepts is None else self._enqueue_accepted
        #: The batch form of :attr:`offer`: :meth:`enqueue_all`, or :meth:`_enqueue_all_accepted` when filtered.
        self.offer_all: Callable[[list[Notification]], None] = (
            self.enqueue_all if accepts is None else self._enqueue_all_accepted)
        self.resync_period = resync_period
        self.next_resync = clock.now() + resync_period
        self.name = name
        self.buffer: deque[Notification] = deque()
        self.processed = 0
        self.errors = 0
        self.accept_errors = 0
        self.active = True
        self._enqueued_initial = 0
        self._delivered_initial = 0
        self._threaded = any(cb.fn is not None and not cb.is_async for cb in callbacks)
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._wake_worker = threading.Event()
        self._sleeping = False
        self._handoff: asyncio.TimerHandle | None = None
        self._current: Notification | None = None
        self._inflight: list[Notification] = []
        self._inflight_done = 0
        self._initial_waiters: list[asyncio.Future[None]] = []

    # -- producer side (event loop thread)

    def enqueue(self, note: Notification) -> None:
        self.buffer.append(note)
        if note.flag and note.kind is ADD:
            self._enqueued_initial += 1
        if self._sleeping or self._waiter is not None:
            self._wake()

    def enqueue_all(self, notes: list[Notification]) -> None:
        """:meth:`enqueue` each of ``notes`` in order, with at most one wake-up of the consumer. None of them
        may be an initial-list add (those go through :meth:`enqueue`, which counts them)."""
        self.buffer.extend(notes)
        if self._sleeping or self._waiter is not None:
            self._wake()

    def _wake(self) -> None:
        """Tell the waiting consumer that the buffer has notifications (a sleeping worker thread a little
        later, with what gathers meanwhile)."""
        if self._sleeping:
            if self._handoff is None:  # hand over what gathers meanwhile in one go: the GIL changes hands rarely
                loop = self._loop
                assert loop is not None
                self._handoff = loop.call_later(_HANDOFF_DELAY, self._hand_over)
            elif len(self.buffer) >= _BATCH:
                self._hand_over()
            return
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def _enqueue_accepted(self, note: Notification) -> None:
        """:meth:`enqueue` the notification if ``accepts`` takes it (see the module docstring)."""
        if self._heard[note.kind] and self._kept((note,)):
            self.enqueue(note)

    def _enqueue_all_accepted(self, notes: list[Notification]) -> None:
        """:meth:`enqueue_all` the notifications ``accepts`` takes, in order."""
        kept = self._kept(notes)
        if kept:
            self.enqueue_all(kept)

    def _kept(self, notes: Sequence[Notification]) -> list[Notification]:
        """The notifications ``accepts`` takes, in order: none of a kind the handler has no callback for; one
        ``accepts`` fails on is counted, logged and taken. Judged inline, in one call for the batch (a rollout's
        pod informer has ~17 filtered handlers judging each change)."""
        accepts = self.accepts
        assert accepts is not None
        heard = self._heard
        kept = []
        for note in notes:
            kind, obj, new, _, _ = note
            if not heard[kind]:
                continue
            try:
                if kind is UPDATE:
                    taken = accepts(obj) or (new is not obj and accepts(new))
                elif kind is DELETE and isinstance(obj, DeletedFinalStateUnknown):
                    taken = obj.obj is None or accepts(obj.obj)
                else:
                    taken = accepts(obj)
            except Exception:
                self.accept_errors += 1
                log.exception("event handler %s: accepts failed; delivering", self.name)
                taken = True
            if taken:
                kept.append(note)
        return kept

    def _hand_over(self) -> None:
        handoff, self._handoff = self._handoff, None
        if handoff is not None:
            handoff.cancel()
        self._wake_worker.set()

    @property
    def initial_pending(self) -> int:
        """Initial-list notifications enqueued and not yet delivered."""
        return self._enqueued_initial - self._delivered_initial

    async def wait_initial_delivered(self) -> bool:
        """Wait until every initial-list notification enqueued so far was delivered (woken by the delivery,
        never polled); False if the listener stopped first."""
        while self.initial_pending > 0 and self.active:
            await park(self._initial_waiters)
        return self.initial_pending <= 0

    def _wake_initial_waiters(self) -> None:
        self._initial_waiters = wake_all(self._initial_waiters)

    def should_resync(self, now: float) -> bool:
        return self.resync_period > 0 and now >= self.next_resync

    # -- observability

    @property
    def pending(self) -> int:
        current = self._current
        return len(self.buffer) + len(self._inflight) - self._inflight_done + (current is not None)

    def oldest_pending_since(self) -> float | None:
        current = self._current
        if current is not None:
            return current.enqueued_at
        inflight, done = self._inflight, self._inflight_done
        if done < len(inflight):
            return inflight[done].enqueued_at
        buffer = self.buffer
        return buffer[0].enqueued_at if buffer else None

    # -- lifecycle

    def start(self, tg: asyncio.TaskGroup) -> None:
        """Start delivering in a task of ``tg`` (the informer's), unless started or stopped."""
        if self._task is None and self.active:
            run = self._run_threaded() if self._threaded else self._run()
            self._task = tg.create_task(run, name=f"informer-handler-{self.name}")

    def stop(self) -> None:
        """Deliver nothing more; the task is cancelled (its owner awaits it) and the worker thread ends after
        the callback it is running."""
        self.active = False
        self._wake_initial_waiters()
        self._hand_over()
        if self._task is not None:
            self._task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    # -- consumer side: coroutine callbacks only (the listener's task)

    async def _run(self) -> None:
        buffer = self.buffer
        loop = asyncio.get_running_loop()
        while self.active:
            if not buffer:
                self._waiter = loop.create_future()
                await self._waiter
                continue
            if len(buffer) <= _BATCH:  # all of it (mostly): copied and cleared in two calls
                batch = list(buffer)
                buffer.clear()
            else:
                popleft = buffer.popleft
                batch = [popleft() for _ in range(_BATCH)]
            self._inflight = batch
            self._inflight_done = 0
            try:
                await self._deliver_async(batch)
            finally:
                self._account(batch)
                self._inflight = []
                self._inflight_done = 0

    async def _deliver_async(self, batch: list[Notification]) -> None:
        """Await the callback of each notification in turn, in this task (no task or coroutine of the
        listener's own per notification: only the callback's)."""
        callbacks = self.callbacks
        for kind, a, b, flag, _ in batch:
            cb = callbacks[kind]
            fn = cb.fn
            if fn is not None:
                try:  # the callback called here, as in _deliver (no frame of its own per notification)
                    if kind is UPDATE:
                        await (fn(a, b, is_resync=flag) if cb.flag_kw else fn(a, b))
                    elif kind is ADD:
                        await (fn(a, is_in_initial_list=flag) if cb.flag_kw else fn(a))
                    else:
                        await fn(a)
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        raise
                    # The handler's own await was cancelled (not this listener): an ordinary handler error.
                    self.errors += 1
                    log.warning("event handler %s raised CancelledError", self.name)
                except Exception:
                    self.errors += 1
                    log.exception("event handler %s failed", self.name)
            self._inflight_done += 1

    def _account(self, batch: list[Notification]) -> None:
        # notifications never delivered (cancelled) leave the pending count too
        self.processed += self._inflight_done
        if self._enqueued_initial == self._delivered_initial:
            return  # no initial-list notification outstanding (the steady state): nothing to count
        initial = sum(1 for note in batch if note.flag and note.kind is ADD)
        if initial:
            self._delivered_initial += initial
            if self.initial_pending <= 0:
                self._wake_initial_waiters()

    # -- consumer side: a handler with plain callbacks (its worker thread)

    async def _run_threaded(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"kinformer-handler-{self.name}")
        await self._loop.run_in_executor(self._executor, self._drain)

    def _drain(self) -> None:
        """The worker thread: deliver from the buffer until stopped, sleeping only while it is empty.

        Sleep protocol: ``_sleeping`` is set before the last look at the buffer, and :meth:`enqueue` appends
        before it reads ``_sleeping``; so either that look sees the new notification or the loop wakes us."""
        buffer = self.buffer
        wake = self._wake_worker
        deliver = self._deliver
        while self.active:
            if not buffer:
                wake.clear()
                self._sleeping = True
                if not buffer and self.active:
                    wake.wait()
                self._sleeping = False
                continue
            note = buffer.popleft()
            self._current = note
            deliver(note)
            self._current = None
            self.processed += 1
            if note.flag and note.kind is ADD:
                self._delivered_initial += 1
                if self.initial_pending <= 0:
                    self._call_in_loop(self._wake_initial_waiters)

    def _call_in_loop(self, fn: Callable[[], None]) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn)

    def _deliver(self, note: Notification) -> None:
        """One notification, in the worker thread. A coroutine callback, or an awaitable a plain one returns
        (e.g. a lambda around an ``async def``), is run to completion on the event loop before the next
        notification, so no event is dropped and order is kept."""
        kind, a, b, flag, _ = note
        cb = self.callbacks[kind]
        fn = cb.fn
        if fn is None:
            return
        try:  # the callback called here, its flag as a keyword when it takes one (no frame of its own)
            if kind is UPDATE:
                result = fn(a, b, is_resync=flag) if cb.flag_kw else fn(a, b)
            elif kind is ADD:
                result = fn(a, is_in_initial_list=flag) if cb.flag_kw else fn(a)
            else:
                result = fn(a)
            if result is not None and inspect.isawaitable(result):
                loop = self._loop
                assert loop is not None
                asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()
        except Exception:
            self.errors += 1
            log.exception("event handler %s failed", self.name)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class ResourceEventHandlerRegistration:
    """The handle :meth:`SharedIndexInformer.add_event_handler` returns."""

    __slots__ = ("_informer", "_listener")

    def __init__(self, informer: SharedIndexInformer, listener: ProcessorListener) -> None:
        self._informer = informer
        self._listener = listener

    def has_synced(self) -> bool:
        """True once the informer synced and this handler processed its initial-list notifications."""
        return self._listener.initial_pending <= 0 and self._informer.has_synced()

    async def wait_for_sync(self) -> bool:
        """Wait until :meth:`has_synced` (event-driven); False if the informer or this handler stopped first."""
        if not await self._informer.wait_for_sync():
            return False
        return await self._listener.wait_initial_delivered() and self.has_synced()

    def remove(self) -> None:
        """Stop delivering to this handler (idempotent)."""
        self._informer.remove_event_handler(self)

    @property
    def active(self) -> bool:
        return self._listener.active

    @property
    def pending(self) -> int:
        """Notifications queued or being processed for this handler."""
        return self._listener.pending

    @property
    def lag_seconds(self) -> float:
        """Age of the oldest notification not yet processed (0 when idle), on the informer's clock."""
        since = self._listener.oldest_pending_since()
        return 0.0 if since is None else max(0.0, self._informer.clock.now() - since)

    @property
    def processed(self) -> int:
        return self._listener.processed

    @property
    def errors(self) -> int:
        """Exceptions raised by this handler's callbacks and its ``accepts``."""
        return self._listener.errors + self._listener.accept_errors

    @property
    def resync_period(self) -> float:
        return self._listener.resync_period

    def __repr__(self) -> str:
        return (f"<ResourceEventHandlerRegistration {self._listener.name} pending={self.pending} "
                f"errors={self.errors}>")

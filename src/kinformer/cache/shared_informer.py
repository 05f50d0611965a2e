"""SharedIndexInformer: one list/watch, one cache, many event handlers (client-go shared_informer.go).

Pipeline: Reflector -> DeltaFIFO -> :meth:`SharedIndexInformer._handle_deltas` -> Indexer, then each
handler's own buffer -> that handler's task.

Invariants:

* Cache first: the indexer (and its indices) is updated before any handler hears of the change; whether a
  delta becomes ``on_add`` or ``on_update`` is decided by the cache, and ``on_update``'s old object is the
  cached one it replaced.
* A Sync delta, or a Replaced delta whose resourceVersion equals the cached one, is a *resync*: it goes only
  to handlers whose resync period is due (chosen by ``should_resync`` just before the FIFO's resync) and
  arrives as ``on_update(obj, obj)`` (``old is new``); a callback with an ``is_resync`` keyword parameter
  also gets ``is_resync=True`` (``False`` for real updates). Likewise ``on_add`` gets
  ``is_in_initial_list`` if it declares that keyword. Signatures are inspected once, at registration.
* Each handler has an unbounded FIFO buffer and one task; notifications reach it in order. Coroutine
  callbacks are awaited in that task; plain callbacks run in batches in one worker thread of the handler's
  own (so they may block, and keep their order). A slow or raising handler delays nobody else; exceptions
  are logged and counted on the registration.
* A handler added after start first receives every cached object once as ``on_add`` (initial list).
  ``registration.has_synced()`` is true once the informer has synced and the handler has processed all its
  initial-list notifications.

Callbacks run on a worker thread (plain functions) must treat cached objects as read-only and must not touch
asyncio objects of the informer's loop except through ``loop.call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import inspect
import logging
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kinformer.cache.delta_fifo import Delta, DeltaFIFO, DeltaType, FIFOClosed
from kinformer.cache.listwatch import ListerWatcher
from kinformer.cache.reflector import Backoff, Reflector, ReflectorStats, WatchErrorHandler
from kinformer.cache.store import Indexer, IndexFunc, meta_namespace_key
from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.errors import KinformerError

__all__ = [
    "DEFAULT_TRANSFORM",
    "MINIMUM_RESYNC_PERIOD",
    "CacheMutationError",
    "DeletedFinalStateUnknown",
    "InformerStats",
    "ResourceEventHandler",
    "ResourceEventHandlerRegistration",
    "SharedIndexInformer",
    "strip_managed_fields",
]

log = logging.getLogger(__name__)

MINIMUM_RESYNC_PERIOD = 1.0
_BATCH = 1024
_SYNC_POLL = 0.01

_ADD, _UPDATE, _DELETE = 0, 1, 2
_DELETED, _SYNC, _REPLACED = DeltaType.DELETED, DeltaType.SYNC, DeltaType.REPLACED

Transform = Callable[[Any], Any]


def strip_managed_fields(obj: Any) -> Any:
    """The default transform: ``obj`` without ``metadata.managedFields`` (a new top-level dict with a copied
    metadata; nested values are shared). Objects without managedFields are returned as they are."""
    without = getattr(obj, "without_managed_fields", None)  # lazily decoded client objects strip cheaply
    if without is not None:
        return without()
    try:
        meta = obj["metadata"]
        if "managedFields" not in meta:
            return obj
    except (KeyError, TypeError, IndexError):
        return obj
    if not isinstance(meta, Mapping):
        return obj
    new = dict(obj)
    new["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return new


DEFAULT_TRANSFORM: Transform = strip_managed_fields


class CacheMutationError(KinformerError, RuntimeError):
    """A cached object was modified in place (found by the mutation detector)."""


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
class _Callback:
    fn: Callable[..., Any] | None
    is_async: bool = False
    flag_kw: bool = False

    @classmethod
    def of(cls, fn: Callable[..., Any] | None, keyword: str | None) -> _Callback:
        if fn is None or getattr(fn, "__func__", None) in _NOOPS:
            return cls(None)
        return cls(fn, _is_async(fn), bool(keyword) and _accepts_keyword(fn, keyword))


# A notification: (kind, a, b, flag, enqueued_at). add: (obj, None, is_in_initial_list); update: (old, new,
# is_resync); delete: (obj, None, False).
Notification = tuple[int, Any, Any, bool, float]


class _Listener:
    """One handler's buffer, task and (for plain callbacks) worker thread."""

    __slots__ = ("_executor", "_inflight", "_inflight_done", "_loop_clock", "_task", "_waiter", "active",
                 "buffer", "callbacks", "errors", "initial_pending", "name", "next_resync", "processed",
                 "resync_period")

    def __init__(self, callbacks: tuple[_Callback, _Callback, _Callback], resync_period: float, clock: Clock,
                 name: str) -> None:
        self.callbacks = callbacks
        self.resync_period = resync_period
        self.next_resync = clock.now() + resync_period
        self.name = name
        self.buffer: deque[Notification] = deque()
        self.initial_pending = 0
        self.processed = 0
        self.errors = 0
        self.active = True
        self._loop_clock = clock
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._inflight: list[Notification] = []
        self._inflight_done = 0

    # -- producer side (event loop thread)

    def enqueue(self, note: Notification) -> None:
        self.buffer.append(note)
        if note[0] == _ADD and note[3]:
            self.initial_pending += 1
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def should_resync(self, now: float) -> bool:
        return self.resync_period > 0 and now >= self.next_resync

    # -- observability

    @property
    def pending(self) -> int:
        return len(self.buffer) + len(self._inflight) - self._inflight_done

    def oldest_pending_since(self) -> float | None:
        inflight, done = self._inflight, self._inflight_done
        if done < len(inflight):
            return inflight[done][4]
        buffer = self.buffer
        return buffer[0][4] if buffer else None

    # -- lifecycle

    def start(self) -> None:
        if self._task is None and self.active:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"informer-handler-{self.name}")

    def stop(self) -> None:
        self.active = False
        if self._task is not None:
            self._task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def join(self) -> None:
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    # -- consumer side (the listener's task)

    async def _run(self) -> None:
        buffer = self.buffer
        loop = asyncio.get_running_loop()
        while self.active:
            if not buffer:
                self._waiter = loop.create_future()
                await self._waiter
                continue
            count = min(len(buffer), _BATCH)
            popleft = buffer.popleft
            batch = [popleft() for _ in range(count)]
            self._inflight = batch
            self._inflight_done = 0
            try:
                await self._dispatch(batch, loop)
            finally:
                self._account(batch)
                self._inflight = []
                self._inflight_done = 0

    def _account(self, batch: list[Notification]) -> None:
        # notifications never delivered (cancelled) leave the pending count too
        self.processed += self._inflight_done
        initial = 0
        for note in batch:
            if note[3] and note[0] == _ADD:
                initial += 1
        self.initial_pending -= initial

    async def _dispatch(self, batch: list[Notification], loop: asyncio.AbstractEventLoop) -> None:
        callbacks = self.callbacks
        i, n = 0, len(batch)
        while i < n:
            if callbacks[batch[i][0]].is_async:
                await self._call_async(batch[i])
                i += 1
                self._inflight_done = i
                continue
            j = i + 1
            while j < n and not callbacks[batch[j][0]].is_async:
                j += 1
            if any(callbacks[batch[k][0]].fn is not None for k in range(i, j)):
                if self._executor is None:
                    self._executor = concurrent.futures.ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix=f"kinformer-handler-{self.name}")
                await loop.run_in_executor(self._executor, self._run_sync, batch, i, j, loop)
            i = j
            self._inflight_done = i

    async def _call_async(self, note: Notification) -> None:
        cb = self.callbacks[note[0]]
        try:
            kind = note[0]
            if kind == _UPDATE:
                coro = cb.fn(note[1], note[2], is_resync=note[3]) if cb.flag_kw else cb.fn(note[1], note[2])
            elif kind == _ADD:
                coro = cb.fn(note[1], is_in_initial_list=note[3]) if cb.flag_kw else cb.fn(note[1])
            else:
                coro = cb.fn(note[1])
            await coro
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

    def _run_sync(self, batch: list[Notification], start: int, end: int, loop: asyncio.AbstractEventLoop) -> None:
        """Runs in the listener's worker thread; stops at once when the handler is removed or stopped.

        A plain callable that returns an awaitable (e.g. a lambda around an ``async def``) has it run to
        completion on the event loop before the next notification, so no event is dropped.
        """
        add, update, delete = self.callbacks
        add_fn, add_kw = add.fn, add.flag_kw
        update_fn, update_kw = update.fn, update.flag_kw
        delete_fn = delete.fn
        for i in range(start, end):
            if not self.active:
                return
            kind, a, b, flag, _ = batch[i]
            result = None
            try:
                if kind == _UPDATE:
                    if update_fn is not None:
                        result = update_fn(a, b, is_resync=flag) if update_kw else update_fn(a, b)
                elif kind == _ADD:
                    if add_fn is not None:
                        result = add_fn(a, is_in_initial_list=flag) if add_kw else add_fn(a)
                elif delete_fn is not None:
                    result = delete_fn(a)
                if result is not None and inspect.isawaitable(result):
                    asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()
            except Exception:
                self.errors += 1
                log.exception("event handler %s failed", self.name)
            self._inflight_done = i + 1


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


class ResourceEventHandlerRegistration:
    """The handle :meth:`SharedIndexInformer.add_event_handler` returns."""

    __slots__ = ("_informer", "_listener")

    def __init__(self, informer: SharedIndexInformer, listener: _Listener) -> None:
        self._informer = informer
        self._listener = listener

    def has_synced(self) -> bool:
        """True once the informer synced and this handler processed its initial-list notifications."""
        return self._listener.initial_pending <= 0 and self._informer.has_synced()

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
        """Exceptions raised by this handler's callbacks."""
        return self._listener.errors

    @property
    def resync_period(self) -> float:
        return self._listener.resync_period

    def __repr__(self) -> str:
        return (f"<ResourceEventHandlerRegistration {self._listener.name} pending={self.pending} "
                f"errors={self.errors}>")


@dataclass(slots=True)
class InformerStats:
    """Counters for metrics and the CLI."""

    deltas: int = 0
    process_errors: int = 0
    reflector: ReflectorStats = field(default_factory=ReflectorStats)


class _MutationDetector:
    """Keeps a plain deep copy of every cached object and reports objects changed in place."""

    __slots__ = ("copies", "raise_on_mutation")

    def __init__(self, raise_on_mutation: bool) -> None:
        self.copies: dict[str, tuple[Any, Any]] = {}
        self.raise_on_mutation = raise_on_mutation

    def record(self, key: str, obj: Any) -> None:
        self.copies[key] = (obj, _plain(obj))

    def forget(self, key: str) -> None:
        self.copies.pop(key, None)

    def mutated(self) -> list[str]:
        return sorted(k for k, (obj, snapshot) in list(self.copies.items()) if _plain(obj) != snapshot)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return copy.copy(value)


def _resource_version(obj: Any) -> Any:
    try:
        return obj["metadata"].get("resourceVersion")
    except (KeyError, TypeError, AttributeError):
        return None


class SharedIndexInformer:
    """Lists and watches one resource into an :class:`Indexer` and fans changes out to event handlers.

    ``resync`` is the default handler resync period in seconds (0: never; otherwise at least 1 s).
    ``transform`` is applied to every object before it is cached (default: drop ``metadata.managedFields``).
    ``backoff`` makes the reflector's error backoff (default: client-go's 0.8 s doubling to 30 s).
    Use it from one event loop: ``start()`` / ``await run()``, then ``await stop()``.
    """

    def __init__(self, lw: ListerWatcher, *, resync: float = 0.0, indexers: Mapping[str, IndexFunc] | None = None,
                 clock: Clock = REAL_CLOCK, transform: Transform | None = DEFAULT_TRANSFORM, name: str = "",
                 resource: str = "", use_streaming_list: bool = False, rng: random.Random | None = None,
                 namespaced: bool = True, backoff: Callable[[], Backoff] | None = None) -> None:
        self.lw = lw
        self.clock = clock
        self.name = name or resource or "informer"
        self.resource = resource
        self.namespaced = namespaced
        self.use_streaming_list = use_streaming_list
        self._backoff = backoff
        self._rng = rng
        self._default_resync = _clamp_resync(resync)
        self._check_period = self._default_resync
        self._transform = transform
        self._indexer = Indexer(meta_namespace_key, indexers)
        self._fifo = DeltaFIFO(meta_namespace_key, known_objects=self._indexer, emit_delta_type_replaced=True)
        self._listeners: list[_Listener] = []
        self._syncing: list[_Listener] = []
        self._watch_error_handler: WatchErrorHandler | None = None
        self._reflector: Reflector | None = None
        self._detector: _MutationDetector | None = None
        self._detector_interval = 0.0
        self._started = False
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._synced = False
        self._synced_event = asyncio.Event()
        self._stats = InformerStats()
        self._handler_seq = 0

    # ------------------------------------------------------------------ cache access

    @property
    def indexer(self) -> Indexer:
        """The cache (read-only objects)."""
        return self._indexer

    def get_store(self) -> Indexer:
        return self._indexer

    def lister(self) -> Any:
        """A :class:`kinformer.cache.lister.Lister` over the cache."""
        from kinformer.cache.lister import Lister

        return Lister(self._indexer, namespaced=self.namespaced, resource=self.resource or self.name)

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indices (before or after start; cached objects are indexed at once)."""
        self._indexer.add_indexers(indexers)

    @property
    def last_sync_resource_version(self) -> str:
        return self._reflector.last_sync_resource_version if self._reflector is not None else ""

    @property
    def stats(self) -> InformerStats:
        if self._reflector is not None:
            self._stats.reflector = self._reflector.stats
        return self._stats

    @property
    def is_started(self) -> bool:
        return self._started

    @property
    def is_stopped(self) -> bool:
        return self._stopped

    def has_synced(self) -> bool:
        """True once every object of the first list (and its deletions) has been processed."""
        return self._fifo.has_synced()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait (real time, at most ``timeout``) until :meth:`has_synced`; False on timeout or stop."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.has_synced():
            if self._stopped:
                return False
            # the event wakes us after a pop; the poll covers an empty first list (nothing to pop)
            wait = _SYNC_POLL if deadline is None else min(_SYNC_POLL, deadline - loop.time())
            if wait <= 0:
                return False
            try:
                await asyncio.wait_for(self._synced_event.wait(), wait)
            except TimeoutError:
                pass
        return True

    # ------------------------------------------------------------------ configuration

    def set_transform(self, transform: Transform | None) -> None:
        """Replace the transform (None: cache objects as received). Only before start."""
        if self._started:
            raise RuntimeError("set_transform: informer has already started")
        self._transform = transform

    def set_watch_error_handler(self, handler: WatchErrorHandler) -> None:
        """Called with ``(reflector, exc)`` on every list/watch failure. Only before start."""
        if self._started:
            raise RuntimeError("set_watch_error_handler: informer has already started")
        self._watch_error_handler = handler

    def enable_mutation_detector(self, *, interval: float = 10.0, raise_on_mutation: bool = False) -> None:
        """Debug aid: remember a deep copy of every cached object; :meth:`check_mutations` (also run every
        ``interval`` clock seconds once started, logging at ERROR) reports objects mutated in place."""
        if self._detector is None:
            self._detector = _MutationDetector(raise_on_mutation)
            for key in self._indexer.list_keys():
                obj = self._indexer.get_by_key(key)
                if obj is not None:
                    self._detector.record(key, obj)
        self._detector_interval = interval

    def check_mutations(self) -> list[str]:
        """Keys of cached objects changed since they were cached; raises :class:`CacheMutationError` when
        any is found and the detector was enabled with ``raise_on_mutation``. [] when disabled."""
        if self._detector is None:
            return []
        mutated = self._detector.mutated()
        if mutated:
            message = f"{self.name}: cached objects were mutated: {', '.join(mutated[:20])}"
            if self._detector.raise_on_mutation:
                raise CacheMutationError(message)
            log.error("%s", message)
        return mutated

    # ------------------------------------------------------------------ handlers

    def add_event_handler(self, handler: Any = None, *, on_add: Callable[..., Any] | None = None,
                          on_update: Callable[..., Any] | None = None, on_delete: Callable[..., Any] | None = None,
                          resync: float | None = None) -> ResourceEventHandlerRegistration:
        """Register callbacks (a handler object with ``on_add``/``on_update``/``on_delete`` methods, or the
        keyword callbacks, which win over the object's). ``resync`` None means the informer's period.

        After start, the handler first gets every cached object as an initial-list add.
        """
        if handler is not None:
            on_add = on_add or getattr(handler, "on_add", None)
            on_update = on_update or getattr(handler, "on_update", None)
            on_delete = on_delete or getattr(handler, "on_delete", None)
        callbacks = (_Callback.of(on_add, "is_in_initial_list"), _Callback.of(on_update, "is_resync"),
                     _Callback.of(on_delete, None))
        period = self._handler_period(resync)
        self._handler_seq += 1
        listener = _Listener(callbacks, period, self.clock, f"{self.name}#{self._handler_seq}")
        self._listeners.append(listener)
        if self._started and not self._stopped:
            now = self.clock.now()
            for obj in self._indexer.list():
                listener.enqueue((_ADD, obj, None, True, now))
            listener.start()
        return ResourceEventHandlerRegistration(self, listener)

    def _handler_period(self, resync: float | None) -> float:
        period = self._default_resync if resync is None else _clamp_resync(resync)
        if period <= 0:
            return 0.0
        if not self._started:
            if self._check_period <= 0 or period < self._check_period:
                self._check_period = period
            return period
        if self._check_period > 0 and period < self._check_period:
            log.warning("%s: handler resync period %.3gs is below the informer's resync check period %.3gs "
                        "and the informer has started; using %.3gs", self.name, period, self._check_period,
                        self._check_period)
            return self._check_period
        if self._check_period <= 0:
            self._check_period = period
            if self._reflector is not None:
                self._reflector.update_resync_period(period)
        return period

    def remove_event_handler(self, registration: ResourceEventHandlerRegistration) -> None:
        """Stop and forget a handler; pending notifications are dropped (idempotent)."""
        listener = registration._listener
        if listener in self._listeners:
            self._listeners.remove(listener)
        if listener in self._syncing:
            self._syncing = [x for x in self._syncing if x is not listener]
        listener.stop()

    @property
    def registrations(self) -> int:
        return len(self._listeners)

    def pending_notifications(self) -> dict[str, int]:
        """Notifications queued per handler (by handler name): each handler's lag, for metrics."""
        return {listener.name: listener.pending for listener in self._listeners}

    # ------------------------------------------------------------------ delta processing

    def _should_resync(self) -> bool:
        """Pick the handlers whose resync is due (called by the reflector before ``fifo.resync()``)."""
        now = self.clock.now()
        syncing = []
        for listener in self._listeners:
            if listener.should_resync(now):
                syncing.append(listener)
                listener.next_resync = now + listener.resync_period
        self._syncing = syncing
        return bool(syncing)

    def _handle_deltas(self, deltas: list[Delta], is_in_initial_list: bool) -> None:
        """Apply one key's deltas to the cache, then notify (client-go handleDeltas / processDeltas)."""
        indexer = self._indexer
        listeners = self._listeners
        detector = self._detector
        now = self.clock.now()
        for kind, obj in deltas:
            if kind is _DELETED:
                indexer.delete(obj)
                if detector is not None:
                    detector.forget(indexer.key_of(obj))
                note = (_DELETE, obj, None, False, now)
                for listener in listeners:
                    listener.enqueue(note)
                continue
            old = indexer.add(obj)
            if detector is not None:
                detector.record(indexer.key_of(obj), obj)
            if old is None:
                note = (_ADD, obj, None, is_in_initial_list, now)
                for listener in listeners:
                    listener.enqueue(note)
                continue
            is_sync = kind is _SYNC or (kind is _REPLACED and _resource_version(old) == _resource_version(obj))
            note = (_UPDATE, old, obj, is_sync, now)
            for listener in (self._syncing if is_sync else listeners):
                listener.enqueue(note)
        self._stats.deltas += len(deltas)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> asyncio.Task[None]:
        """Run the informer in a new task (returned)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def run(self) -> None:
        """List, watch, cache and notify until :meth:`stop` (returns) or cancellation (raises)."""
        if self._started:
            raise RuntimeError("informer already started")
        self._started = True
        if self._task is None:
            self._task = asyncio.current_task()
        self._reflector = Reflector(self.lw, self._fifo, name=self.name, resync_period=self._check_period,
                                    clock=self.clock, watch_error_handler=self._watch_error_handler,
                                    use_streaming_list=self.use_streaming_list, rng=self._rng,
                                    should_resync=self._should_resync, transform=self._transform,
                                    backoff=self._backoff() if self._backoff else None)
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            listener.start()
        helpers = [loop.create_task(self._reflector.run(), name=f"reflector-{self.name}")]
        if self._detector is not None and self._detector_interval > 0:
            helpers.append(loop.create_task(self._check_mutations_periodically()))
        try:
            await self._process_loop()
        except asyncio.CancelledError:
            if not self._stopped:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            self._stopped = True
            self._reflector.stop()
            for helper in helpers:
                helper.cancel()
            self._fifo.close()
            for listener in self._listeners:
                listener.stop()
            await asyncio.gather(*helpers, *(listener.join() for listener in self._listeners),
                                 return_exceptions=True)
            self._synced_event.set()

    async def stop(self) -> None:
        """Stop everything and wait for it (idempotent)."""
        if self._stopped and (self._task is None or self._task.done()):
            return
        self._stopped = True
        task = self._task
        if task is None or task.done():
            return
        if task is asyncio.current_task():
            raise RuntimeError("stop() called from the informer's own task")
        task.cancel()
        await asyncio.wait([task])

    async def _process_loop(self) -> None:
        pop = self._fifo.pop
        handle = self._handle_deltas
        fifo = self._fifo
        while True:
            try:
                await pop(handle)
            except FIFOClosed:
                return
            except Exception:
                self._stats.process_errors += 1
                log.exception("%s: processing deltas failed", self.name)
            if not self._synced and fifo.has_synced():
                self._synced = True
                self._synced_event.set()

    async def _check_mutations_periodically(self) -> None:
        while True:
            await self.clock.sleep(self._detector_interval)
            try:
                self.check_mutations()
            except CacheMutationError:
                log.exception("%s: cache mutation detected", self.name)

    def __repr__(self) -> str:
        return f"<SharedIndexInformer {self.name} objects={len(self._indexer)} synced={self.has_synced()}>"


def _clamp_resync(period: float) -> float:
    if period <= 0:
        return 0.0
    return max(period, MINIMUM_RESYNC_PERIOD)


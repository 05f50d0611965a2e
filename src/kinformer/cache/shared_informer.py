"""SharedIndexInformer: one list/watch, one cache, many event handlers (client-go shared_informer.go).

Pipeline: Reflector -> DeltaFIFO -> :meth:`SharedIndexInformer._handle_deltas` -> Indexer, then each
handler's :class:`~kinformer.cache.processor_listener.ProcessorListener` (its own buffer and task). While
the RealFIFO is idle the reflector's deltas skip it, a watch batch at a time (:meth:`RealFIFO.set_direct
<kinformer.cache.real_fifo.RealFIFO.set_direct>`): the same order and bookkeeping, no pop per event.

Invariants:

* Cache first: the indexer (and its indices) is updated before any handler hears of the change; whether a
  delta becomes ``on_add`` or ``on_update`` is decided by the cache, and ``on_update``'s old object is the
  cached one it replaced; a deletion of a key the cache does not hold reaches no handler.
* Handlers see changes in the order the server sent them, across keys (RealFIFO, the default); with
  ``use_delta_fifo=True`` the order is per key, with a key's queued changes delivered together.
* A Sync delta, or a Replaced delta whose resourceVersion equals the cached one, is a *resync*: it goes only
  to handlers whose resync period is due (chosen by ``should_resync`` just before the FIFO's resync) and
  arrives as ``on_update(obj, obj)`` (``old is new``); a callback with an ``is_resync`` keyword parameter
  also gets ``is_resync=True`` (``False`` for real updates). Likewise ``on_add`` gets
  ``is_in_initial_list`` if it declares that keyword. Signatures are inspected once, at registration.
* A handler added after start first receives every cached object once as ``on_add`` (initial list).
* A handler registered with ``accepts`` is handed only the notifications whose object it accepts (an update's
  old or new one), judged here before buffering: the others cost it no buffer entry and no wake-up. Its
  initial list is filtered the same way.
  ``registration.has_synced()`` is true once the informer has synced and the handler has processed all its
  initial-list notifications.
* Structured: :meth:`SharedIndexInformer.run` owns every task it starts (reflector, handlers, the mutation
  check) in one task group; when it returns or raises, none of them is left running.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic

from kinformer.cache.backoff import Backoff
from kinformer.cache.delta_fifo import YIELD_EVERY, Delta, DeltaFIFO, DeltaType, FIFOClosed
from kinformer.cache.lister import Lister
from kinformer.cache.multi_namespace import MultiNamespaceListerWatcher, NamespaceScopedStore
from kinformer.cache.mutation_detector import CacheMutationError, MutationDetector
from kinformer.cache.processor_listener import (
    ADD,
    DELETE,
    UPDATE,
    Notification,
    ProcessorListener,
    ResourceEventHandler,
    ResourceEventHandlerRegistration,
    callbacks_of,
)
from kinformer.cache.real_fifo import RealFIFO
from kinformer.cache.reflector import Reflector, ReflectorStats, WatchErrorHandler
from kinformer.cache.store import Indexer, IndexFunc, meta_namespace_key
from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.cache.transforms import DEFAULT_TRANSFORM, Transform, strip_managed_fields
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.listwatch import ListerWatcher
from kinformer.typed_resources import ObjT

__all__ = [
    "DEFAULT_TRANSFORM",
    "DEFAULT_WATCH_IDLE_TIMEOUT",
    "MINIMUM_RESYNC_PERIOD",
    "CacheMutationError",
    "DeletedFinalStateUnknown",
    "InformerStats",
    "ResourceEventHandler",
    "ResourceEventHandlerRegistration",
    "SharedIndexInformer",
    "Transform",
    "strip_managed_fields",
]

log = logging.getLogger(__name__)

MINIMUM_RESYNC_PERIOD = 1.0
#: Seconds a watch may deliver nothing (no event, no bookmark) before it is closed and reopened; servers send
#: a bookmark about once a minute to watches that allow them.
DEFAULT_WATCH_IDLE_TIMEOUT = 90.0
_FREEZE_EVERY = 50_000

_DELETED, _SYNC, _REPLACED = DeltaType.DELETED, DeltaType.SYNC, DeltaType.REPLACED
_new_tuple = tuple.__new__  # a Notification made without its NamedTuple's Python-level __new__ (hot path)


@dataclass(slots=True)
class InformerStats:
    """Counters for metrics and the CLI."""

    deltas: int = 0
    process_errors: int = 0
    reflector: ReflectorStats = field(default_factory=ReflectorStats)


def _resource_version(obj: Any) -> Any:
    try:
        return obj["metadata"].get("resourceVersion")
    except (KeyError, TypeError, AttributeError):
        return None


class SharedIndexInformer(Generic[ObjT]):
    """Lists and watches one resource into an :class:`Indexer` and fans changes out to event handlers.

    ``resync`` is the default handler resync period in seconds (0: never; otherwise at least 1 s).
    ``transform`` is applied to every object before it is cached (default: drop ``metadata.managedFields``).
    ``backoff`` makes the reflector's error backoff (default: client-go's 0.8 s doubling to 30 s).
    ``watch_idle_timeout`` (clock seconds, None: never) restarts a watch that delivers nothing for that long.
    The queue is a :class:`~kinformer.cache.real_fifo.RealFIFO` (handlers see changes in the server's order,
    across keys, as client-go 1.33+); ``use_delta_fifo=True`` uses a DeltaFIFO instead. ``gc_freeze=True``
    (for caches of several 100k objects) freezes the process's objects out of the cyclic collector while the
    first list is processed and once it is (``gc.freeze()``; process-wide: see :meth:`_process_initial_list_freezing`).
    Use it from one event loop: ``start()`` / ``await run()``, then ``await stop()``.
    """

    def __init__(self, lw: ListerWatcher, *, resync: float = 0.0, indexers: Mapping[str, IndexFunc] | None = None,
                 clock: Clock = REAL_CLOCK, transform: Transform | None = DEFAULT_TRANSFORM, name: str = "",
                 resource: str = "", use_streaming_list: bool = False, rng: random.Random | None = None,
                 namespaced: bool = True, backoff: Callable[[], Backoff] | None = None,
                 watch_idle_timeout: float | None = DEFAULT_WATCH_IDLE_TIMEOUT, use_delta_fifo: bool = False,
                 gc_freeze: bool = False) -> None:
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
        self._indexer: Indexer[ObjT] = Indexer(meta_namespace_key, indexers)
        self.watch_idle_timeout = watch_idle_timeout
        self.gc_freeze = gc_freeze
        fifo_type = DeltaFIFO if use_delta_fifo else RealFIFO
        self._fifo = fifo_type(meta_namespace_key, known_objects=self._indexer, emit_delta_type_replaced=True)
        self._last_processed: Any = None
        self._listeners: list[ProcessorListener] = []
        self._syncing: list[ProcessorListener] = []
        self._watch_error_handler: WatchErrorHandler | None = None
        self._reflector: Reflector | None = None
        self._reflectors: list[Reflector] = []
        self._detector: MutationDetector | None = None
        self._detector_interval = 0.0
        self._started = False
        self._stopped = False
        self._task: asyncio.Task[None] | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._stats = InformerStats()
        self._handler_seq = 0
        self._lister: Lister[ObjT] | None = None

    # ------------------------------------------------------------------ cache access

    @property
    def indexer(self) -> Indexer:
        """The cache (read-only objects)."""
        return self._indexer

    def get_store(self) -> Indexer[ObjT]:
        return self._indexer

    def lister(self) -> Lister[ObjT]:
        """A :class:`kinformer.cache.lister.Lister` over the cache: one, made at the first call and handed out
        again (it holds nothing but the cache and the informer's names; handlers that filter each pod event through
        a lister asked for one per event)."""
        lister = self._lister
        if lister is None:
            lister = self._lister = Lister(self._indexer, namespaced=self.namespaced,
                                           resource=self.resource or self.name)
        return lister

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indices (before or after start; cached objects are indexed at once)."""
        self._indexer.add_indexers(indexers)

    @property
    def last_sync_resource_version(self) -> str:
        """The reflector's last resourceVersion (of a multi-namespace informer: the lowest of its reflectors')."""
        rvs = [r.last_sync_resource_version for r in self._reflectors]
        if len(rvs) <= 1:
            return rvs[0] if rvs else ""
        return min(rvs, key=lambda rv: (len(rv), rv))  # sane RVs: no leading zeros, so shorter is lower

    @property
    def cache_resource_version(self) -> str:
        """The resourceVersion the cache has reached: the reflector's last RV (bookmarks included) once
        everything received has been processed, else the RV of the last object processed ("" before)."""
        if not self._reflectors:
            return ""
        if not len(self._fifo) and self._fifo.has_synced():
            return self.last_sync_resource_version
        last = self._last_processed
        if isinstance(last, DeletedFinalStateUnknown):
            last = last.obj
        rv = _resource_version(last)
        return rv if isinstance(rv, str) else ""

    def seconds_since_last_event(self) -> float | None:
        """Clock seconds since the last list result or watch event (bookmarks included) reached the
        informer (the stalest of a multi-namespace informer's watches): how stale its cache may be. None
        before the first list."""
        seconds = [r.seconds_since_last_event() for r in self._reflectors]
        if not seconds or None in seconds:
            return None
        return max(s for s in seconds if s is not None)

    @property
    def stats(self) -> InformerStats:
        if len(self._reflectors) == 1:
            self._stats.reflector = self._reflectors[0].stats
        elif self._reflectors:
            total = ReflectorStats()
            for reflector in self._reflectors:
                for name, value in reflector.stats.as_dict().items():
                    setattr(total, name, getattr(total, name) + value)
            self._stats.reflector = total
        return self._stats

    @property
    def is_started(self) -> bool:
        """True once :meth:`start` or :meth:`run` was called."""
        return self._started or self._task is not None

    @property
    def is_stopped(self) -> bool:
        return self._stopped

    def has_synced(self) -> bool:
        """True once every object of the first list (and its deletions) has been processed."""
        return self._fifo.has_synced()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait (real time, at most ``timeout``) until :meth:`has_synced`; False on timeout or stop.

        Woken by the queue when its first population has been processed (never polled)."""
        if self.has_synced():
            return True
        if self._stopped:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._fifo.wait_synced()
        except (TimeoutError, FIFOClosed):
            pass
        return self.has_synced()

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
            self._detector = MutationDetector(raise_on_mutation)
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
                          resync: float | None = None,
                          accepts: Callable[[Any], bool] | None = None) -> ResourceEventHandlerRegistration:
        """Register callbacks (a handler object with ``on_add``/``on_update``/``on_delete`` methods, or the
        keyword callbacks, which win over the object's). ``resync`` None means the informer's period.

        ``accepts(obj) -> bool``, if given, is called on the informer's side before a notification is
        buffered for this handler, which gets only what it accepts: an add or delete whose object it accepts
        (a tombstone's last known object), an update whose old *or* new object it accepts (so it sees an
        object leave its filter), resyncs alike. Like client-go's FilteringResourceEventHandler, but a
        rejected change costs the handler no buffer entry and no wake-up. It must be cheap, must not block,
        and must read the object only; one that raises is counted in the registration's ``errors`` and
        logged, and the change is delivered.

        After start, the handler first gets every cached object (it accepts) as an initial-list add.
        """
        callbacks = callbacks_of(handler, on_add, on_update, on_delete)
        period = self._handler_period(resync)
        self._handler_seq += 1
        listener = ProcessorListener(callbacks, period, self.clock, f"{self.name}#{self._handler_seq}", accepts)
        self._listeners.append(listener)
        if self._started and not self._stopped:
            now = self.clock.now()
            offer = listener.offer
            for obj in self._indexer.list():
                offer(Notification(ADD, obj, None, True, now))
            if self._tg is not None:
                listener.start(self._tg)
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
        """Apply one pop's deltas to the cache, then notify (client-go handleDeltas / processDeltas)."""
        apply = self._apply
        now = self.clock.now()
        for kind, obj in deltas:
            apply(kind, obj, is_in_initial_list, now)
        if deltas:
            self._last_processed = deltas[-1].object
        self._stats.deltas += len(deltas)

    def _handle_direct(self, deltas: list[tuple[DeltaType, Any]]) -> None:
        """Deltas handed over by an idle RealFIFO (its fast path, in the reflector's call: a watch batch of
        Added/Updated/Deleted deltas), in order: all applied to the cache under one acquisition of its lock,
        then their notifications handed to every handler (none is a resync). A delta that fails (no key, an
        index function raising) leaves the cache as it was, is logged and counted as the process loop would,
        and the rest are applied."""
        indexer = self._indexer
        detector = self._detector
        add = indexer.add_locked
        delete = indexer.delete_locked
        now = self.clock.now()
        notes: list[Notification] = []
        append = notes.append
        failed: list[Exception] | None = None  # logged once the lock is released (a log handler may read it)
        with indexer.lock:
            for kind, obj in deltas:
                try:
                    if kind is _DELETED:
                        old = delete(obj)
                        if old is None:
                            continue  # never cached (or already reported): no handler hears of it
                        append(_new_tuple(Notification, (DELETE, obj, None, False, now)))
                    else:
                        old = add(obj)
                        if old is None:
                            append(_new_tuple(Notification, (ADD, obj, None, False, now)))
                        else:
                            append(_new_tuple(Notification, (UPDATE, old, obj, False, now)))
                    if detector is not None:
                        self._detect(kind, obj)
                except Exception as exc:
                    failed = [*(failed or ()), exc]
        if failed:
            self._log_failures(failed)
        if notes:
            for listener in self._listeners:
                listener.offer_all(notes)
        self._last_processed = deltas[-1][1]
        self._stats.deltas += len(deltas)

    def _log_failures(self, failed: list[Exception]) -> None:
        for error in failed:
            self._stats.process_errors += 1
            log.error("%s: processing deltas failed", self.name, exc_info=error)

    def _detect(self, kind: DeltaType, obj: Any) -> None:
        """Tell the mutation detector about one applied delta."""
        assert self._detector is not None
        key = self._indexer.key_of(obj)
        if kind is _DELETED:
            self._detector.forget(key)
        else:
            self._detector.record(key, obj)

    def _apply(self, kind: DeltaType, obj: Any, is_in_initial_list: bool, now: float) -> None:
        """One delta: the cache first (it decides add vs update and holds the old object), then one
        notification shared by every handler concerned (the due ones only, for a resync)."""
        indexer = self._indexer
        detector = self._detector
        if kind is _DELETED:
            if indexer.delete(obj) is None:
                return  # never cached (or already reported): the cache decides, as for add vs update
            if detector is not None:
                self._detect(kind, obj)
            note = _new_tuple(Notification, (DELETE, obj, None, False, now))
            listeners = self._listeners
        else:
            old = indexer.add(obj)
            if detector is not None:
                self._detect(kind, obj)
            if old is None:
                note = _new_tuple(Notification, (ADD, obj, None, is_in_initial_list, now))
                listeners = self._listeners
            else:
                is_sync = kind is _SYNC or (kind is _REPLACED and _resource_version(old) == _resource_version(obj))
                note = _new_tuple(Notification, (UPDATE, old, obj, is_sync, now))
                listeners = self._syncing if is_sync else self._listeners
        for listener in listeners:
            listener.offer(note)

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
        self._reflectors = self._make_reflectors()
        self._reflector = self._reflectors[0]
        try:
            async with asyncio.TaskGroup() as tg:
                self._tg = tg
                for listener in self._listeners:
                    listener.start(tg)
                helpers = [tg.create_task(r.run(), name=f"reflector-{r.name}") for r in self._reflectors]
                if self._detector is not None and self._detector_interval > 0:
                    helpers.append(tg.create_task(self._check_mutations_periodically(),
                                                  name=f"mutation-check-{self.name}"))
                try:
                    await self._process_loop()
                finally:
                    self._shut_down(helpers)
        except asyncio.CancelledError:
            if not self._stopped:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            self._stopped = True
            self._tg = None

    def _make_reflectors(self) -> list[Reflector]:
        """One reflector, or one per namespace of a multi-namespace informer (resync on the first only)."""
        lw = self.lw
        sources: dict[str | None, ListerWatcher] = {None: lw}
        if isinstance(lw, MultiNamespaceListerWatcher):
            sources = {namespace: source for namespace, source in lw.by_namespace.items()}
        if len(sources) > 1:
            self._fifo.expect_initial_replaces(len(sources))
        reflectors = []
        for i, (namespace, source) in enumerate(sources.items()):
            store = self._fifo if namespace is None else NamespaceScopedStore(self._fifo, namespace)
            reflectors.append(Reflector(
                source, store, name=self.name if namespace is None else f"{self.name}/{namespace}",
                resync_period=self._check_period if i == 0 else 0.0, clock=self.clock,
                watch_error_handler=self._watch_error_handler, use_streaming_list=self.use_streaming_list,
                rng=self._rng, should_resync=self._should_resync if i == 0 else None, transform=self._transform,
                backoff=self._backoff() if self._backoff else None, watch_idle_timeout=self.watch_idle_timeout,
                gc_freeze=self.gc_freeze))
        return reflectors

    def _shut_down(self, helpers: list[asyncio.Task[None]]) -> None:
        """Stop the reflector, the queue, the helpers and every handler; the task group awaits them."""
        self._stopped = True
        for reflector in self._reflectors:
            reflector.stop()
        if isinstance(self._fifo, RealFIFO):
            self._fifo.set_direct(None)
        self._fifo.close()
        for helper in helpers:
            helper.cancel()
        for listener in self._listeners:
            listener.stop()

    async def stop(self) -> None:
        """Stop everything and wait for it (idempotent)."""
        if self._stopped and (self._task is None or self._task.done()):
            return
        self._stopped = True
        task = self._task
        if task is None or task.done():
            self._fifo.close()  # never ran: wake sync waiters
            return
        if task is asyncio.current_task():
            raise RuntimeError("stop() called from the informer's own task")
        task.cancel()
        await asyncio.wait([task])

    async def _process_loop(self) -> None:
        """Pop and process deltas until the queue closes. With a RealFIFO, every pop is followed by what else
        is ready (up to ``YIELD_EVERY``, then the loop yields): the same order and bookkeeping, without a
        coroutine per delta; and while the queue is idle the reflector's deltas skip it (``set_direct``): a
        steady watch is applied in the reflector's own call, a watch batch at a time, with no pop or wake-up."""
        fifo = self._fifo
        pop = fifo.pop
        ready = fifo.pop_ready if isinstance(fifo, RealFIFO) else None
        handle = self._handle_deltas
        if self.gc_freeze:
            await self._process_initial_list_freezing()
        if isinstance(fifo, RealFIFO):
            fifo.set_direct(self._handle_direct)
        while True:
            try:
                await pop(handle)
                if ready is not None and ready(handle, YIELD_EVERY) == YIELD_EVERY:
                    await asyncio.sleep(0)
            except FIFOClosed:
                return
            except Exception:
                self._stats.process_errors += 1
                log.exception("%s: processing deltas failed", self.name)

    async def _process_initial_list_freezing(self) -> None:
        """Process until synced, moving everything alive into the collector's permanent generation every
        ``_FREEZE_EVERY`` deltas and at the end (``gc.freeze()``): a cache of a million objects is then never
        traversed by the cyclic collector, whose full collections would otherwise scan it again and again.
        Objects still die by reference counting; only cycles among frozen objects wait for ``gc.unfreeze()``."""
        fifo = self._fifo
        count = 0
        while not fifo.has_synced():
            try:
                await fifo.pop(self._handle_deltas)
            except FIFOClosed:
                return
            except Exception:
                self._stats.process_errors += 1
                log.exception("%s: processing deltas failed", self.name)
            count += 1
            if count % _FREEZE_EVERY == 0:
                gc.freeze()
        gc.freeze()

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


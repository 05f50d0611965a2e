"""Controller: n workers reconciling Requests from a rate-limited queue (controller-runtime's Controller).

Invariants:

* a Request is never reconciled by two workers at once (the work queue's processing set);
* workers start only after every watched informer handler has synced (bounded by
  ``cache_sync_timeout``);
* a reconcile's outcome maps to the queue as in :mod:`kinformer.controller.reconcile`; exceptions are
  caught, logged and counted and never kill a worker;
* shutdown stops taking new work, lets in-flight reconciles finish (bounded by ``shutdown_timeout``),
  then cancels what is left;
* a reconcile running past ``reconcile_timeout`` is cancelled, counted and retried with backoff;
* the writes a reconcile made through the Manager's client are in the cache before the next reconcile
  of the same Request starts (waited for at most ``ryow_timeout``; see :mod:`kinformer.controller.cached_client`);
* with ``every``, a successfully reconciled object still in the primary cache is reconciled again after
  that many seconds; ``sources`` (async iterables of Requests or objects) feed the queue while it runs;
* sharded (``shard`` set by the Manager), a popped Request this member does not own is dropped, not
  reconciled, and ``in_flight`` holds the keys being reconciled (hand-offs wait for them).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import AsyncIterable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinformer import tracing
from kinformer.aio import task_group
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.controller import metrics
from kinformer.controller.cached_client import PendingWrite, track_writes, wait_for_writes
from kinformer.controller.handlers import EVENTS, Accepts, EnqueueHandler, MapFunc, request_for_object
from kinformer.controller.logcontext import context_logger, log_context, reconcile_context
from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import (
    ObjectReconciler,
    ReconcileFunc,
    ReconcilerLike,
    Request,
    Result,
    TerminalError,
    as_reconcile_func,
)
from kinformer.meta import Object
from kinformer.workqueue import LOW_PRIORITY, PriorityQueue, RateLimitingQueue, ShutDown
from kinformer.workqueue.rate_limiters import RateLimiter

if TYPE_CHECKING:
    from kinformer.cache.processor_listener import ResourceEventHandlerRegistration
    from kinformer.cache.shared_informer import SharedIndexInformer

log = context_logger(__name__)  # records carry the controller and, in a reconcile, the object


def new_reconcile_id() -> str:
    """A random (version 4) UUID in its canonical form, as ``str(uuid.uuid4())`` makes it (controller-runtime's
    reconcileID), without the UUID object."""
    b = bytearray(os.urandom(16))
    b[6] = b[6] & 0x0F | 0x40  # version 4
    b[8] = b[8] & 0x3F | 0x80  # the RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class ControllerStats:
    """Plain counters for live views and tests (Prometheus has the same figures)."""

    reconciles: int = 0
    successes: int = 0
    errors: int = 0
    terminal_errors: int = 0
    requeues: int = 0
    requeues_after: int = 0
    timeouts: int = 0
    panics: int = 0  # reconciles that raised (anything but TerminalError, a timeout or a cancelled await)
    skipped_deleted: int = 0  # ObjectReconciler: the object was no longer cached
    waited_for_writes: int = 0
    active: int = 0
    events: Counter[str] = field(default_factory=Counter)  # informer events handed over (accepted), by kind


class ReconcileTimeout(Exception):
    """A reconcile ran past the controller's ``reconcile_timeout`` and was cancelled."""


class Controller:
    """Reconciles Requests enqueued by the informer handlers registered with :meth:`watch`."""

    def __init__(self, name: str, reconciler: ReconcilerLike | ObjectReconciler, *,
                 workers: int = 1, rate_limiter: RateLimiter | None = None, clock: Clock = REAL_CLOCK,
                 cache_sync_timeout: float = 120.0, shutdown_timeout: float = 30.0,
                 queue: RateLimitingQueue | None = None, reconcile_timeout: float | None = None,
                 every: float | None = None, ryow_timeout: float = 10.0, resource: str = "",
                 leader_elected: bool = False, sources: Sequence[AsyncIterable[Request | Object]] = ()) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        for label, value in (("reconcile_timeout", reconcile_timeout), ("every", every)):
            if value is not None and value <= 0:
                raise ValueError(f"{label} must be > 0, got {value}")
        self.name = name
        self.workers = workers
        self.clock = clock
        self.cache_sync_timeout = cache_sync_timeout
        self.shutdown_timeout = shutdown_timeout
        self.reconcile_timeout = reconcile_timeout
        self.every = every
        self.ryow_timeout = ryow_timeout
        self.resource = resource
        self.leader_elected = leader_elected
        self.sources = list(sources)
        # the informer of the primary resource (set by watch(..., primary=True))
        self.primary: SharedIndexInformer | None = None
        self._pending_writes: dict[Request, dict[tuple[int, str], PendingWrite]] = {}
        self._enqueued_by: dict[Request, list[Any]] = {}  # span contexts that enqueued a key (tracing)
        self._reconcile: ReconcileFunc
        if isinstance(reconciler, ObjectReconciler):
            self._object_reconciler = reconciler.reconcile
            self._reconcile = self._reconcile_object
        else:
            self._reconcile = as_reconcile_func(reconciler)
        if queue is None:  # (an empty queue is falsy: never `queue or ...`)
            queue = RateLimitingQueue(rate_limiter, name=name, clock=clock, metrics=metrics.queue_metrics_provider())
        self.queue = queue
        self.stats = ControllerStats()
        self._registrations: list[ResourceEventHandlerRegistration] = []
        self._workers: list[asyncio.Task[None]] = []
        self._feeders: list[asyncio.Task[None]] = []
        self._abort = False
        self.started = False
        self.shard: Any = None  # a ShardedController when the Manager is sharded (filters at the queue)
        self.in_flight: set[str] = set()  # keys being reconciled now
        self._series: metrics.ReconcileSeries | None = None  # made at the first reconcile

    def watch(self, informer: SharedIndexInformer, mapper: MapFunc = request_for_object,
              predicates: Sequence[Predicate] = (), *, primary: bool = False,
              accepts: Accepts | None = None, events: Collection[str] = EVENTS) -> ResourceEventHandlerRegistration:
        """Enqueue ``mapper(obj)`` for the informer's events that pass every predicate; ``primary``: the
        informer whose objects an ObjectReconciler receives (default: the first one watched). ``accepts``
        filters the events before the handler is handed them (``add_event_handler(accepts=...)``): it must
        accept every object whose events are to enqueue something. ``events``: the informer events handled, of
        ``add``, ``update`` and ``delete`` (client-go's handler funcs given; the others are neither judged nor
        buffered)."""
        if primary or self.primary is None:
            self.primary = informer
        handler = EnqueueHandler(self.queue, mapper, predicates, self.stats.events,
                                 on_enqueue=self._remember_enqueuer if tracing.ENABLED else None)
        registration = informer.add_event_handler(
            on_add=handler.on_add if "add" in events else None,
            on_update=handler.on_update if "update" in events else None,
            on_delete=handler.on_delete if "delete" in events else None, accepts=accepts)
        self._registrations.append(registration)
        return registration

    def has_synced(self) -> bool:
        return all(r.has_synced() for r in self._registrations)

    async def wait_for_sync(self) -> None:
        """Wait (woken by the caches, never polling) until every source synced, at most cache_sync_timeout."""
        try:
            async with asyncio.timeout(self.cache_sync_timeout):
                for registration in self._registrations:
                    await registration.wait_for_sync()
        except TimeoutError:
            pass
        if not self.has_synced():
            raise TimeoutError(f"controller {self.name!r}: caches did not sync within "
                               f"{self.cache_sync_timeout:.0f}s")

    async def run(self, *, drain: Callable[[], bool] = lambda: True) -> None:
        """Wait for the caches, then run the workers until cancelled.

        When cancelled, and ``drain()`` is true then (the Manager answers false once leadership is lost),
        the queue is shut down and in-flight reconciles may finish within ``shutdown_timeout``; otherwise,
        or after :meth:`abort`, they are cancelled at once. Every worker has ended when this returns.
        """
        with log_context(controller=self.name):  # the workers and feeders inherit it
            await self._run(drain)

    async def _run(self, drain: Callable[[], bool]) -> None:
        await self.wait_for_sync()
        self.started = True
        metrics.init_controller(self.name, self.workers)
        log.info("controller %s: started (resource %s, %d worker%s, %s)", self.name, self.resource or "?",
                 self.workers, "" if self.workers == 1 else "s",
                 "as the leader" if self.leader_elected else
                 f"sharded in group {self.shard.member.config.group}" if self.shard is not None else
                 "no leader election")
        try:
            async with task_group() as group:
                self._workers = [group.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                                 for i in range(self.workers)]
                self._feeders = [group.create_task(self._feed(source), name=f"{self.name}-source-{i}")
                                 for i, source in enumerate(self.sources)]
                try:
                    # asyncio.wait, not the group: a cancelled run() must not cancel in-flight reconciles
                    # before the drain decision. The workers end by themselves once the queue is shut down.
                    await asyncio.wait(self._workers)
                finally:
                    await self._shutdown(drain_allowed=not self._abort and drain())
        finally:
            log.info("controller %s: stopped (%d reconciles, %d errors)", self.name, self.stats.reconciles,
                     self.stats.errors)

    async def _feed(self, source: AsyncIterable[Any]) -> None:
        """Enqueue what an external source yields (Requests, or objects: their own Request) until it ends."""
        async for item in source:
            try:
                request = item if isinstance(item, Request) else Request.for_object(item)
            except (KeyError, TypeError, AttributeError):
                log.error("controller %s: source yielded %r, neither a Request nor an object", self.name, item)
                continue
            if tracing.ENABLED:
                self._remember_enqueuer(request)
            self.queue.add(request)

    def abort(self) -> None:
        """Stop at once: cancel in-flight reconciles instead of draining them (e.g. leadership was lost,
        so this replica must not act any more)."""
        self._abort = True
        self.queue.shutdown()
        for task in self._workers:
            task.cancel()

    async def _shutdown(self, *, drain_allowed: bool) -> None:
        """Stop taking work; let in-flight reconciles finish first if allowed (bounded), then cancel the rest."""
        try:
            if drain_allowed:
                async with asyncio.timeout(self.shutdown_timeout):
                    await self.queue.shutdown_with_drain()
        except TimeoutError:
            log.warning("controller %s: shutdown timed out with work in flight", self.name)
        finally:
            self.queue.shutdown()
            for task in (*self._workers, *self._feeders):
                task.cancel()
            await self.queue.aclose()

    async def _worker(self) -> None:
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            shard = self.shard
            if shard is not None and not shard.admit(request):  # another member's key (see sharding.py)
                self.queue.forget(request)
                self.queue.done(request)
                continue
            self.in_flight.add(request.key)  # with no await since admit(): a hand-off sees it in flight
            try:
                await self.reconcile_handler(request)
            finally:
                self.in_flight.discard(request.key)
                self.queue.done(request)
                if shard is not None:
                    shard.member.reconcile_finished()

    async def reconcile_handler(self, request: Request) -> None:
        """Reconcile one Request and apply the outcome to the queue (the caller calls ``done``)."""
        reconcile_id = new_reconcile_id()
        enqueued_by = self._enqueued_by.pop(request, None) if self._enqueued_by else None
        with reconcile_context(self.name, request.namespace, request.name, reconcile_id), \
                tracing.reconcile_span(self.name, request.namespace, request.name, reconcile_id, enqueued_by) as span:
            await self._handle(request, span)

    def _remember_enqueuer(self, request: Request) -> None:
        """Keep the recording span (if any) that enqueued ``request``, for its reconcile span (tracing only)."""
        context = tracing.enqueue_context()
        if context is not None:
            contexts = self._enqueued_by.setdefault(request, [])
            if len(contexts) <= tracing.MAX_LINKS and context not in contexts:
                contexts.append(context)

    async def _handle(self, request: Request, span: tracing.ReconcileSpan) -> None:
        name, stats, queue = self.name, self.stats, self.queue
        series = self._reconcile_series()
        stats.reconciles += 1
        stats.active += 1
        series.active.inc()
        start = time.perf_counter()
        try:
            result = await self._invoke(request)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # The reconciler's own await was cancelled, not this worker: an ordinary, retried error.
            self._record_error(request, exc, requeue=True, span=span)
            queue.add_rate_limited(request)
            return
        except TerminalError as exc:
            stats.terminal_errors += 1
            metrics.TERMINAL_RECONCILE_ERRORS.labels(name).inc()
            self._record_error(request, exc, requeue=False, span=span)
            queue.forget(request)
            return
        except Exception as exc:
            if isinstance(exc, ReconcileTimeout):
                stats.timeouts += 1
                metrics.RECONCILE_TIMEOUTS.labels(name).inc()
            else:  # the reconciler itself raised: Go's recovered panic (counted as an error too, as there)
                stats.panics += 1
                metrics.RECONCILE_PANICS.labels(name).inc()
            self._record_error(request, exc, requeue=True, span=span)
            queue.add_rate_limited(request)
            return
        finally:
            stats.active -= 1
            series.active.dec()
            series.time.observe(time.perf_counter() - start)
        self._apply_result(request, result if isinstance(result, Result) else Result(), span)

    async def _invoke(self, request: Request) -> Any:
        """Wait for the previous reconcile's writes, then reconcile within ``reconcile_timeout``, collecting
        this reconcile's writes through the Manager's client."""
        pending = self._pending_writes.pop(request, None)
        if pending:
            await self._wait_for_writes(list(pending.values()))
        with track_writes() as writes:
            try:
                async with asyncio.timeout(self.reconcile_timeout) as deadline:
                    return await self._reconcile(request)
            except TimeoutError as exc:
                if not deadline.expired():
                    raise
                raise ReconcileTimeout(f"reconcile did not finish within {self.reconcile_timeout}s") from exc
            finally:
                if writes:
                    by_key = self._pending_writes.setdefault(request, {})
                    for write in writes:
                        by_key[(id(write.informer), write.key)] = write

    async def _wait_for_writes(self, writes: list[PendingWrite]) -> None:
        if all(w.reached() for w in writes):
            self._reconcile_series().in_cache().inc()
            return
        self.stats.waited_for_writes += 1
        start = time.perf_counter()
        reached = await wait_for_writes(writes, self.ryow_timeout)
        metrics.READ_YOUR_WRITES_WAIT.labels(self.name).observe(time.perf_counter() - start)
        metrics.READ_YOUR_WRITES.labels(self.name, "waited" if reached else "timeout").inc()
        if not reached:
            log.warning("controller %s: the cache did not reach this controller's own writes within %.1fs; "
                        "reconciling anyway", self.name, self.ryow_timeout)

    async def _reconcile_object(self, request: Request) -> Any:
        """ObjectReconciler: hand over the cached object; an object gone from the cache is not reconciled."""
        obj = self.primary.indexer.get_by_key(request.key) if self.primary is not None else None
        if obj is None:
            self.stats.skipped_deleted += 1
            return None
        return await self._object_reconciler(obj)

    def _add(self, request: Request, delay: float | None, priority: int | None, *, rate_limited: bool = False) -> None:
        queue = self.queue
        if isinstance(queue, PriorityQueue) and priority is not None:
            if rate_limited:
                queue.add_rate_limited(request, priority)
            else:
                queue.add_after(request, delay or 0.0, priority)
        elif rate_limited:
            queue.add_rate_limited(request)
        else:
            queue.add_after(request, delay or 0.0)

    def _apply_result(self, request: Request, result: Result, span: tracing.ReconcileSpan = tracing.NO_SPAN) -> None:
        span.outcome("requeue_after" if result.requeue_after else "requeue" if result.requeue else "success",
                     requeue=bool(result.requeue or result.requeue_after), requeue_after=result.requeue_after)
        if result.requeue_after:
            self.stats.requeues_after += 1
            self._reconcile_series().result("requeue_after").inc()
            self.queue.forget(request)
            self._add(request, result.requeue_after, result.priority)
        elif result.requeue:
            self.stats.requeues += 1
            self._reconcile_series().result("requeue").inc()
            self._add(request, None, result.priority, rate_limited=True)
        else:
            self.stats.successes += 1
            self._reconcile_series().result("success").inc()
            self.queue.forget(request)
            if self.every and self.primary is not None and self.primary.indexer.get_by_key(request.key) is not None:
                timer_priority = LOW_PRIORITY if result.priority is None else result.priority  # as a resync
                self._add(request, self.every, timer_priority)

    def _reconcile_series(self) -> metrics.ReconcileSeries:
        series = self._series
        if series is None:
            series = self._series = metrics.ReconcileSeries(self.name)
        return series

    def _record_error(self, request: Request, exc: BaseException, *, requeue: bool,
                      span: tracing.ReconcileSpan = tracing.NO_SPAN) -> None:
        span.failed(exc, "error" if requeue else "terminal_error", requeue=requeue)
        self.stats.errors += 1
        metrics.RECONCILE_ERRORS.labels(self.name).inc()
        self._reconcile_series().result("error").inc()
        log.error("controller %s: reconcile %s failed%s: %s", self.name, request,
                  " (requeued with backoff)" if requeue else " (terminal, not requeued)", exc,
                  exc_info=not isinstance(exc, TerminalError))


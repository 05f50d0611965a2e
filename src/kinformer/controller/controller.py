"""Controller: n workers reconciling Requests from a rate-limited queue (controller-runtime's Controller).

Invariants:

* a Request is never reconciled by two workers at once (the work queue's processing set);
* workers start only after every watched informer handler has synced (bounded by
  ``cache_sync_timeout``);
* a reconcile's outcome maps to the queue as in :mod:`kinformer.controller.reconcile`; exceptions are
  caught, logged and counted and never kill a worker;
* shutdown stops taking new work, lets in-flight reconciles finish (bounded by ``shutdown_timeout``),
  then cancels what is left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kinformer.aio import task_group
from kinformer.clock import REAL_CLOCK, Clock
from kinformer.controller import metrics
from kinformer.controller.handlers import EnqueueHandler, MapFunc, request_for_object
from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import Reconciler, Request, Result, TerminalError, as_reconcile_func
from kinformer.workqueue import RateLimitingQueue, ShutDown

log = logging.getLogger(__name__)


@dataclass
class ControllerStats:
    """Plain counters for live views and tests (Prometheus has the same figures)."""

    reconciles: int = 0
    successes: int = 0
    errors: int = 0
    terminal_errors: int = 0
    requeues: int = 0
    requeues_after: int = 0
    active: int = 0
    events: Counter[str] = field(default_factory=Counter)  # informer events seen, by kind


class Controller:
    """Reconciles Requests enqueued by the informer handlers registered with :meth:`watch`."""

    def __init__(self, name: str, reconciler: Reconciler | Callable[[Request], Any], *, workers: int = 1,
                 rate_limiter: Any = None, clock: Clock = REAL_CLOCK, cache_sync_timeout: float = 120.0,
                 shutdown_timeout: float = 30.0, queue: RateLimitingQueue | None = None) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.name = name
        self.workers = workers
        self.clock = clock
        self.cache_sync_timeout = cache_sync_timeout
        self.shutdown_timeout = shutdown_timeout
        self._reconcile = as_reconcile_func(reconciler)
        self.queue = queue or RateLimitingQueue(rate_limiter, name=name, clock=clock,
                                                metrics=metrics.queue_metrics_provider())
        self.stats = ControllerStats()
        self._registrations: list[Any] = []
        self._workers: list[asyncio.Task[None]] = []
        self._abort = False
        self.started = False

    def watch(self, informer: Any, mapper: MapFunc = request_for_object,
              predicates: Sequence[Predicate] = ()) -> Any:
        """Enqueue ``mapper(obj)`` for the informer's events that pass every predicate."""
        handler = EnqueueHandler(self.queue, mapper, predicates, self.stats.events)
        registration = informer.add_event_handler(
            on_add=handler.on_add, on_update=handler.on_update, on_delete=handler.on_delete)
        self._registrations.append(registration)
        return registration

    def has_synced(self) -> bool:
        return all(r.has_synced() for r in self._registrations)

    async def wait_for_sync(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.cache_sync_timeout
        while not self.has_synced():
            if loop.time() > deadline:
                raise TimeoutError(f"controller {self.name!r}: caches did not sync within "
                                   f"{self.cache_sync_timeout:.0f}s")
            await asyncio.sleep(0.05)

    async def run(self, *, drain: Callable[[], bool] = lambda: True) -> None:
        """Wait for the caches, then run the workers until cancelled.

        When cancelled, and ``drain()`` is true then (the Manager answers false once leadership is lost),
        the queue is shut down and in-flight reconciles may finish within ``shutdown_timeout``; otherwise,
        or after :meth:`abort`, they are cancelled at once. Every worker has ended when this returns.
        """
        await self.wait_for_sync()
        self.started = True
        metrics.MAX_CONCURRENT_RECONCILES.labels(self.name).set(self.workers)
        async with task_group() as group:
            self._workers = [group.create_task(self._worker(), name=f"{self.name}-worker-{i}")
                             for i in range(self.workers)]
            try:
                # asyncio.wait, not the group: a cancelled run() must not cancel in-flight reconciles before
                # the drain decision. The workers end by themselves once the queue is shut down.
                await asyncio.wait(self._workers)
            finally:
                await self._shutdown(drain_allowed=not self._abort and drain())

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
            for task in self._workers:
                task.cancel()
            await self.queue.aclose()

    async def _worker(self) -> None:
        while True:
            try:
                request = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.reconcile_handler(request)
            finally:
                self.queue.done(request)

    async def reconcile_handler(self, request: Request) -> None:
        """Reconcile one Request and apply the outcome to the queue (the caller calls ``done``)."""
        name, stats, queue = self.name, self.stats, self.queue
        stats.reconciles += 1
        stats.active += 1
        metrics.ACTIVE_WORKERS.labels(name).inc()
        start = time.perf_counter()
        try:
            result = await self._reconcile(request)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            # The reconciler's own await was cancelled, not this worker: an ordinary, retried error.
            self._record_error(request, exc, requeue=True)
            queue.add_rate_limited(request)
            return
        except TerminalError as exc:
            stats.terminal_errors += 1
            metrics.TERMINAL_RECONCILE_ERRORS.labels(name).inc()
            self._record_error(request, exc, requeue=False)
            queue.forget(request)
            return
        except Exception as exc:
            self._record_error(request, exc, requeue=True)
            queue.add_rate_limited(request)
            return
        finally:
            stats.active -= 1
            metrics.ACTIVE_WORKERS.labels(name).dec()
            metrics.RECONCILE_TIME.labels(name).observe(time.perf_counter() - start)
        self._apply_result(request, result if isinstance(result, Result) else Result())

    def _apply_result(self, request: Request, result: Result) -> None:
        if result.requeue_after:
            self.stats.requeues_after += 1
            metrics.RECONCILE_TOTAL.labels(self.name, "requeue_after").inc()
            self.queue.forget(request)
            self.queue.add_after(request, result.requeue_after)
        elif result.requeue:
            self.stats.requeues += 1
            metrics.RECONCILE_TOTAL.labels(self.name, "requeue").inc()
            self.queue.add_rate_limited(request)
        else:
            self.stats.successes += 1
            metrics.RECONCILE_TOTAL.labels(self.name, "success").inc()
            self.queue.forget(request)

    def _record_error(self, request: Request, exc: BaseException, *, requeue: bool) -> None:
        self.stats.errors += 1
        metrics.RECONCILE_ERRORS.labels(self.name).inc()
        metrics.RECONCILE_TOTAL.labels(self.name, "error").inc()
        log.error("controller %s: reconcile %s failed%s: %s", self.name, request,
                  " (requeued with backoff)" if requeue else " (terminal, not requeued)", exc,
                  exc_info=not isinstance(exc, TerminalError))


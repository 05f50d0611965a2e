"""The basic work queue (client-go ``util/workqueue/queue.go``), asyncio-first.

Invariants, for every item (any hashable key):

- it is in ``dirty`` iff it needs processing; it is in ``processing`` iff a worker holds it (between
  ``get`` and ``done``);
- it is in the FIFO ``queue`` at most once, and only when it is dirty and not processing;
- so it is handed to at most one worker at a time: an item re-added while processing stays dirty
  and is queued again when its worker calls ``done``.

Background work (a delaying queue's timer; refreshing unfinished-work gauges for a metrics provider that
cannot compute them at scrape time, started by the first ``get``) runs in tasks the queue owns: ``shutdown``
cancels them and :meth:`WorkQueue.aclose` (or leaving ``async with queue:``) waits until they have ended.
``add`` never starts a task.

After :meth:`WorkQueue.shutdown`, adds are dropped, and ``get`` keeps handing out queued items until
the queue is empty, then raises :class:`ShutDown`.

The queue is not thread-safe: call it from its event loop. Code running in other threads (for
example event handlers run in an executor) uses :meth:`WorkQueue.add_threadsafe`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.workqueue.metrics import UNFINISHED_WORK_UPDATE_PERIOD, MetricsProvider, QueueMetrics, new_queue_metrics

T = TypeVar("T", bound=Hashable)


class ShutDown(Exception):
    """Raised by ``get`` once the queue is shut down and has no queued items left."""


class WorkQueue(Generic[T]):
    """A de-duplicating FIFO of keys in which a key is never processed by two workers at once.

    ``name`` labels the queue's metrics (an unnamed queue emits none); ``metrics`` is an optional
    :class:`~kinformer.workqueue.metrics.MetricsProvider`; ``clock`` measures latencies and delays.
    """

    __slots__ = (
        "__weakref__",
        "_clock",
        "_dirty",
        "_drain",
        "_drain_waiters",
        "_getters",
        "_loop",
        "_metrics",
        "_metrics_task",
        "_processing",
        "_queue",
        "_shutting_down",
        "name",
    )

    def __init__(self, name: str = "", *, clock: Clock = REAL_CLOCK, metrics: MetricsProvider | None = None) -> None:
        self.name = name
        self._clock = clock
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._drain = False
        self._metrics: QueueMetrics | None = new_queue_metrics(metrics, name, clock)
        self._metrics_task: asyncio.Task[None] | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    # -- producers ---------------------------------------------------------------------------------

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing. No-op if it is already dirty or the queue is shut down."""
        if self._shutting_down:
            return
        dirty = self._dirty
        if item in dirty:
            return
        metrics = self._metrics
        if metrics is not None:
            metrics.add(item)
        dirty.add(item)
        if item in self._processing:
            return
        self._queue.append(item)
        if self._getters:
            self._wake_getter()

    def add_threadsafe(self, item: T) -> None:
        """Schedule :meth:`add` on the queue's event loop; callable from any thread.

        The queue learns its loop when it is created, or last awaited, inside a running loop; calling
        this before that raises ``RuntimeError``. The add happens on a later loop iteration, so a ``len``
        read right after this call may not include it yet.
        """
        self._require_loop().call_soon_threadsafe(self.add, item)

    # -- consumers ---------------------------------------------------------------------------------

    async def get(self) -> T:
        """Wait for the next item and mark it as processing; the caller must call :meth:`done` with it.

        Returns immediately, without suspending, when an item is queued. Raises :class:`ShutDown` once
        the queue is shut down and empty.
        """
        queue = self._queue
        if not queue:
            await self._wait_for_item()
        item = queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        metrics = self._metrics
        if metrics is not None:
            metrics.get(item)
            if self._metrics_task is None and metrics.needs_periodic_update:
                self._start_metrics_updater()
        return item

    def done(self, item: T) -> None:
        """Finish processing ``item``; if it was re-added meanwhile, queue it again.

        Calling it for an item that is not being processed does nothing.
        """
        processing = self._processing
        if item not in processing:
            return
        processing.remove(item)
        metrics = self._metrics
        if metrics is not None:
            metrics.done(item)
        if item in self._dirty:
            self._queue.append(item)
            if self._getters:
                self._wake_getter()
        if not processing and self._drain_waiters:
            self._release_drain_waiters()

    def __repr__(self) -> str:
        state = " shutting down" if self._shutting_down else ""
        return (
            f"<{type(self).__name__} {self.name!r} queued={len(self._queue)} processing={len(self._processing)}{state}>"
        )

    def __len__(self) -> int:
        """The number of queued items (dirty, not processing). Informational only."""
        return len(self._queue)

    @property
    def processing_count(self) -> int:
        """The number of items handed out and not yet done."""
        return len(self._processing)

    def is_dirty(self, item: T) -> bool:
        """True when ``item`` is waiting to be processed (queued, or re-added while in flight)."""
        return item in self._dirty

    def is_processing(self, item: T) -> bool:
        """True when a worker holds ``item``."""
        return item in self._processing

    # -- shutdown ----------------------------------------------------------------------------------

    @property
    def shutting_down(self) -> bool:
        """True once :meth:`shutdown` or :meth:`shutdown_with_drain` was called."""
        return self._shutting_down

    def shutdown(self) -> None:
        """Drop further adds and let workers exit: ``get`` raises ShutDown once the queue is empty.

        Also releases a pending :meth:`shutdown_with_drain` without waiting for in-flight items.
        Idempotent.
        """
        self._drain = False
        self._release_drain_waiters()
        self._begin_shutdown()

    async def shutdown_with_drain(self) -> None:
        """Shut down, then wait until every in-flight item is done.

        Workers must keep calling ``done`` for the items they hold, or this waits forever; a concurrent
        :meth:`shutdown` makes it return at once.
        """
        self._drain = True
        self._begin_shutdown()
        loop = self._loop = asyncio.get_running_loop()
        while self._processing and self._drain:
            waiter = loop.create_future()
            self._drain_waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._drain_waiters:
                    self._drain_waiters.remove(waiter)

    async def aclose(self) -> None:
        """:meth:`shutdown`, then wait until the queue's background tasks have ended."""
        self.shutdown()
        tasks = [task for task in self._background_tasks() if task is not None]
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> WorkQueue[T]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _background_tasks(self) -> list[asyncio.Task[None] | None]:
        return [self._metrics_task]

    def _begin_shutdown(self) -> None:
        self._shutting_down = True
        getters = self._getters
        while getters:
            waiter = getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        task = self._metrics_task
        if task is not None and not task.done():
            task.cancel()

    # -- internals ---------------------------------------------------------------------------------

    async def _wait_for_item(self) -> None:
        """Suspend until an item is queued; raise ShutDown if the queue is shut down and empty."""
        queue = self._queue
        loop = self._loop = asyncio.get_running_loop()
        while not queue:
            if self._shutting_down:
                raise ShutDown
            waiter = loop.create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.cancelled():
                    try:
                        self._getters.remove(waiter)
                    except ValueError:
                        pass
                elif queue:
                    # Woken for an item but leaving anyway: hand the wake-up to the next getter.
                    self._wake_getter()
                raise

    def _wake_getter(self) -> None:
        getters = self._getters
        while getters:
            waiter = getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _release_drain_waiters(self) -> None:
        waiters = self._drain_waiters
        self._drain_waiters = []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None:
            try:
                loop = self._loop = asyncio.get_running_loop()
            except RuntimeError:
                msg = f"work queue {self.name!r} has no event loop yet: create or first use it inside the loop"
                raise RuntimeError(msg) from None
        return loop

    def _start_metrics_updater(self) -> None:
        """Refresh the unfinished-work gauges every 0.5 s of the queue's clock until shutdown."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # retried on the next add inside a loop
        if self._loop is None:
            self._loop = loop
        name = f"workqueue-metrics-{self.name}"
        self._metrics_task = loop.create_task(self._update_unfinished_work_loop(), name=name)

    async def _update_unfinished_work_loop(self) -> None:
        metrics = self._metrics
        assert metrics is not None
        while not self._shutting_down:
            await self._clock.sleep(UNFINISHED_WORK_UPDATE_PERIOD)
            if not self._shutting_down:
                metrics.update_unfinished_work()


__all__ = ["ShutDown", "T", "WorkQueue"]

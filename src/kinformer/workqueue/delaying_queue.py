"""A work queue that can add an item later (client-go ``util/workqueue/delaying_queue.go``).

Invariants:

- each item waits at most once: ``_waiting[item]`` is its ready time, the earliest ever requested
  since it last became ready (a later ``add_after`` never postpones it);
- ``_heap`` holds ``(ready_at, seq, item)`` entries; entries whose time no longer matches
  ``_waiting`` are stale and skipped when they surface;
- one background task, owned by the queue (started by the first ``add_after``, cancelled by shutdown,
  awaited by ``aclose``), moves ready items into the queue; it sleeps on the queue's clock until the
  earliest ready time, is woken early when a sooner item arrives, and ends at shutdown, which drops
  the items still waiting (as client-go does).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

from kinformer.aio import first_completed
from kinformer.clock import REAL_CLOCK, Clock, sleep_until
from kinformer.workqueue.metrics import MetricsProvider
from kinformer.workqueue.queue import T, WorkQueue

_NEVER = float("inf")


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class DelayingQueue(WorkQueue[T]):
    """A :class:`~kinformer.workqueue.queue.WorkQueue` with :meth:`add_after`."""

    __slots__ = ("_heap", "_next_ready", "_seq", "_waiter_task", "_waiting", "_wakeup")

    def __init__(self, name: str = "", *, clock: Clock = REAL_CLOCK, metrics: MetricsProvider | None = None) -> None:
        super().__init__(name, clock=clock, metrics=metrics)
        self._waiting: dict[T, float] = {}
        self._heap: list[tuple[float, int, T]] = []
        self._seq = itertools.count()
        self._waiter_task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None
        self._next_ready = _NEVER

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds of the queue's clock have passed.

        ``delay <= 0`` adds now. If the item is already waiting, the earlier ready time wins. Ignored after
        shutdown. Must be called from the event loop (use :meth:`add_after_threadsafe` elsewhere).
        """
        if self._shutting_down:
            return
        metrics = self._metrics
        if metrics is not None:
            metrics.retry()
        if delay <= 0:
            self.add(item)
            return
        task = self._waiter_task
        if task is None or task.done():
            self._start_waiter()  # raises, before any change, outside a running loop
        ready_at = self._clock.now() + delay
        current = self._waiting.get(item)
        if current is not None and current <= ready_at:
            return
        self._waiting[item] = ready_at
        heapq.heappush(self._heap, (ready_at, next(self._seq), item))
        wakeup = self._wakeup
        if ready_at < self._next_ready and wakeup is not None:
            _resolve(wakeup)

    def add_after_threadsafe(self, item: T, delay: float) -> None:
        """Schedule :meth:`add_after` on the queue's event loop; callable from any thread."""
        self._require_loop().call_soon_threadsafe(self.add_after, item, delay)

    @property
    def waiting_count(self) -> int:
        """The number of items waiting for their ready time."""
        return len(self._waiting)

    def _start_waiter(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            msg = "add_after needs a running event loop; use add_after_threadsafe from other threads"
            raise RuntimeError(msg) from None
        if self._loop is None:
            self._loop = loop
        self._waiter_task = loop.create_task(self._waiting_loop(loop), name=f"workqueue-delay-{self.name}")

    async def _waiting_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        heap = self._heap
        clock = self._clock
        while not self._shutting_down:
            self._add_ready(clock.now())
            self._wakeup = wakeup = loop.create_future()
            if not heap:
                self._next_ready = _NEVER
                await wakeup
                continue
            self._next_ready = ready_at = heap[0][0]
            await first_completed(wakeup, sleep_until(clock, ready_at))

    def _add_ready(self, now: float) -> None:
        """Move every item whose ready time has come into the queue."""
        heap = self._heap
        waiting = self._waiting
        while heap and heap[0][0] <= now:
            ready_at, _, item = heapq.heappop(heap)
            if waiting.get(item) == ready_at:
                del waiting[item]
                self._ready(item)

    def _ready(self, item: T) -> None:
        """An item's delay is over (a subclass may add it with more than the item)."""
        self.add(item)

    def _background_tasks(self) -> list[asyncio.Task[None] | None]:
        return [*super()._background_tasks(), self._waiter_task]

    def _begin_shutdown(self) -> None:
        super()._begin_shutdown()
        self._heap.clear()
        self._waiting.clear()
        task = self._waiter_task
        if task is not None and not task.done():
            task.cancel()


__all__ = ["DelayingQueue"]

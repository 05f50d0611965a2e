"""A fair priority work queue (controller-runtime's ``priorityqueue``, without its starvation).

:class:`PriorityQueue` is a :class:`~kinformer.workqueue.rate_limiting_queue.RateLimitingQueue` whose
``add``/``add_after``/``add_rate_limited`` take a ``priority`` (higher first; ties in arrival order). The
controller gives new events :data:`NORMAL_PRIORITY` and initial-list items and resyncs
:data:`LOW_PRIORITY`, so a restart's full relist does not delay reactions to live changes. Two rules keep it
fair where controller-runtime's is not:

* **aging**: an item queued for ``max_wait`` seconds is served next, before any newer item of any priority
  (oldest first), so no item waits behind newer ones longer than ``max_wait`` plus the time to serve the
  aged items ahead of it. ``max_wait=None`` disables aging (strict priority: low items can starve);
* **honest backoff**: ``add_rate_limited`` counts a failure only if the previous backoff was honoured. A key
  that failed, was re-added by an unrelated event and failed again before its backoff ended keeps its
  current delay instead of doubling it, so event traffic cannot inflate a key's backoff.

Invariants (beyond the work queue's): a queued item has exactly one live entry, ``_entries[item]``, whose
priority is the highest requested since it was queued; heap and age-list entries that no longer match it
are stale and skipped; a dirty item has its requested priority in ``_wanted`` until it is queued.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from typing import Generic

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.workqueue.metrics import MetricsProvider
from kinformer.workqueue.queue import T
from kinformer.workqueue.rate_limiters import RateLimiter
from kinformer.workqueue.rate_limiting_queue import RateLimitingQueue

__all__ = ["DEFAULT_MAX_WAIT", "LOW_PRIORITY", "NORMAL_PRIORITY", "PriorityQueue"]

NORMAL_PRIORITY = 0
LOW_PRIORITY = -100  # controller-runtime's priority for initial-list items
DEFAULT_MAX_WAIT = 10.0


class _PriorityFIFO(Generic[T]):
    """The container behind the work queue's ``_queue``: ``append``/``popleft``/``len``, by priority and age.

    ``_entries[item]`` is ``(priority, seq, queued_at)``; ``seq`` is fixed when the item is queued, so the
    age list (oldest first) and the heap find an item's live entry by it.
    """

    __slots__ = ("_ages", "_entries", "_heap", "_now", "_seq", "max_wait", "wanted")

    def __init__(self, clock: Clock, max_wait: float | None) -> None:
        self._now = clock.now
        self.max_wait = max_wait
        self._entries: dict[T, tuple[int, int, float]] = {}
        self._heap: list[tuple[int, int, T]] = []  # (-priority, seq, item)
        self._ages: deque[tuple[float, int, T]] = deque()  # (queued_at, seq, item), oldest first
        self._seq = itertools.count()
        self.wanted: dict[T, int] = {}  # priority requested for dirty items not queued yet

    def __len__(self) -> int:
        return len(self._entries)

    def append(self, item: T) -> None:
        priority = self.wanted.pop(item, NORMAL_PRIORITY)
        seq = next(self._seq)
        now = self._now()
        self._entries[item] = (priority, seq, now)
        heapq.heappush(self._heap, (-priority, seq, item))
        self._ages.append((now, seq, item))

    def raise_priority(self, item: T, priority: int) -> None:
        """A queued item asked for again: keep its place in age, move it up to ``priority`` if higher."""
        old, seq, queued_at = self._entries[item]
        if priority > old:
            self._entries[item] = (priority, seq, queued_at)
            heapq.heappush(self._heap, (-priority, seq, item))

    def popleft(self) -> T:
        item = self._pop_aged() if self.max_wait is not None else None
        if item is None:
            item = self._pop_heap()
        del self._entries[item]
        return item

    def _pop_aged(self) -> T | None:
        ages, entries = self._ages, self._entries
        while ages:
            queued_at, seq, item = ages[0]
            entry = entries.get(item)
            if entry is None or entry[1] != seq:
                ages.popleft()  # stale: served already
                continue
            if self._now() - queued_at < self.max_wait:  # type: ignore[operator]
                return None
            ages.popleft()
            return item
        return None

    def _pop_heap(self) -> T:
        heap, entries = self._heap, self._entries
        while True:
            neg_priority, seq, item = heapq.heappop(heap)
            entry = entries.get(item)
            if entry is not None and entry[1] == seq and entry[0] == -neg_priority:
                return item

    def clear(self) -> None:
        self._entries.clear()
        self._heap.clear()
        self._ages.clear()
        self.wanted.clear()


class PriorityQueue(RateLimitingQueue[T]):
    """A rate-limiting work queue served by priority, with aging and honest backoff (see the module doc)."""

    __slots__ = ("_backoff_until", "_delayed_priority", "_pq")

    def __init__(self, rate_limiter: RateLimiter | None = None, name: str = "", *, clock: Clock = REAL_CLOCK,
                 metrics: MetricsProvider | None = None, max_wait: float | None = DEFAULT_MAX_WAIT) -> None:
        super().__init__(rate_limiter, name, clock=clock, metrics=metrics)
        if max_wait is not None and max_wait < 0:
            raise ValueError(f"max_wait must be >= 0 or None, got {max_wait}")
        self._pq: _PriorityFIFO[T] = _PriorityFIFO(clock, max_wait)
        self._queue = self._pq  # type: ignore[assignment]
        self._delayed_priority: dict[T, int] = {}
        self._backoff_until: dict[T, float] = {}

    @property
    def max_wait(self) -> float | None:
        return self._pq.max_wait

    def add(self, item: T, priority: int = NORMAL_PRIORITY) -> None:
        """Queue ``item`` (once) at ``priority``; asked again, it keeps the highest priority requested."""
        if self._shutting_down:
            return
        pq = self._pq
        if item in self._dirty:
            if item in pq._entries:
                pq.raise_priority(item, priority)
            else:  # re-added while processing: queued again at done()
                pq.wanted[item] = max(priority, pq.wanted.get(item, priority))
            return
        pq.wanted[item] = priority
        super().add(item)

    def add_after(self, item: T, delay: float, priority: int = NORMAL_PRIORITY) -> None:
        """Add ``item`` at ``priority`` after ``delay`` seconds (the earliest time and highest priority win)."""
        if self._shutting_down:
            return
        if delay <= 0:
            if self._metrics is not None:
                self._metrics.retry()  # as the delaying queue counts it
            self.add(item, priority)
            return
        self._delayed_priority[item] = max(priority, self._delayed_priority.get(item, priority))
        super().add_after(item, delay)

    def _ready(self, item: T) -> None:
        self.add(item, self._delayed_priority.pop(item, NORMAL_PRIORITY))

    def add_rate_limited(self, item: T, priority: int = NORMAL_PRIORITY) -> None:
        """Add ``item`` after its backoff. A failure is counted only if the previous backoff had ended, so a
        key re-run early by unrelated events and failing again keeps its current delay."""
        now = self._clock.now()
        until = self._backoff_until.get(item)
        if until is not None and now < until:
            self.add_after(item, until - now, priority)
            return
        delay = self.rate_limiter.when(item)
        self._backoff_until[item] = now + delay
        self.add_after(item, delay, priority)

    def forget(self, item: T) -> None:
        super().forget(item)
        self._backoff_until.pop(item, None)

    def _begin_shutdown(self) -> None:
        super()._begin_shutdown()
        self._delayed_priority.clear()


"""Work queue metrics: the provider API and a Prometheus implementation.

The semantics follow client-go's ``util/workqueue/metrics.go``:

- ``depth``: items waiting to be handed out; incremented by every ``add`` that marks an item dirty
  (also when the item is in flight and will be queued again at ``done``), decremented by ``get``.
- ``adds``: the number of such ``add`` calls (duplicates of an already dirty item are not counted).
- ``latency`` (queue duration): seconds from the first ``add`` of an item to the ``get`` that hands it out.
- ``work_duration``: seconds from ``get`` to ``done``.
- ``unfinished_work_seconds``: the sum of the ages of all in-flight items.
- ``longest_running_processor_seconds``: the age of the oldest in-flight item.
- ``retries``: the number of ``add_after`` calls (and so of ``add_rate_limited``) accepted by a delaying queue.

A queue without a name emits no metrics, as in client-go. Queues call their :class:`QueueMetrics` only
when a provider was given, so an unmetered queue pays one ``is not None`` test per operation.

``prometheus_client`` is imported only when :class:`PrometheusMetricsProvider` is instantiated.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Protocol

from kinformer.clock import Clock

#: Histogram buckets used by controller-runtime for the queue and work duration histograms:
#: 10 ns, 100 ns, ... 1000 s (12 exponential buckets, factor 10).
DURATION_BUCKETS: tuple[float, ...] = tuple(1e-8 * 10**i for i in range(12))

#: How often a queue refreshes the unfinished-work gauges when they cannot be computed at scrape time.
UNFINISHED_WORK_UPDATE_PERIOD = 0.5


class GaugeMetric(Protocol):
    """A value that goes up and down by one."""

    def inc(self) -> None: ...

    def dec(self) -> None: ...


class SettableGaugeMetric(Protocol):
    """A value that is set outright.

    If the object also has ``set_function(fn)`` (``prometheus_client``'s gauges do), the queue installs a
    function computing the value at scrape time instead of refreshing it periodically.
    """

    def set(self, value: float) -> None: ...


class CounterMetric(Protocol):
    """A value that only goes up."""

    def inc(self) -> None: ...


class HistogramMetric(Protocol):
    """A distribution of observations."""

    def observe(self, value: float) -> None: ...


class MetricsProvider(Protocol):
    """Creates the per-queue metrics; ``name`` is the queue's name (the ``name`` label)."""

    def new_depth_metric(self, name: str) -> GaugeMetric: ...

    def new_adds_metric(self, name: str) -> CounterMetric: ...

    def new_latency_metric(self, name: str) -> HistogramMetric: ...

    def new_work_duration_metric(self, name: str) -> HistogramMetric: ...

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric: ...

    def new_retries_metric(self, name: str) -> CounterMetric: ...


class QueueMetrics:
    """The bookkeeping one queue does for its metrics (client-go's ``defaultQueueMetrics``).

    Invariants: ``_add_times`` holds the first-add time of every dirty item not yet handed out;
    ``_start_times`` holds the hand-out time of every in-flight item.
    """

    __slots__ = (
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_latency",
        "_longest",
        "_retries",
        "_start_times",
        "_unfinished",
        "_work_duration",
        "needs_periodic_update",
    )

    def __init__(self, provider: MetricsProvider, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest = provider.new_longest_running_processor_seconds_metric(name)
        self._retries = provider.new_retries_metric(name)
        self._add_times: dict[Hashable, float] = {}
        self._start_times: dict[Hashable, float] = {}
        #: True when the gauges must be refreshed by :meth:`update_unfinished_work` (no scrape-time hook).
        self.needs_periodic_update = not self._install_scrape_time_gauges()

    def _install_scrape_time_gauges(self) -> bool:
        unfinished_hook = getattr(self._unfinished, "set_function", None)
        longest_hook = getattr(self._longest, "set_function", None)
        if unfinished_hook is None or longest_hook is None:
            return False
        unfinished_hook(lambda: self.unfinished_work()[0])
        longest_hook(lambda: self.unfinished_work()[1])
        return True

    def add(self, item: Hashable) -> None:
        """An item became dirty."""
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock.now()

    def get(self, item: Hashable) -> None:
        """An item was handed out to a worker."""
        now = self._clock.now()
        self._depth.dec()
        self._start_times[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: Hashable) -> None:
        """A worker finished an item."""
        started = self._start_times.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.now() - started)

    def retry(self) -> None:
        """A delayed (retried) add was accepted."""
        self._retries.inc()

    def unfinished_work(self) -> tuple[float, float]:
        """``(sum of in-flight ages, oldest in-flight age)`` in seconds, as of now.

        Safe to call from a scrape thread: it reads a snapshot of the start times.
        """
        now = self._clock.now()
        for _ in range(3):
            try:
                starts = tuple(self._start_times.values())
                break
            except RuntimeError:  # resized by the loop thread while copying
                continue
        else:
            return 0.0, 0.0
        total = 0.0
        oldest = 0.0
        for started in starts:
            age = now - started
            total += age
            if age > oldest:
                oldest = age
        return total, oldest

    def update_unfinished_work(self) -> None:
        """Set the two unfinished-work gauges from the current in-flight items."""
        total, oldest = self.unfinished_work()
        self._unfinished.set(total)
        self._longest.set(oldest)


def new_queue_metrics(provider: MetricsProvider | None, name: str, clock: Clock) -> QueueMetrics | None:
    """The metrics of a queue, or None when there is no provider or the queue has no name."""
    if provider is None or not name:
        return None
    return QueueMetrics(provider, name, clock)


class PrometheusMetricsProvider:
    """Exports the queue metrics under the names Go controllers use, labelled by queue ``name``.

    ``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
    ``workqueue_work_duration_seconds``, ``workqueue_unfinished_work_seconds``,
    ``workqueue_longest_running_processor_seconds``, ``workqueue_retries_total``.

    The unfinished-work gauges are computed at scrape time. One provider registers the metric families
    once in ``registry`` (default: prometheus_client's global registry); share the provider between
    queues rather than creating two on the same registry. A second queue with the same name shares the
    counters and takes over the scrape-time gauges.
    """

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client as prom

        if registry is None:
            registry = prom.REGISTRY
        labels = ("name",)
        self._depth = prom.Gauge("workqueue_depth", "Current depth of the work queue.", labels, registry=registry)
        self._adds = prom.Counter(
            "workqueue_adds_total", "Total number of adds handled by the work queue.", labels, registry=registry
        )
        self._latency = prom.Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in the work queue before being handed out.",
            labels,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self._work_duration = prom.Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from the work queue takes.",
            labels,
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self._unfinished = prom.Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds of work in progress not yet observed by work_duration; large values mean stuck workers.",
            labels,
            registry=registry,
        )
        self._longest = prom.Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds the longest running work queue processor has been running.",
            labels,
            registry=registry,
        )
        self._retries = prom.Counter(
            "workqueue_retries_total", "Total number of retries handled by the work queue.", labels, registry=registry
        )

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._depth.labels(name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self._adds.labels(name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._latency.labels(name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._work_duration.labels(name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._unfinished.labels(name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._longest.labels(name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._retries.labels(name)


__all__ = [
    "DURATION_BUCKETS",
    "UNFINISHED_WORK_UPDATE_PERIOD",
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "MetricsProvider",
    "PrometheusMetricsProvider",
    "QueueMetrics",
    "SettableGaugeMetric",
    "new_queue_metrics",
]

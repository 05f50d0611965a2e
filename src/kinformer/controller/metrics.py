"""Prometheus metrics with the names Go controllers export (controller-runtime, client-go).

Metrics live in the process-wide registry :data:`kinformer.metrics.REGISTRY` (re-exported here as
:data:`REGISTRY`), like Go's package-level collectors; series are labelled per controller.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from kinformer.metrics import REGISTRY

_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
            1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60)

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"], registry=REGISTRY)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"], registry=REGISTRY)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics_total",
    "Total number of reconciliation panics per controller",
    ["controller"], registry=REGISTRY)
TERMINAL_RECONCILE_ERRORS = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"], registry=REGISTRY)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"], buckets=_BUCKETS, registry=REGISTRY)
MAX_CONCURRENT_RECONCILES = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"], registry=REGISTRY)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"], registry=REGISTRY)
RECONCILE_TIMEOUTS = Counter(
    "kinformer_reconcile_timeouts_total",
    "Reconciles cancelled because they ran past the controller's reconcile timeout",
    ["controller"], registry=REGISTRY)
READ_YOUR_WRITES = Counter(
    "kinformer_read_your_writes_total",
    "Reconciles that first waited for the cache to reach their previous reconcile's writes, by outcome",
    ["controller", "outcome"], registry=REGISTRY)
READ_YOUR_WRITES_WAIT = Histogram(
    "kinformer_read_your_writes_wait_seconds",
    "Time a reconcile waited for the cache to reach its previous reconcile's writes",
    ["controller"], buckets=_BUCKETS, registry=REGISTRY)
LEADER_ELECTION_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    ["name"], registry=REGISTRY)

_QUEUE_METRICS = None


class ReconcileSeries:
    """A controller's series of the metrics every reconcile updates (active workers, reconcile time, results),
    each looked up once, at its first use, instead of through ``labels()`` at every reconcile.

    Invariant: each child is the one ``labels()`` answers for the controller (a series is made where
    ``labels()`` would have made it: at the first reconcile, or the first of that result)."""

    __slots__ = ("_in_cache", "_results", "active", "controller", "time")

    def __init__(self, controller: str) -> None:
        self.controller = controller
        self.active = ACTIVE_WORKERS.labels(controller)
        self.time = RECONCILE_TIME.labels(controller)
        self._results: dict[str, Any] = {}
        self._in_cache: Any = None

    def in_cache(self) -> Any:
        """The ``kinformer_read_your_writes_total`` child of outcome ``in_cache`` (the previous reconcile's
        writes already in the cache: most reconciles after a write)."""
        child = self._in_cache
        if child is None:
            child = self._in_cache = READ_YOUR_WRITES.labels(self.controller, "in_cache")
        return child

    def result(self, result: str) -> Any:
        """The ``controller_runtime_reconcile_total`` child of ``result``."""
        child = self._results.get(result)
        if child is None:
            child = self._results[result] = RECONCILE_TOTAL.labels(self.controller, result)
        return child


def init_controller(controller: str, workers: int) -> None:
    """Create a controller's series at zero when it starts (as controller-runtime does), so that rates and
    ``increase()`` alerts see them before the first error."""
    for result in ("success", "error", "requeue", "requeue_after"):
        RECONCILE_TOTAL.labels(controller, result)
    for counter in (RECONCILE_ERRORS, TERMINAL_RECONCILE_ERRORS, RECONCILE_PANICS):
        counter.labels(controller)
    ACTIVE_WORKERS.labels(controller)
    MAX_CONCURRENT_RECONCILES.labels(controller).set(workers)


def queue_metrics_provider():
    """The process-wide work-queue metrics provider on :data:`REGISTRY` (created once)."""
    global _QUEUE_METRICS
    if _QUEUE_METRICS is None:
        from kinformer.workqueue.metrics import PrometheusMetricsProvider

        _QUEUE_METRICS = PrometheusMetricsProvider(REGISTRY)
    return _QUEUE_METRICS


class InformerCollector:
    """Exports the informers of every live SharedInformerFactory registered with :func:`watch_factory`.

    Series (labelled by informer name; figures of factories with the same informer name are summed):
    ``kinformer_informer_events_total{type}``, ``kinformer_informer_relists_total``,
    ``kinformer_informer_lists_total``, ``kinformer_informer_list_errors_total``,
    ``kinformer_informer_watch_restarts_total``, ``kinformer_informer_watch_errors_total``,
    ``kinformer_informer_resyncs_total``, ``kinformer_informer_idle_watch_restarts_total``,
    ``kinformer_informer_bad_resource_versions_total``, ``kinformer_informer_cache_objects``,
    ``kinformer_informer_handler_pending_notifications{handler}``, and the staleness gauges
    ``kinformer_informer_seconds_since_last_event`` (list, event or bookmark; the largest when summed) and
    ``kinformer_informer_cache_resource_version`` (the RV the cache reached, as a number).
    """

    def __init__(self) -> None:
        import weakref

        self._factories: weakref.WeakSet[Any] = weakref.WeakSet()

    def add(self, factory: Any) -> None:
        self._factories.add(factory)

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        counters = {name: CounterMetricFamily(f"kinformer_informer_{name}", help_, labels=["informer"])
                    for name, help_ in (("relists", "Relists (410 Gone or errors)"), ("lists", "Lists"),
                                        ("list_errors", "Failed lists"), ("watch_restarts", "Watches reopened"),
                                        ("watch_errors", "Watches that failed"),
                                        ("resyncs", "Periodic resyncs of the cache"),
                                        ("idle_watch_restarts", "Watches reopened after delivering nothing"),
                                        ("bad_resource_versions", "Events or lists with an invalid RV"))}
        events = CounterMetricFamily("kinformer_informer_events", "Watch events received, by type",
                                     labels=["informer", "type"])
        size = GaugeMetricFamily("kinformer_informer_cache_objects", "Objects in the informer's cache",
                                 labels=["informer"])
        pending = GaugeMetricFamily("kinformer_informer_handler_pending_notifications",
                                    "Notifications queued per event handler (its lag)", labels=["informer", "handler"])
        since = GaugeMetricFamily("kinformer_informer_seconds_since_last_event",
                                  "Seconds since the informer last heard from the server (list, event or bookmark)",
                                  labels=["informer"])
        cache_rv = GaugeMetricFamily("kinformer_informer_cache_resource_version",
                                     "The resourceVersion the informer's cache has reached", labels=["informer"])
        staleness: dict[str, float] = {}
        reached: dict[str, float] = {}
        totals: dict[tuple[str, ...], float] = {}
        for factory in list(self._factories):
            for name, informer in factory.informers.items():
                stats = informer.stats.reflector
                for attr in counters:
                    totals[(attr, name)] = totals.get((attr, name), 0) + getattr(stats, attr)
                for kind, count in stats.events.items():
                    totals[("events", name, kind)] = totals.get(("events", name, kind), 0) + count
                totals[("size", name)] = totals.get(("size", name), 0) + len(informer.indexer)
                seconds = informer.seconds_since_last_event()
                if seconds is not None:
                    staleness[name] = max(staleness.get(name, 0.0), seconds)
                rv = informer.cache_resource_version
                if rv.isdigit():
                    reached[name] = max(reached.get(name, 0.0), float(rv))
                for handler, queued in informer.pending_notifications().items():
                    totals[("pending", name, handler)] = totals.get(("pending", name, handler), 0) + queued
        for (kind, *labels), value in totals.items():
            family = {"events": events, "size": size, "pending": pending}.get(kind) or counters[kind]
            family.add_metric(labels, value)
        for name, value in staleness.items():
            since.add_metric([name], value)
        for name, value in reached.items():
            cache_rv.add_metric([name], value)
        yield from counters.values()
        yield from (events, size, pending, since, cache_rv)


INFORMERS = InformerCollector()
REGISTRY.register(INFORMERS)


def watch_factory(factory: Any) -> None:
    """Export ``factory``'s informers on :data:`REGISTRY` for as long as it lives."""
    INFORMERS.add(factory)

"""Prometheus metrics with the names Go controllers export (controller-runtime, client-go).

Metrics live in one registry (:data:`REGISTRY`, by default prometheus_client's global one), created
once per process like Go's package-level collectors; series are labelled per controller.
"""

from __future__ import annotations

from prometheus_client import REGISTRY as _DEFAULT_REGISTRY
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY: CollectorRegistry = _DEFAULT_REGISTRY

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
LEADER_ELECTION_STATUS = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    ["name"], registry=REGISTRY)

_QUEUE_METRICS = None


def queue_metrics_provider():
    """The process-wide work-queue metrics provider on :data:`REGISTRY` (created once)."""
    global _QUEUE_METRICS
    if _QUEUE_METRICS is None:
        from kinformer.workqueue.metrics import PrometheusMetricsProvider

        _QUEUE_METRICS = PrometheusMetricsProvider(REGISTRY)
    return _QUEUE_METRICS

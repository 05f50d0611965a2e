"""client-go's ``util/workqueue`` for asyncio: de-duplicating work queues, delays and retry pacing.

- :class:`WorkQueue`: a FIFO of keys; a key is queued at most once and never processed by two workers
  at once (re-adding a key in flight queues it again at ``done``).
- :class:`DelayingQueue`: adds ``add_after`` (the earliest requested time wins).
- :class:`RateLimitingQueue`: adds ``add_rate_limited`` / ``forget`` / ``num_requeues``.
- :class:`PriorityQueue`: a rate-limiting queue served by priority, with an aging bound and honest backoff.
- Rate limiters: :class:`ItemExponentialFailureRateLimiter`, :class:`ItemFastSlowRateLimiter`,
  :class:`BucketRateLimiter`, :class:`MaxOfRateLimiter`, :func:`default_controller_rate_limiter`.
- Metrics: pass ``metrics=PrometheusMetricsProvider()`` (or any :class:`MetricsProvider`) and a ``name``.
"""

from kinformer.workqueue.delaying_queue import DelayingQueue
from kinformer.workqueue.metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    MetricsProvider,
    PrometheusMetricsProvider,
    QueueMetrics,
    SettableGaugeMetric,
)
from kinformer.workqueue.priority_queue import LOW_PRIORITY, NORMAL_PRIORITY, PriorityQueue
from kinformer.workqueue.queue import ShutDown, WorkQueue
from kinformer.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from kinformer.workqueue.rate_limiting_queue import RateLimitingQueue

__all__ = [
    "LOW_PRIORITY",
    "NORMAL_PRIORITY",
    "BucketRateLimiter",
    "CounterMetric",
    "DelayingQueue",
    "GaugeMetric",
    "HistogramMetric",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "PriorityQueue",
    "PrometheusMetricsProvider",
    "QueueMetrics",
    "RateLimiter",
    "RateLimitingQueue",
    "SettableGaugeMetric",
    "ShutDown",
    "WorkQueue",
    "default_controller_rate_limiter",
]

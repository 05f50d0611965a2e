"""A delaying queue that paces retries with a rate limiter (client-go ``rate_limiting_queue.go``).

The usual worker loop: ``key = await q.get()``; on failure ``q.add_rate_limited(key)``; on success
``q.forget(key)``; always ``q.done(key)``.
"""

from __future__ import annotations

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.workqueue.delaying_queue import DelayingQueue
from kinformer.workqueue.metrics import MetricsProvider
from kinformer.workqueue.queue import T
from kinformer.workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`~kinformer.workqueue.delaying_queue.DelayingQueue` with per-item retry pacing.

    ``rate_limiter`` defaults to :func:`~kinformer.workqueue.rate_limiters.default_controller_rate_limiter`
    on the queue's clock.
    """

    __slots__ = ("rate_limiter",)

    def __init__(
        self,
        rate_limiter: RateLimiter | None = None,
        name: str = "",
        *,
        clock: Clock = REAL_CLOCK,
        metrics: MetricsProvider | None = None,
    ) -> None:
        super().__init__(name, clock=clock, metrics=metrics)
        if rate_limiter is None:
            rate_limiter = default_controller_rate_limiter(clock)
        self.rate_limiter: RateLimiter = rate_limiter

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter gives it (which counts one more failure)."""
        self.add_after(item, self.rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Clear ``item``'s failure history in the rate limiter (it does not remove the item from the queue)."""
        self.rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many failures of ``item`` the rate limiter tracks."""
        return self.rate_limiter.num_requeues(item)


__all__ = ["RateLimitingQueue"]

"""Rate limiters for retries (client-go ``util/workqueue/default_rate_limiters.go``).

A rate limiter answers "how long should this item wait before its next attempt?". Every
:meth:`RateLimiter.when` call counts as one failure of the item; :meth:`RateLimiter.forget` clears the
item's history (call it when the item succeeded or is given up). Delays are in seconds.

The limiters are not thread-safe; use them from the event loop, like the queues.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol, runtime_checkable

from kinformer.clock import REAL_CLOCK, Clock


@runtime_checkable
class RateLimiter(Protocol):
    """Decides per-item retry delays."""

    def when(self, item: Hashable) -> float:
        """Record one more failure of ``item`` and return how long it should wait, in seconds."""
        ...

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item``: its next failure starts from scratch."""
        ...

    def num_requeues(self, item: Hashable) -> int:
        """How many failures of ``item`` are being tracked."""
        ...


class ItemExponentialFailureRateLimiter:
    """``base_delay * 2**failures``, capped at ``max_delay`` (5 ms, 10 ms, 20 ms, ... by default).

    The first :meth:`when` of an item returns ``base_delay``. Never overflows: a delay too large to
    represent is ``max_delay``.
    """

    __slots__ = ("_failures", "base_delay", "max_delay")

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures
        exponent = failures.get(item, 0)
        failures[item] = exponent + 1
        try:
            backoff = math.ldexp(self.base_delay, exponent)
        except OverflowError:
            return self.max_delay
        return self.max_delay if backoff > self.max_delay else backoff

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter:
    """``fast_delay`` for the first ``max_fast_attempts`` failures of an item, ``slow_delay`` after."""

    __slots__ = ("_failures", "fast_delay", "max_fast_attempts", "slow_delay")

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        count = self._failures.get(item, 0) + 1
        self._failures[item] = count
        return self.fast_delay if count <= self.max_fast_attempts else self.slow_delay

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """An overall token bucket (``golang.org/x/time/rate`` semantics), not per item.

    The bucket holds up to ``burst`` tokens and refills at ``qps`` tokens per second; it starts full.
    Every :meth:`when` call reserves one token, whatever the item, and returns how long until that
    token is available (0 while the burst lasts, then ``1/qps`` more per call). The token stays reserved
    even if the caller never waits for it (controller-runtime#1594: with the default controller limiter,
    every rate-limited requeue spends a token, so many failing items slow each other's retries down).
    It keeps no per-item state: :meth:`forget` does nothing and :meth:`num_requeues` is 0.
    """

    __slots__ = ("_clock", "_last", "_tokens", "burst", "qps")

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock = REAL_CLOCK) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be positive, got {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self.qps = float(qps)
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: Hashable) -> float:
        if self.qps == math.inf:
            return 0.0
        now = self._clock.now()
        tokens = self.tokens_at(now) - 1.0
        self._tokens = tokens
        self._last = now
        return -tokens / self.qps if tokens < 0 else 0.0

    def tokens_at(self, now: float) -> float:
        """The tokens the bucket would hold at ``now`` (negative while reservations are outstanding)."""
        last = self._last
        if last is None:
            return self._tokens
        elapsed = now - last if now > last else 0.0
        return min(float(self.burst), self._tokens + elapsed * self.qps)

    def forget(self, item: Hashable) -> None:
        return None

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Asks every limiter (each :meth:`when` reaches all of them) and returns the longest delay.

    :meth:`forget` forgets in all of them; :meth:`num_requeues` is the largest count.
    """

    __slots__ = ("limiters",)

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters: tuple[RateLimiter, ...] = limiters

    def when(self, item: Hashable) -> float:
        longest = 0.0
        for limiter in self.limiters:
            delay = limiter.when(item)
            if delay > longest:
                longest = delay
        return longest

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter(clock: Clock = REAL_CLOCK) -> MaxOfRateLimiter:
    """client-go's default: the max of per-item exponential backoff (5 ms .. 1000 s) and an overall
    10 qps / burst 100 token bucket (which reserves a token on every call, see :class:`BucketRateLimiter`)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )


__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "default_controller_rate_limiter",
]

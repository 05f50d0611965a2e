"""Per-client limits of the embedded API server: concurrent watches and request rate.

A client is the authenticated user's name, or the remote address for anonymous requests.

Invariants:

* The health paths (``/healthz``, ``/livez``, ``/readyz`` and below) are never counted nor refused.
* Rate: one token bucket per client (``qps`` tokens a second, at most ``burst`` stored, starting
  full); every other request, watches included, takes one token or is answered 429 with a
  ``Retry-After`` of the whole seconds until a token is back (at least 1). Refused requests take no
  token, so a client that backs off as told gets through.
* Watches: at most ``max_watches`` open per client; the slot is taken before the watch starts and given
  back when its handler returns, whatever the outcome. One more gets 429 with ``Retry-After``.
* Memory stays bounded: buckets of idle clients (full again) are dropped once more than
  ``max_clients`` are tracked.
"""

from __future__ import annotations

import math

from aiohttp import web

from ...clock import REAL_CLOCK, Clock
from ..auth.authentication import ADMIN, ANONYMOUS, USER_KEY, UserInfo
from ..machinery import status as st

__all__ = ["ClientLimits", "RateLimiter", "WatchLimiter", "client_key", "is_health", "may_watch"]

_HEALTH = ("/healthz", "/livez", "/readyz")
WATCH_RETRY_AFTER = 1


def client_key(request: web.Request, user: UserInfo | None = None) -> str:
    """Who a request counts against: ``user:<name>`` when authenticated, else ``addr:<remote address>``.

    Anonymous requests, and those of a server without authentication (all the default admin), count by address.
    ``user``: the request's (default: the one authentication stored in it).
    """
    if user is None:
        user = request.get(USER_KEY)
    if user is not None and user is not ANONYMOUS and user is not ADMIN:
        return "user:" + user.name
    return "addr:" + (request.remote or "")


def is_health(path: str) -> bool:
    """Whether ``path`` is a health probe (``/healthz``, ``/livez``, ``/readyz`` or below)."""
    if path[1:2] not in ("h", "l", "r"):  # most paths: decided on one character
        return False
    for p in _HEALTH:
        if path == p or (path.startswith(p) and path[len(p)] == "/"):
            return True
    return False


def may_watch(request: web.Request) -> bool:
    """Cheap pre-check before parsing the request's attributes: only GETs like these can be watches."""
    return request.method == "GET" and ("watch" in request.query_string or "/watch/" in request.path)


class RateLimiter:
    """Token buckets per client key; :meth:`acquire` returns 0 when allowed, else the seconds to wait."""

    __slots__ = ("_buckets", "burst", "clock", "max_clients", "qps")

    def __init__(self, qps: float, burst: int, clock: Clock = REAL_CLOCK, max_clients: int = 10000) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("rate limit needs qps > 0 and burst >= 1")
        self.qps = float(qps)
        self.burst = float(burst)
        self.clock = clock
        self.max_clients = max_clients
        self._buckets: dict[str, list[float]] = {}  # key -> [tokens, last refill time]

    def acquire(self, key: str) -> float:
        now = self.clock.now()
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.max_clients:
                self._prune(now)
            bucket = self._buckets[key] = [self.burst, now]
        tokens = min(self.burst, bucket[0] + (now - bucket[1]) * self.qps)
        bucket[1] = now
        if tokens >= 1.0:
            bucket[0] = tokens - 1.0
            return 0.0
        bucket[0] = tokens
        return (1.0 - tokens) / self.qps

    def _prune(self, now: float) -> None:
        """Drop buckets that have refilled (their clients are idle); if none, the oldest tracked one."""
        full = [k for k, (tokens, last) in self._buckets.items() if tokens + (now - last) * self.qps >= self.burst]
        for k in full:
            del self._buckets[k]
        if len(self._buckets) >= self.max_clients:
            del self._buckets[next(iter(self._buckets))]

    def __len__(self) -> int:
        return len(self._buckets)


class WatchLimiter:
    """Counts open watches per client key."""

    __slots__ = ("_open", "limit")

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("max watches per client must be >= 1")
        self.limit = limit
        self._open: dict[str, int] = {}

    def try_acquire(self, key: str) -> bool:
        n = self._open.get(key, 0)
        if n >= self.limit:
            return False
        self._open[key] = n + 1
        return True

    def release(self, key: str) -> None:
        n = self._open.get(key, 0) - 1
        if n > 0:
            self._open[key] = n
        else:
            self._open.pop(key, None)

    def open(self, key: str) -> int:
        """How many watches ``key`` has open."""
        return self._open.get(key, 0)


def _too_many(retry_after: int, message: str) -> web.Response:
    return st.StatusError(429, "TooManyRequests", message, details={"retryAfterSeconds": retry_after},
                          headers={"Retry-After": str(retry_after)}).response()


class ClientLimits:
    """The watch and rate limits of one server (either may be None: off), applied by the handler chain.

    ``rate_limit_burst`` 0 means ``2 * qps`` (at least 1). The chain keys clients after authentication,
    so they are counted by user.
    """

    def __init__(self, *, max_watches_per_client: int | None = None, rate_limit_qps: float | None = None,
                 rate_limit_burst: int = 0, clock: Clock = REAL_CLOCK) -> None:
        self.rate: RateLimiter | None = None
        if rate_limit_qps:
            burst = rate_limit_burst or max(1, math.ceil(2 * rate_limit_qps))
            self.rate = RateLimiter(rate_limit_qps, burst, clock)
        self.watches = WatchLimiter(max_watches_per_client) if max_watches_per_client else None

    @staticmethod
    def too_many_requests(wait: float) -> web.Response:
        """The 429 of a request over the rate limit, ``wait`` seconds before a token is back."""
        return _too_many(max(1, math.ceil(wait)), "Too many requests, please try again later.")

    def too_many_watches(self) -> web.Response:
        """The 429 of a watch over the per-client limit."""
        limit = self.watches.limit if self.watches is not None else 0
        return _too_many(WATCH_RETRY_AFTER, f"Too many requests: at most {limit} watches per client, "
                                            "please try again later.")

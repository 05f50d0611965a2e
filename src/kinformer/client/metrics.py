"""client-go's REST client metrics, recorded by :class:`kinformer.Client` for every HTTP attempt.

* ``rest_client_requests_total{code, method, host}``: responses by status code (``"<error>"`` when the request
  got no response: connection refused, reset, timed out), HTTP method and ``host:port``;
* ``rest_client_request_duration_seconds{verb, host}``: time until the response's status and headers arrived
  (a watch is timed to its first byte, not for as long as it streams), client-go's buckets.

They live in prometheus_client's default registry, which the Manager's ``/metrics`` serves. A retried request
counts once per attempt, as in client-go.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from kinformer.metrics import REGISTRY

__all__ = ["REQUESTS", "REQUEST_DURATION", "RequestMetrics"]

REQUESTS = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"], registry=REGISTRY)
REQUEST_DURATION = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb, and host.",
    ["verb", "host"], buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0), registry=REGISTRY)

#: The ``code`` of an attempt that got no HTTP response.
NO_RESPONSE = "<error>"


class RequestMetrics:
    """Records one client's attempts against one host (the labelled series are looked up once, then reused)."""

    __slots__ = ("_durations", "_results", "host")

    def __init__(self, host: str) -> None:
        self.host = host
        self._results: dict[tuple[str, str], Counter] = {}
        self._durations: dict[str, Histogram] = {}

    def observe(self, method: str, status: int | None, seconds: float) -> None:
        """One attempt of ``method`` answered with ``status`` (None: no response) after ``seconds``."""
        code = NO_RESPONSE if status is None else str(status)
        result = self._results.get((code, method))
        if result is None:
            result = self._results[(code, method)] = REQUESTS.labels(code, method, self.host)
        result.inc()
        duration = self._durations.get(method)
        if duration is None:
            duration = self._durations[method] = REQUEST_DURATION.labels(method, self.host)
        duration.observe(seconds)

"""The process-wide Prometheus registry every kinformer metric is registered on.

Like the global registry of Go's component-base/metrics (and controller-runtime's ``metrics.Registry``),
it is created once per process; the controller, work-queue and webhook series all live on it, so one
``/metrics`` endpoint serves them together. By default it is prometheus_client's global registry.
"""

from __future__ import annotations

from prometheus_client import REGISTRY as _DEFAULT_REGISTRY
from prometheus_client import CollectorRegistry

__all__ = ["REGISTRY"]

REGISTRY: CollectorRegistry = _DEFAULT_REGISTRY

"""Shared test configuration: the kinformer pytest plugin (embedded server fixtures), and the spans OpenTelemetry's
SDK records (``otel_spans``; tests using it are skipped where the SDK is not installed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest_plugins = ["kinformer.testing.plugin"]

_EXPORTER: Any = None


@pytest.fixture
def otel_spans() -> Iterator[Any]:
    """An in-memory exporter receiving every span the process ends during the test (cleared before and after)."""
    global _EXPORTER
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    if _EXPORTER is None:  # the global provider can be set once per process
        provider = TracerProvider()
        _EXPORTER = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()

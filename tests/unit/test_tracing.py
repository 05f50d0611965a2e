"""OpenTelemetry spans per reconcile, their outcome, the context of the enqueuer; nothing without opentelemetry."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kinformer import tracing
from kinformer.controller import Controller, Request, Result, TerminalError
from testlib import wait_until
from unit.controller.test_controller import Source, obj, start, stop

ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def controller(name: str, reconcile: Any, **options: Any) -> AsyncIterator[Source]:
    """A started Controller ``name`` over a Source (yielded); stopped on leaving."""
    ctrl = Controller(name, reconcile, **options)
    src = Source()
    ctrl.watch(src)
    src.controller = ctrl  # type: ignore[attr-defined]
    task = await start(ctrl)
    try:
        yield src
    finally:
        await stop(task)


def spans_named(exporter: Any, name: str) -> dict[str, Any]:
    return {s.attributes["name"]: s for s in exporter.get_finished_spans() if s.name == name}


async def test_a_span_per_reconcile_with_its_outcome(otel_spans: Any) -> None:
    async def reconcile(req: Request) -> Result:
        if req.name == "later":
            return Result(requeue_after=30)
        if req.name == "bug":
            raise KeyError("spec")
        if req.name == "terminal":
            raise TerminalError("cannot")
        return Result()

    async with controller("traced", reconcile) as src:
        for name in ("fine", "later", "bug", "terminal"):
            await src.add(obj(name, "ns"))
        await wait_until(lambda: len(spans_named(otel_spans, "reconcile")) >= 4)
    spans = spans_named(otel_spans, "reconcile")
    fine = spans["fine"].attributes
    assert {k: fine[k] for k in ("controller", "namespace", "name", "result", "requeue")} == {
        "controller": "traced", "namespace": "ns", "name": "fine", "result": "success", "requeue": False}
    assert len(fine["reconcile_id"]) == 36
    later = spans["later"].attributes
    assert (later["result"], later["requeue"], later["requeue_after"]) == ("requeue_after", True, 30.0)
    bug = spans["bug"]
    assert (bug.attributes["result"], bug.attributes["requeue"]) == ("error", True)
    assert bug.status.status_code.name == "ERROR" and bug.events[0].name == "exception"
    assert spans["terminal"].attributes["result"] == "terminal_error"
    assert spans["terminal"].attributes["requeue"] is False


async def test_the_span_that_enqueued_a_key_is_the_parent_of_its_reconcile(otel_spans: Any) -> None:
    from opentelemetry import trace

    tracer = trace.get_tracer("test")

    async def reconcile(req: Request) -> Result:
        return Result()

    async with controller("parented", reconcile) as src:
        with tracer.start_as_current_span("webhook") as first:
            await src.add(obj("a"))
            await src.add(obj("a"))  # the same span twice: remembered once
        with tracer.start_as_current_span("another") as second:
            await src.add(obj("a"))  # before "a" is reconciled, or after: either a link or a parent of its own
        await src.add(obj("untraced"))
        await wait_until(lambda: "untraced" in spans_named(otel_spans, "reconcile"))
    spans = spans_named(otel_spans, "reconcile")
    reconciles_of_a = [s for s in otel_spans.get_finished_spans() if s.name == "reconcile"
                       and s.attributes["name"] == "a"]
    traced = reconciles_of_a[0]
    assert traced.parent is not None and traced.parent.span_id == first.get_span_context().span_id
    assert traced.context.trace_id == first.get_span_context().trace_id
    # the second enqueuer: linked from that reconcile if it came before it started, else the next one's parent
    seen_second = [link.context.span_id for link in traced.links] + [
        s.parent.span_id for s in reconciles_of_a[1:] if s.parent is not None]
    assert seen_second == [second.get_span_context().span_id]
    assert spans["untraced"].parent is None
    assert not src.controller._enqueued_by  # type: ignore[attr-defined]  # nothing kept once reconciled


async def test_a_source_inside_a_span_parents_the_reconcile(otel_spans: Any) -> None:
    from opentelemetry import trace

    tracer = trace.get_tracer("test")
    done: list[Request] = []

    async def requests() -> Any:
        with tracer.start_as_current_span("producer"):
            yield Request("ns", "from-source")

    async def reconcile(req: Request) -> Result:
        done.append(req)
        return Result()

    async with controller("sourced", reconcile, sources=[requests()]):
        await wait_until(lambda: len(spans_named(otel_spans, "reconcile")) >= 1)
    producer = next(s for s in otel_spans.get_finished_spans() if s.name == "producer")
    assert spans_named(otel_spans, "reconcile")["from-source"].parent.span_id == producer.context.span_id


@pytest.mark.parametrize(("path", "parsed"), [
    ("/api/v1/namespaces/default/configmaps/web", ("configmaps", "default", True)),
    ("/api/v1/namespaces/default/pods/web/status", ("pods/status", "default", True)),
    ("/apis/apps/v1/deployments", ("deployments", "", False)),
    ("/api/v1/namespaces/kube-system", ("namespaces", "", True)),
    ("/api/v1/namespaces", ("namespaces", "", False)),
    ("/version", ("", "", False)),
])
def test_parse_path(path: str, parsed: tuple[str, str, bool]) -> None:
    assert tracing.parse_path(path) == parsed


def test_without_opentelemetry_tracing_is_off_and_the_hooks_do_nothing() -> None:
    code = """
import sys
sys.modules["opentelemetry"] = None  # as if the extra were not installed
from kinformer import tracing
assert not tracing.ENABLED and tracing.enqueue_context() is None
with tracing.reconcile_span("c", "ns", "n", "id") as span:
    span.outcome("success")
    span.failed(ValueError("x"), "error", requeue=True)
headers = {}
with tracing.api_span("GET", "/api/v1/pods", None, headers) as api:
    assert api is None and headers == {}
import kinformer.controller.controller, kinformer.client.client
print("off")
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "off", proc.stderr


def test_without_a_tracer_provider_a_reconcile_runs_in_the_span_the_no_op_tracer_would_give() -> None:
    """No provider set (a fresh process): the reconcile's current span is the invalid non-recording span the
    no-op tracer makes (not the span around the controller), as it was through the tracer, made directly."""
    code = """
from opentelemetry import trace
from opentelemetry.context import Context
from kinformer import tracing
outer = trace.NonRecordingSpan(trace.SpanContext(0x1234, 0x5678, is_remote=True))
with trace.use_span(outer):
    with trace.get_tracer("x").start_as_current_span("reconcile", context=Context()):
        expected = trace.get_current_span()
    with tracing.reconcile_span("c", "ns", "n", "id") as span:
        assert trace.get_current_span() is expected is trace.INVALID_SPAN
        span.outcome("success", requeue=True, requeue_after=1.0)
        span.failed(ValueError("x"), "error", requeue=True)
    assert trace.get_current_span() is outer
print("no-op")
"""
    env = {k: v for k, v in os.environ.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    env["PYTHONPATH"] = str(ROOT / "src")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "no-op", proc.stderr


async def test_a_reconcile_nobody_traced_starts_a_trace_even_inside_the_span_that_started_the_controller(
        otel_spans: Any) -> None:
    from opentelemetry import trace

    async def reconcile(req: Request) -> Result:
        return Result()

    ctrl = Controller("rooted", reconcile)
    src = Source()
    ctrl.watch(src)
    with trace.get_tracer("test").start_as_current_span("main"):
        task = await start(ctrl)  # the workers inherit "main" as their current span
    try:
        await src.add(obj("a"))
        await wait_until(lambda: "a" in spans_named(otel_spans, "reconcile"))
    finally:
        await stop(task)
    assert spans_named(otel_spans, "reconcile")["a"].parent is None

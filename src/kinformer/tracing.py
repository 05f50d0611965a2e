"""OpenTelemetry tracing, when the ``otel`` extra is installed (``pip install kinformer[otel]``).

* a span ``reconcile`` per reconcile, with the attributes ``controller``, ``namespace``, ``name``,
  ``reconcile_id``, ``result`` (``success``, ``requeue``, ``requeue_after``, ``error``, ``terminal_error``) and
  ``requeue`` (and ``requeue_after``, seconds, when set); a raised exception is recorded on it (status ERROR);
* a child span per API request made while a span is recording (a reconcile's, or the caller's own): name
  ``{verb} {resource}``, attributes ``verb`` (the Kubernetes verb), ``resource``, ``namespace`` when there is one,
  ``http.request.method`` and ``http.response.status_code``; the request carries the W3C ``traceparent`` header;
* trace context from where a key was enqueued, when it is known: a key enqueued while a span was recording (a
  source yielding it inside a span, an event handler called inside one) makes that span the reconcile's parent,
  and further enqueuers of the same key before it runs are links; any other reconcile starts a trace of its
  own. Events from the informer carry none.

Without opentelemetry nothing here does anything: every hook is a constant-time check of :data:`ENABLED`
(module import is guarded). With it but no tracer provider configured, spans are OpenTelemetry's non-recording
ones, and API requests outside a recording span open none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

try:
    from opentelemetry import context as _context
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
    from opentelemetry.context import Context as _Context
except ImportError:  # the extra is not installed: tracing is off
    _trace = None  # type: ignore[assignment]
    _propagate = None  # type: ignore[assignment]

__all__ = ["ENABLED", "MAX_LINKS", "NO_SPAN", "ReconcileSpan", "api_span", "enqueue_context", "parse_path",
           "reconcile_span", "set_status_code"]

#: True when opentelemetry is importable.
ENABLED = _trace is not None

#: At most this many enqueuers of one key are linked from its reconcile span.
MAX_LINKS = 16

_TRACER = _trace.get_tracer("kinformer") if _trace is not None else None


def enqueue_context() -> Any | None:
    """The span context recording where this code runs (to remember with an enqueued key), else None."""
    if _trace is None:
        return None
    span = _trace.get_current_span()
    return span.get_span_context() if span.is_recording() else None


class ReconcileSpan:
    """What the controller tells the reconcile span about the outcome."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def outcome(self, result: str, requeue: bool = False, requeue_after: float | None = None) -> None:
        span = self.span
        if span is None:
            return
        span.set_attribute("result", result)
        span.set_attribute("requeue", requeue)
        if requeue_after:
            span.set_attribute("requeue_after", float(requeue_after))

    def failed(self, exc: BaseException, result: str, requeue: bool) -> None:
        """The reconcile raised ``exc`` (caught by the controller): recorded on the span, status ERROR."""
        span = self.span
        if span is None:
            return
        self.outcome(result, requeue=requeue)
        span.record_exception(exc)
        span.set_status(_trace.Status(_trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))


#: The outcome sink when tracing is off.
NO_SPAN = ReconcileSpan(None)


@contextlib.contextmanager
def reconcile_span(controller: str, namespace: str, name: str, reconcile_id: str,
                   enqueued_by: list[Any] | None = None) -> Iterator[ReconcileSpan]:
    """The span of one reconcile (current for its body); ``enqueued_by``: the span contexts that enqueued the key
    (the first becomes the parent, the others links)."""
    if _TRACER is None:
        yield NO_SPAN
        return
    if not enqueued_by and isinstance(_trace.get_tracer_provider(), _trace.ProxyTracerProvider):
        # No tracer provider (yet): the span would be OpenTelemetry's invalid, non-recording one, made current
        # for the body; set it current directly (what the no-op tracer's span machinery does, at a fraction of
        # its cost per reconcile).
        token = _context.attach(_trace.set_span_in_context(_trace.INVALID_SPAN))
        try:
            yield NO_SPAN
        finally:
            _context.detach(token)
        return
    parent = _Context()  # a new trace, whatever span started the controller
    links = None
    if enqueued_by:
        parent = _trace.set_span_in_context(_trace.NonRecordingSpan(enqueued_by[0]))
        links = [_trace.Link(ctx) for ctx in enqueued_by[1:MAX_LINKS + 1]]
    attributes = {"controller": controller, "namespace": namespace, "name": name, "reconcile_id": reconcile_id}
    with _TRACER.start_as_current_span("reconcile", context=parent, links=links, attributes=attributes) as span:
        yield ReconcileSpan(span)


def _verb(method: str, path: str, params: Mapping[str, str] | None, has_name: bool) -> str:
    if method == "GET":
        if params and params.get("watch") in ("true", "1"):
            return "watch"
        return "get" if has_name else "list"
    if method == "DELETE" and not has_name:
        return "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


def parse_path(path: str) -> tuple[str, str, bool]:
    """``(resource[/subresource], namespace, names an object)`` of a REST path ("" resource: not a resource)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        return "", "", False
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest:
        return "", namespace, False
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    return resource, namespace, len(rest) >= 2


@contextlib.contextmanager
def api_span(method: str, path: str, params: Mapping[str, str] | None,
             headers: MutableMapping[str, str]) -> Iterator[Any]:
    """A child span for one API request while a span is recording (else None); injects ``traceparent``
    into ``headers``. The caller sets the status code with :func:`set_status_code`."""
    if _TRACER is None or not _trace.get_current_span().is_recording():
        yield None
        return
    resource, namespace, has_name = parse_path(path)
    verb = _verb(method, path, params, has_name)
    attributes: dict[str, Any] = {"verb": verb, "resource": resource, "http.request.method": method}
    if namespace:
        attributes["namespace"] = namespace
    with _TRACER.start_as_current_span(f"{verb} {resource or path}", kind=_trace.SpanKind.CLIENT,
                                       attributes=attributes) as span:
        _propagate.inject(headers)
        yield span


def set_status_code(span: Any, status: int) -> None:
    """Record the HTTP status of the request of ``span`` (from :func:`api_span`); a status >= 400 is an error."""
    if span is None:
        return
    span.set_attribute("http.response.status_code", status)
    if status >= 400:
        span.set_status(_trace.Status(_trace.StatusCode.ERROR))

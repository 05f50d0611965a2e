"""Kubernetes ``Status`` objects: every error the server answers is one of these.

:class:`StatusError` is raised anywhere in request handling; the error middleware turns it into a
JSON ``Status`` response with the right HTTP code, reason, details and extra headers.

No error echoes a client's value in full: a Status message is cut to :data:`MAX_MESSAGE` characters, each
cause's message to :data:`MAX_CAUSE_MESSAGE`, and at most :data:`MAX_CAUSES` causes are kept (the
message then says how many were left out). A cut keeps the head and the tail of the text, so the
field and the reason that end a field error survive a long value in its middle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from aiohttp import web

from ..registry.resources import KUBELET_SUBRESOURCES, ResourceInfo

MAX_MESSAGE = 4096
MAX_CAUSE_MESSAGE = 1024
MAX_CAUSES = 100


def json_body(doc: Any) -> bytes:
    """``doc`` as kube-apiserver's JSON serializer writes a response body: compact, ending with a newline."""
    return orjson.dumps(doc, option=orjson.OPT_APPEND_NEWLINE)


def truncate(text: str, limit: int) -> str:
    """``text`` when at most ``limit`` characters, else its head and tail around a marker (at most ``limit``)."""
    if len(text) <= limit:
        return text
    marker = f"...({len(text) - limit} characters truncated)..."
    keep = max(0, limit - len(marker))
    head = keep * 3 // 4
    return text[:head] + marker + text[len(text) - (keep - head):]


def _bounded_details(details: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(details)
    causes = out.get("causes")
    if isinstance(causes, list):
        kept = [dict(c) for c in causes[:MAX_CAUSES]]
        for cause in kept:
            if isinstance(cause.get("message"), str):
                cause["message"] = truncate(cause["message"], MAX_CAUSE_MESSAGE)
            if isinstance(cause.get("field"), str):
                cause["field"] = truncate(cause["field"], MAX_CAUSE_MESSAGE)
        if len(causes) > MAX_CAUSES:
            kept.append({"reason": "FieldValueTooMany",
                         "message": f"{len(causes) - MAX_CAUSES} more causes left out", "field": ""})
        out["causes"] = kept
    return out


class StatusError(Exception):
    """A failure answered to the client as a ``Status`` object."""

    def __init__(self, code: int, reason: str, message: str, *, details: Mapping[str, Any] | None = None,
                 headers: Mapping[str, str] | None = None, metadata: Mapping[str, Any] | None = None) -> None:
        message = truncate(message, MAX_MESSAGE)
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = _bounded_details(details) if details is not None else None  # {} is sent: kubectl reads it
        self.headers = dict(headers) if headers else {}
        self.metadata = dict(metadata) if metadata else {}

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": self.metadata,
                                "status": "Failure", "message": self.message, "reason": self.reason}
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    def response(self) -> web.Response:
        return web.Response(status=self.code, body=json_body(self.status()), content_type="application/json",
                            headers=self.headers)


def _details(info: ResourceInfo | None, name: str, *, kind: str | None = None,
             causes: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if info is not None and info.group:
        details["group"] = info.group
    details["kind"] = kind if kind is not None else (info.plural if info else "")
    if causes:
        details["causes"] = [dict(c) for c in causes]
    return details


def resource_label(info: ResourceInfo) -> str:
    """``plural`` or ``plural.group``, as kube-apiserver names a resource in messages."""
    return f"{info.plural}.{info.group}" if info.group else info.plural


def not_found(info: ResourceInfo, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{resource_label(info)} "{name}" not found', details=_details(info, name))


def namespace_not_found(name: str) -> StatusError:
    return StatusError(404, "NotFound", f'namespaces "{name}" not found',
                       details={"name": name, "kind": "namespaces"})


def route_not_found() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", details={})


def already_exists(info: ResourceInfo, name: str) -> StatusError:
    return StatusError(409, "AlreadyExists", f'{resource_label(info)} "{name}" already exists',
                       details=_details(info, name))


def generate_name_conflict(info: ResourceInfo, name: str) -> StatusError:
    """kube's ``NewGenerateNameConflict``: the name the server generated from ``generateName`` is taken (409
    AlreadyExists, ``retryAfterSeconds`` 1, which the response also sends as ``Retry-After``)."""
    return StatusError(409, "AlreadyExists", f'{resource_label(info)} "{name}" already exists, the server was not '
                       "able to generate a unique name for the object",
                       details={**_details(info, name), "retryAfterSeconds": 1}, headers={"Retry-After": "1"})


def conflict(info: ResourceInfo, name: str, why: str | None = None) -> StatusError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return StatusError(409, "Conflict", f'Operation cannot be fulfilled on {resource_label(info)} "{name}": {why}',
                       details=_details(info, name))


def invalid(info: ResourceInfo, name: str, causes: Sequence[Mapping[str, Any]]) -> StatusError:
    parts = []
    for c in causes:
        field = c.get("field", "")
        parts.append(f"{field}: {c.get('message', '')}" if field else str(c.get("message", "")))
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    return StatusError(422, "Invalid", f'{info.kind} "{name}" is invalid: {summary}',
                       details=_details(info, name, kind=info.kind, causes=causes))


def forbidden(info: ResourceInfo, name: str, why: str) -> StatusError:
    """What kube's admission and registry checks answer when a write is refused: a 403 naming the object."""
    return StatusError(403, "Forbidden", f'{resource_label(info)} "{name}" is forbidden: {why}',
                       details=_details(info, name))


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def method_not_allowed() -> StatusError:
    return StatusError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource",
                       details={})


def subresource_not_served(info: ResourceInfo, name: str, subresource: str) -> StatusError:
    """A subresource discovery lists that this server cannot serve: those of a kubelet, or not implemented."""
    what = f"{resource_label(info)}/{subresource}"
    if subresource in KUBELET_SUBRESOURCES:
        return StatusError(400, "BadRequest", f"{what} needs the kubelet of the node running the object, and this "
                           "API server has no nodes or kubelets: logs, exec, attach, port-forward and proxy are not "
                           "available", details=_details(info, name))
    return StatusError(405, "MethodNotAllowed", f"{what} is not implemented by this API server",
                       details=_details(info, name))


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                       f"accepted media types include: application/json, application/yaml, "
                       f"application/vnd.kubernetes.protobuf (got {content_type})")


def expired(message: str, *, continue_token: str | None = None) -> StatusError:
    meta = {"continue": continue_token} if continue_token else None
    return StatusError(410, "Expired", message, metadata=meta)


def too_large_rv(requested: int) -> StatusError:
    return StatusError(504, "Timeout", f"Too large resource version: {requested}, current: unknown",
                       details={"causes": [{"reason": "ResourceVersionTooLarge",
                                            "message": "Too large resource version"}], "retryAfterSeconds": 1},
                       headers={"Retry-After": "1"})


def too_many_requests() -> StatusError:
    return StatusError(429, "TooManyRequests", "Too many requests, please try again later.",
                       details={"retryAfterSeconds": 1}, headers={"Retry-After": "1"})


def internal_error(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}",
                       details={"causes": [{"message": message}]})


def success(info: ResourceInfo, name: str, uid: str | None) -> dict[str, Any]:
    """The ``Status`` a successful delete answers with (for kinds that do not return the object)."""
    details = _details(info, name)
    if uid:
        details["uid"] = uid
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

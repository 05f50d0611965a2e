"""AdmissionReview (admission.k8s.io/v1) and ConversionReview (apiextensions.k8s.io/v1) on the webhook side.

A validating handler gets an :class:`AdmissionRequest` and allows by returning, denies by raising
:class:`Denied` (or any :class:`kinformer.errors.APIError`, whose code and message are passed on).
A mutating handler gets a plain, mutable copy of the object and returns the object it wants stored
(or ``None`` after changing it in place); kinformer computes the RFC 6902 JSONPatch the API server
applies. Either may add warnings with :meth:`AdmissionRequest.warn`; the API server passes them to
the client as ``Warning`` headers.

Invariants:

* every review answered carries the request's ``uid`` (the API server rejects a response without it);
* a handler's unexpected exception is a denial with code 500 and the exception's message, never a
  malformed review; the webhook server logs it;
* warnings are capped (:data:`MAX_WARNINGS` of at most :data:`MAX_WARNING_LENGTH` characters), as the
  API server would truncate them anyway.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson

from kinformer.errors import APIError, Forbidden

__all__ = [
    "AdmissionRequest",
    "BadReview",
    "Denied",
    "admission_response",
    "conversion_response",
    "json_patch",
    "parse_admission_review",
    "parse_conversion_review",
]

MAX_WARNINGS = 32
MAX_WARNING_LENGTH = 256


class BadReview(ValueError):
    """The body is not a review this endpoint understands; answered with HTTP 400."""


_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid",
            429: "TooManyRequests"}


class Denied(Forbidden):
    """Raised by a handler to deny the request with its message.

    ``code`` is 403 unless given (e.g. ``code=422``); ``reason`` defaults to the code's usual reason, so
    the client sees the error class it expects (422 -> Invalid).
    """

    def __init__(self, message: str, *, code: int = 403, reason: str | None = None) -> None:
        super().__init__(message, code=code, reason=reason if reason is not None else _REASONS.get(code, ""))


@dataclass(slots=True)
class AdmissionRequest:
    """The ``request`` of an AdmissionReview, with the names Python users expect.

    ``object`` and ``old_object`` are plain dicts (``None`` where the operation has none: no object on
    DELETE, no old object on CREATE).
    """

    uid: str
    operation: str
    kind: dict[str, str]
    resource: dict[str, str]
    sub_resource: str
    name: str
    namespace: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    user_info: dict[str, Any]
    dry_run: bool
    options: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False)
    warnings: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        """Add a warning the client will see (kubectl prints it as ``Warning: ...``)."""
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(message[:MAX_WARNING_LENGTH])


def _review(body: bytes, kind: str, api_version: str) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(f"request body is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != kind or doc.get("apiVersion") != api_version:
        raise BadReview(f"expected a {api_version} {kind}")
    request = doc.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str) or not request["uid"]:
        raise BadReview(f"{kind} has no request with a uid")
    return request


def _dict_or_none(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def parse_admission_review(body: bytes) -> AdmissionRequest:
    """Decode an admission.k8s.io/v1 AdmissionReview request; raise :class:`BadReview` if it is not one."""
    req = _review(body, "AdmissionReview", "admission.k8s.io/v1")
    return AdmissionRequest(
        uid=req["uid"], operation=str(req.get("operation", "")),
        kind=dict(req.get("kind") or {}), resource=dict(req.get("resource") or {}),
        sub_resource=str(req.get("subResource", "")), name=str(req.get("name", "")),
        namespace=str(req.get("namespace", "")),
        object=_dict_or_none(req.get("object")), old_object=_dict_or_none(req.get("oldObject")),
        user_info=dict(req.get("userInfo") or {}), dry_run=bool(req.get("dryRun", False)),
        options=_dict_or_none(req.get("options")), raw=req)


def json_patch(original: Mapping[str, Any], mutated: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The RFC 6902 operations that turn ``original`` into ``mutated`` (empty when they are equal)."""
    return list(jsonpatch.make_patch(dict(original), dict(mutated)).patch)


def admission_response(request: AdmissionRequest, *, allowed: bool = True, code: int = 200, message: str = "",
                       reason: str = "", patch: list[dict[str, Any]] | None = None) -> bytes:
    """The AdmissionReview answering ``request`` (with a JSONPatch when ``patch`` has operations)."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": allowed}
    if not allowed or message:
        status: dict[str, Any] = {"code": code, "message": message}
        if not allowed:
            status["status"] = "Failure"
        if reason:
            status["reason"] = reason
        response["status"] = status
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    if request.warnings:
        response["warnings"] = list(request.warnings)
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})


def denial(request: AdmissionRequest, exc: BaseException) -> bytes:
    """The response for a handler that raised: an APIError (:class:`Denied` among them) keeps its code, else 500."""
    if isinstance(exc, APIError):
        return admission_response(request, allowed=False, code=exc.code, message=exc.message, reason=exc.reason)
    return admission_response(request, allowed=False, code=500, message=f"webhook handler failed: {exc}",
                              reason="InternalError")


@dataclass(slots=True)
class ConversionRequest:
    """The ``request`` of a ConversionReview: objects to convert to ``desired_api_version``."""

    uid: str
    desired_api_version: str
    objects: list[dict[str, Any]]


def parse_conversion_review(body: bytes) -> ConversionRequest:
    """Decode an apiextensions.k8s.io/v1 ConversionReview request; raise :class:`BadReview` if it is not one."""
    req = _review(body, "ConversionReview", "apiextensions.k8s.io/v1")
    desired = req.get("desiredAPIVersion")
    objects = req.get("objects")
    if not isinstance(desired, str) or "/" not in desired:
        raise BadReview("ConversionReview has no desiredAPIVersion group/version")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise BadReview("ConversionReview objects must be a list of objects")
    return ConversionRequest(uid=req["uid"], desired_api_version=desired, objects=objects)


def conversion_response(request: ConversionRequest, converted: list[dict[str, Any]] | None,
                        error: str = "") -> bytes:
    """The ConversionReview answering ``request``: Success with ``converted``, or Failure with ``error``."""
    response: dict[str, Any] = {"uid": request.uid}
    if error or converted is None:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": error or "conversion failed"}
    else:
        response["convertedObjects"] = converted
        response["result"] = {"status": "Success"}
    return orjson.dumps({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                         "response": response})


def mutable_copy(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep, plain copy a mutating handler may change freely (the original stays for the diff)."""
    return copy.deepcopy(dict(obj or {}))

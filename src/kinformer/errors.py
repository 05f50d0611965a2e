"""Typed exceptions carrying a Kubernetes ``Status``.

The server answers errors with a ``Status`` object; the client turns it into one of these classes
(:func:`from_status`), keeping the server's message, reason, details and causes. The reflector uses
:func:`is_expired` and :func:`is_too_large_resource_version` to decide between relisting and backing off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KinformerError(Exception):
    """Base class of every kinformer exception."""


class SelectorError(KinformerError, ValueError):
    """A label or field selector that does not parse; ``position`` is the offset of the offending token."""

    position: int | None = None


class APIError(KinformerError):
    """An error answered by the API server, with its ``Status`` object."""

    code: int = 500
    reason: str = "InternalError"

    def __init__(self, message: str = "", *, status: Mapping[str, Any] | None = None, code: int | None = None,
                 reason: str | None = None, retry_after: float | None = None) -> None:
        status = dict(status or {})
        self.status: dict[str, Any] = status
        self.message: str = message or status.get("message", "") or self.__class__.__name__
        if code is not None:
            self.code = code
        elif isinstance(status.get("code"), int):
            self.code = status["code"]
        if reason is not None:
            self.reason = reason
        elif status.get("reason"):
            self.reason = status["reason"]
        self.retry_after = retry_after
        super().__init__(f"{self.code} {self.reason}: {self.message}")

    @property
    def details(self) -> dict[str, Any]:
        return self.status.get("details") or {}

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list(self.details.get("causes") or [])


class BadRequest(APIError):
    code, reason = 400, "BadRequest"


class Unauthorized(APIError):
    code, reason = 401, "Unauthorized"


class Forbidden(APIError):
    code, reason = 403, "Forbidden"


class NotFound(APIError):
    code, reason = 404, "NotFound"


class MethodNotAllowed(APIError):
    code, reason = 405, "MethodNotAllowed"


class AlreadyExists(APIError):
    code, reason = 409, "AlreadyExists"


class Conflict(APIError):
    code, reason = 409, "Conflict"


class Expired(APIError):
    """410 Gone: the resourceVersion or continue token is older than the server's history."""

    code, reason = 410, "Expired"


Gone = Expired


class UnsupportedMediaType(APIError):
    code, reason = 415, "UnsupportedMediaType"


class Invalid(APIError):
    """422: the object failed validation; ``causes`` names the fields."""

    code, reason = 422, "Invalid"


class TooManyRequests(APIError):
    """429: back off for ``retry_after`` seconds."""

    code, reason = 429, "TooManyRequests"


class ServerError(APIError):
    code, reason = 500, "InternalError"


class ServerTimeout(APIError):
    """504 Timeout, e.g. a resourceVersion ahead of the server (cause ResourceVersionTooLarge)."""

    code, reason = 504, "Timeout"


_BY_REASON: dict[str, type[APIError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "MethodNotAllowed": MethodNotAllowed,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Expired": Expired,
    "Gone": Expired,
    "UnsupportedMediaType": UnsupportedMediaType,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "InternalError": ServerError,
    "Timeout": ServerTimeout,
}

_BY_CODE: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Expired,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    504: ServerTimeout,
}


def from_status(status: Mapping[str, Any] | None, code: int | None = None,
                retry_after: float | None = None) -> APIError:
    """Build the typed exception for a ``Status`` body (or a bare HTTP code when there is none)."""
    status = status or {}
    code = code if code is not None else status.get("code")
    reason = status.get("reason") or ""
    cls = _BY_REASON.get(reason)
    if cls is None or (cls is Conflict and reason == "AlreadyExists"):
        cls = _BY_CODE.get(code or 0, ServerError if (code or 500) >= 500 else APIError)
    return cls(status.get("message", ""), status=status, code=code, reason=reason or None,
               retry_after=retry_after)


def is_expired(err: BaseException) -> bool:
    """True for 410 Gone / reason Expired (the reflector must relist)."""
    return isinstance(err, APIError) and (err.code == 410 or err.reason in ("Expired", "Gone"))


def is_too_large_resource_version(err: BaseException) -> bool:
    """True when the server says the requested resourceVersion is ahead of it."""
    if not isinstance(err, APIError):
        return False
    if any(c.get("reason") == "ResourceVersionTooLarge" for c in err.causes):
        return True
    return "too large resource version" in err.message.lower()

"""Who may read ``/metrics``: bearer tokens authenticated by TokenReview, access by SubjectAccessReview.

As controller-runtime's ``filters.WithAuthenticationAndAuthorization``: the scraper's ``Authorization: Bearer``
token is sent to the API server in a ``TokenReview`` (no token, or one the server does not authenticate: 401);
the user it names must be allowed the request's verb (``get``) on the non-resource URL (``/metrics``), asked in a
``SubjectAccessReview`` (not allowed: 403). The server is asked again only when a cached answer expires: token
reviews after ``token_ttl`` (60 s), allowed access after ``allow_ttl`` (5 min), denied access after ``deny_ttl``
(30 s), on the Manager's clock. Each cache keeps at most ``max_entries`` answers (the oldest go first), so
scrapes with ever new tokens cannot grow it without bound. Tokens are kept only as SHA-256 digests.

The Manager's own identity needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (the built-in
ClusterRole ``system:auth-delegator``); a scraper needs ``get`` on the non-resource URL ``/metrics``. A failure
to ask the API server answers 500 and is logged.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kinformer.clock import REAL_CLOCK, Clock
from kinformer.errors import APIError

__all__ = ["MetricsAuth", "Verdict"]

log = logging.getLogger(__name__)

V = TypeVar("V")

TOKEN_REVIEWS = "authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The HTTP status to answer (200: serve the metrics) and the message of a refusal."""

    status: int
    message: str = ""


class _TTLCache(Generic[V]):
    """Answers that expire, at most ``max_entries`` of them (insertion order: the oldest is dropped first)."""

    def __init__(self, clock: Clock, max_entries: int) -> None:
        self.clock = clock
        self.max_entries = max_entries
        self._entries: dict[Hashable, tuple[float, V]] = {}

    def get(self, key: Hashable) -> tuple[bool, V | None]:
        found = self._entries.get(key)
        if found is None:
            return False, None
        if self.clock.now() >= found[0]:
            del self._entries[key]
            return False, None
        return True, found[1]

    def put(self, key: Hashable, value: V, ttl: float) -> None:
        self._entries.pop(key, None)
        while len(self._entries) >= self.max_entries:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (self.clock.now() + ttl, value)

    def __len__(self) -> int:
        return len(self._entries)


def _bearer(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class MetricsAuth:
    """Decides whether a request for the metrics may be served (see the module docstring)."""

    def __init__(self, client: Any, *, clock: Clock = REAL_CLOCK, token_ttl: float = 60.0, allow_ttl: float = 300.0,
                 deny_ttl: float = 30.0, max_entries: int = 1024) -> None:
        self.client = client
        self.token_ttl, self.allow_ttl, self.deny_ttl = token_ttl, allow_ttl, deny_ttl
        self._users: _TTLCache[Mapping[str, Any] | None] = _TTLCache(clock, max_entries)
        self._access: _TTLCache[bool] = _TTLCache(clock, max_entries)

    async def check(self, authorization: str | None, method: str, path: str) -> Verdict:
        """The verdict for a request with header ``Authorization: authorization`` for ``method path``."""
        token = _bearer(authorization)
        if token is None:
            return Verdict(401, "Unauthorized")
        try:
            user = await self._authenticate(token)
        except (APIError, OSError) as exc:
            log.error("metrics: authentication failed: %s", exc)
            return Verdict(500, "Authentication failed")
        if user is None:
            return Verdict(401, "Unauthorized")
        name = str(user.get("username", ""))
        try:
            allowed = await self._authorize(user, method.lower(), path)
        except (APIError, OSError) as exc:
            log.error("metrics: authorization for user %s failed: %s", name, exc)
            return Verdict(500, f"Authorization for user {name} failed")
        if not allowed:
            return Verdict(403, f"Authorization denied for user {name}")
        return Verdict(200)

    async def _authenticate(self, token: str) -> Mapping[str, Any] | None:
        """The user a TokenReview finds for ``token`` (None: not authenticated)."""
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        hit, user = self._users.get(key)
        if hit:
            return user
        review = await self.client.create(TOKEN_REVIEWS, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        status = review.get("status") or {}
        user = dict(status.get("user") or {}) if status.get("authenticated") else None
        self._users.put(key, user, self.token_ttl)
        return user

    async def _authorize(self, user: Mapping[str, Any], verb: str, path: str) -> bool:
        """Whether a SubjectAccessReview allows ``user`` ``verb`` on the non-resource URL ``path``."""
        groups = tuple(sorted(user.get("groups") or ()))
        extra = {k: list(v) for k, v in (user.get("extra") or {}).items()}
        key = (user.get("username", ""), user.get("uid", ""), groups,
               tuple(sorted((k, tuple(v)) for k, v in extra.items())), verb, path)
        hit, allowed = self._access.get(key)
        if hit:
            return bool(allowed)
        spec: dict[str, Any] = {"user": user.get("username", ""), "groups": list(groups),
                                "nonResourceAttributes": {"path": path, "verb": verb}}
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if extra:
            spec["extra"] = extra
        review = await self.client.create(ACCESS_REVIEWS, {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        allowed = bool((review.get("status") or {}).get("allowed"))
        self._access.put(key, allowed, self.allow_ttl if allowed else self.deny_ttl)
        return allowed

"""Authentication for the embedded API server: client certificates, bearer tokens, ServiceAccount tokens.

As in kube's union authenticator a verified client certificate is tried first (user = its CN, groups = its O
values; the TLS handshake has already checked it against the client CA), then ``Authorization: Bearer
<token>`` against the static tokens and then each token authenticator (ServiceAccount JWTs). Every
authenticated user is in ``system:authenticated``. What the user may do is the authorizer's business
(:mod:`kinformer.server.auth.authorization`, :mod:`kinformer.server.auth.rbac`).

Invariants:

* With authentication configured, a credential that fails (a bearer token no authenticator knows, an
  expired or revoked ServiceAccount token) is answered ``401`` on every path, before authorization, as kube's
  union authenticator fails the request. A request without credentials is ``system:anonymous`` (group
  ``system:unauthenticated``), which RBAC then judges (kube's ``system:public-info-viewer`` opens health and
  ``/version`` to it; ``/api`` is a 403); with ``anonymous=False`` (kube's ``--anonymous-auth=false``) it is
  a ``401`` everywhere.
* Without authentication configured (``default_user`` given: an in-process server, ``--no-tls``), a request
  without credentials is that user (the admin, in ``system:masters``). A ServiceAccount token is still
  checked: a valid one is its ServiceAccount, an invalid one is ``401``; other bearer tokens are ignored.
* Static tokens are compared through their SHA-256 digests in a dict, so the lookup time does not depend
  on how much of a guessed token matches a real one. Credentials are never logged nor stored on the request.
* The user is stored as ``request[USER_KEY]`` (a :class:`UserInfo`) and in :data:`CURRENT_USER` for the
  handler's task (registry hooks such as RBAC escalation checks read it there).
"""

from __future__ import annotations

import contextvars
import csv
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import hdrs, web

from ..machinery import status as st

__all__ = [
    "ADMIN",
    "ANONYMOUS",
    "AUTHENTICATED_GROUP",
    "CURRENT_USER",
    "PUBLIC_PATHS",
    "USER_KEY",
    "Authenticator",
    "InvalidToken",
    "UserInfo",
    "authentication_middleware",
    "load_token_file",
    "token_auth_middleware",
    "unauthorized",
    "user_from_peercert",
]

# Exact paths, and prefixes followed by "/", reachable without credentials.
PUBLIC_PATHS: frozenset[str] = frozenset({"/healthz", "/livez", "/readyz", "/version"})

_UNAUTHORIZED = st.json_body({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who a request is from, as kube's ``user.Info``: name, uid, groups and extra values."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    def with_group(self, group: str) -> UserInfo:
        """This user, also in ``group``."""
        if group in self.groups:
            return self
        return UserInfo(self.name, self.uid, (*self.groups, group), self.extra)

    def to_dict(self) -> dict[str, Any]:
        """The authentication.k8s.io/v1 ``UserInfo`` form (empty fields left out)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
ANONYMOUS = UserInfo(name="system:anonymous", groups=(UNAUTHENTICATED_GROUP,))
# Who every request is when the server has no authentication configured.
ADMIN = UserInfo(name="kinformer-admin", uid="kinformer-admin", groups=("system:masters", AUTHENTICATED_GROUP))

# The user of the request the current task serves (set by the authentication middleware).
CURRENT_USER: contextvars.ContextVar[UserInfo | None] = contextvars.ContextVar("kinformer_user", default=None)


class InvalidToken(Exception):
    """A token authenticator recognised a token as its own and rejects it (expired, revoked, bad signature)."""


# A token authenticator: the user of a bearer token, None when the token is not of its kind.
TokenAuthenticator = Callable[[str], UserInfo | None]


# Where the authenticated user is kept on the request: ``request[USER_KEY]``.
USER_KEY: Any = web.RequestKey("user", UserInfo) if hasattr(web, "RequestKey") else "user"


def load_token_file(path: str | os.PathLike[str]) -> dict[str, UserInfo]:
    """Read kube-apiserver's static token CSV: ``token,user,uid[,"group1,group2"]`` per line.

    Blank lines and lines starting with ``#`` are skipped. Raises ``ValueError`` (naming the line) for a
    line with fewer than three columns or an empty token, and for a token listed twice.
    """
    tokens: dict[str, UserInfo] = {}
    with Path(path).open(newline="", encoding="utf-8") as f:
        for lineno, row in enumerate(csv.reader(f), start=1):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            if len(row) < 3:
                raise ValueError(f"{path}:{lineno}: expected token,user,uid[,groups], got {len(row)} column(s)")
            token, user, uid = (c.strip() for c in row[:3])
            if not token or not user:
                raise ValueError(f"{path}:{lineno}: empty token or user name")
            if token in tokens:
                raise ValueError(f"{path}:{lineno}: duplicate token")
            groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
            tokens[token] = UserInfo(name=user, uid=uid, groups=groups)
    return tokens


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _users(tokens: Mapping[str, str | UserInfo] | Iterable[str]) -> dict[bytes, UserInfo]:
    items: Iterable[tuple[str, str | UserInfo]]
    if isinstance(tokens, Mapping):
        items = tokens.items()
    else:
        items = ((t, ADMIN) for t in tokens)
    users: dict[bytes, UserInfo] = {}
    for token, user in items:
        if not token:
            raise ValueError("empty bearer token")
        users[_digest(token)] = user if isinstance(user, UserInfo) else UserInfo(name=str(user))
    return users


def is_public(path: str) -> bool:
    """True for the anonymous-readable paths (``/healthz``, ``/healthz/ping``, ``/version/``, ...)."""
    if path in PUBLIC_PATHS:
        return True
    head, sep, _ = path[1:].partition("/")
    return bool(sep) and f"/{head}" in PUBLIC_PATHS


def user_from_peercert(peercert: Mapping[str, Any] | None) -> UserInfo | None:
    """The user a verified peer certificate (``SSLObject.getpeercert()``) names: CN -> name, each O -> a group.

    None when there is no certificate or it has no common name.
    """
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject") or ():
        for attr, value in rdn:
            if attr == "commonName" and not name:
                name = value
            elif attr == "organizationName":
                groups.append(value)
    return UserInfo(name=name, groups=tuple(groups)) if name else None


def _peer_user(request: web.Request) -> UserInfo | None:
    transport = request.transport
    if transport is None:
        return None
    try:
        return user_from_peercert(transport.get_extra_info("peercert"))
    except (ValueError, AttributeError):  # not TLS, or the handshake is gone
        return None


def unauthorized() -> web.Response:
    """kube's 401 answer (a Status with ``WWW-Authenticate``)."""
    return web.Response(status=401, body=_UNAUTHORIZED, content_type="application/json",
                        headers={"WWW-Authenticate": 'Bearer realm="kinformer"'})


def bearer_token(request: web.Request) -> str:
    """The request's ``Authorization: Bearer`` credential, or ""."""
    return _bearer_credential(request.headers.get(hdrs.AUTHORIZATION, ""))


def _bearer_credential(header: str) -> str:
    scheme, _, credential = header.partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else ""


class Authenticator:
    """Who a request is from (see the module invariants); :meth:`authenticate` raises :class:`InvalidToken`."""

    def __init__(self, tokens: Mapping[str, str | UserInfo] | Iterable[str] | None = None, *,
                 client_certs: bool = False, token_authenticators: Sequence[TokenAuthenticator] = (),
                 default_user: UserInfo | None = None, anonymous: bool = True) -> None:
        self.users = _users(tokens) if tokens else {}
        self.anonymous = anonymous
        self.client_certs = client_certs
        self.token_authenticators = list(token_authenticators)
        self.default_user = default_user

    def add_token(self, token: str, user: UserInfo) -> None:
        """Accept ``token`` as ``user`` from now on (how the test fixtures mint a client for any identity)."""
        self.users.update(_users({token: user}))

    def authenticate_token(self, token: str) -> UserInfo | None:
        """The user of a bearer token; None when no authenticator knows it."""
        user = self.users.get(_digest(token))
        if user is None:
            for authenticate in self.token_authenticators:
                user = authenticate(token)
                if user is not None:
                    break
        return user.with_group(AUTHENTICATED_GROUP) if user is not None else None

    def authenticate(self, request: web.Request) -> UserInfo | None:
        """The request's user: certificate, then token, then the default user or the anonymous user.

        None: no credential and anonymous requests are off (401). Raises :class:`InvalidToken` for a bearer
        token no authenticator accepts when authentication is configured (no ``default_user``).
        """
        if self.client_certs:
            user = _peer_user(request)
            if user is not None:
                return user.with_group(AUTHENTICATED_GROUP)
        header = request.headers.get(hdrs.AUTHORIZATION)  # most requests of a server without tokens have none
        token = _bearer_credential(header) if header else ""
        if token:
            user = self.authenticate_token(token)
            if user is not None:
                return user
            if self.default_user is None:
                raise InvalidToken("invalid bearer token")
        if self.default_user is not None:
            return self.default_user
        return ANONYMOUS if self.anonymous else None


RequestHook = Callable[[web.Request, UserInfo], Awaitable[UserInfo]]


def authentication_middleware(tokens: Mapping[str, str | UserInfo] | Iterable[str] | None = None, *,
                              client_certs: bool = False, authenticator: Authenticator | None = None,
                              impersonate: RequestHook | None = None) -> Callable[..., Awaitable]:
    """An aiohttp middleware authenticating each request (see the module invariants).

    ``tokens`` maps token -> user name (or :class:`UserInfo`, as :func:`load_token_file` returns), or is
    a plain collection of tokens; the set is fixed when the middleware is made. Client certificates are
    only seen when the server's TLS context asks for them (``server_ssl_context(..., client_ca=...)``).
    ``impersonate`` (kube's impersonation filter) may replace the authenticated user; it raises a
    ``StatusError`` to refuse. Having no authorizer behind it, it lets the anonymous user reach only the
    paths kube's ``system:public-info-viewer`` role opens (:data:`PUBLIC_PATHS`) and answers 401 elsewhere.
    """
    auth = authenticator or Authenticator(tokens, client_certs=client_certs)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            user = auth.authenticate(request)
        except InvalidToken:
            return unauthorized()
        if user is None or (user is ANONYMOUS and not is_public(request.path)):
            return unauthorized()
        if impersonate is not None:
            try:
                user = await impersonate(request, user)
            except st.StatusError as exc:  # a refusal: this middleware runs outside the error middleware
                return exc.response()
        request[USER_KEY] = user
        CURRENT_USER.set(user)
        return await handler(request)

    return middleware


def token_auth_middleware(tokens: Mapping[str, str | UserInfo] | Iterable[str]) -> Callable[..., Awaitable]:
    """An aiohttp middleware accepting only ``Authorization: Bearer <token>`` with one of ``tokens``.

    ``tokens`` maps token -> user name (or :class:`UserInfo`, as :func:`load_token_file` returns), or is
    a plain collection of tokens. The token set is fixed when the middleware is made.
    """
    return authentication_middleware(tokens)

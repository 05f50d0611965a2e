"""Authentication for the embedded API server: bearer tokens and TLS client certificates.

Every request must authenticate, except the paths that kube-apiserver's default RBAC
(``system:public-info-viewer``) lets anonymous users read: the health endpoints (``/healthz``,
``/livez``, ``/readyz`` and their sub-checks) and ``/version``. As in kube's union authenticator a
verified client certificate is tried first (user = its CN, groups = its O values; the TLS handshake
has already checked it against the client CA), then ``Authorization: Bearer <token>``. Without
either, or with an unknown token, the answer is ``401`` with an ``Unauthorized`` Status. What an
authenticated user may do is :mod:`kinformer.server.authz`'s business.

Tokens are compared through their SHA-256 digests in a dict, so the lookup time does not depend on how
much of a guessed token matches a real one. The authenticated user is stored on the request as
``request[USER_KEY]`` (a :class:`UserInfo`).
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

__all__ = ["PUBLIC_PATHS", "USER_KEY", "UserInfo", "authentication_middleware", "load_token_file",
           "token_auth_middleware", "user_from_peercert"]

# Exact paths, and prefixes followed by "/", reachable without credentials.
PUBLIC_PATHS: frozenset[str] = frozenset({"/healthz", "/livez", "/readyz", "/version"})

_UNAUTHORIZED = orjson.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": "Unauthorized", "reason": "Unauthorized", "code": 401})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class UserInfo:
    """Who a token belongs to, as in kube's static token file."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()


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
    if isinstance(tokens, Mapping):
        items = tokens.items()
    else:
        items = ((t, "kinformer-user") for t in tokens)
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


def _unauthorized() -> web.Response:
    return web.Response(status=401, body=_UNAUTHORIZED, content_type="application/json",
                        headers={"WWW-Authenticate": 'Bearer realm="kinformer"'})


def authentication_middleware(tokens: Mapping[str, str | UserInfo] | Iterable[str] | None = None, *,
                              client_certs: bool = False) -> Callable[..., Awaitable]:
    """An aiohttp middleware authenticating by verified client certificate (when ``client_certs``) or bearer token.

    ``tokens`` maps token -> user name (or :class:`UserInfo`, as :func:`load_token_file` returns), or is
    a plain collection of tokens; the set is fixed when the middleware is made. Client certificates are
    only seen when the server's TLS context asks for them (``server_ssl_context(..., client_ca=...)``).
    The user lands in ``request[USER_KEY]``; credentials are never logged nor stored on the request.
    """
    users = _users(tokens) if tokens else {}

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = _peer_user(request) if client_certs else None
        if user is None and users:
            header = request.headers.get("Authorization", "")
            scheme, _, credential = header.partition(" ")
            credential = credential.strip()
            if credential and scheme.lower() == "bearer":
                user = users.get(_digest(credential))
        if user is None:
            if is_public(request.path):
                return await handler(request)
            return _unauthorized()
        request[USER_KEY] = user
        return await handler(request)

    return middleware


def token_auth_middleware(tokens: Mapping[str, str | UserInfo] | Iterable[str]) -> Callable[..., Awaitable]:
    """An aiohttp middleware accepting only ``Authorization: Bearer <token>`` with one of ``tokens``.

    ``tokens`` maps token -> user name (or :class:`UserInfo`, as :func:`load_token_file` returns), or is
    a plain collection of tokens. The token set is fixed when the middleware is made.
    """
    return authentication_middleware(tokens)

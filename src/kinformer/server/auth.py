"""Bearer-token authentication for the embedded API server.

Every request must carry ``Authorization: Bearer <token>`` with a known token, except the paths that
kube-apiserver's default RBAC (``system:public-info-viewer``) lets anonymous users read: the health
endpoints (``/healthz``, ``/livez``, ``/readyz`` and their sub-checks) and ``/version``. A missing or
unknown token gets ``401`` with an ``Unauthorized`` Status; there is no authorization layer beyond
that (every authenticated user may do everything), matching a single-user development server.

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

__all__ = ["PUBLIC_PATHS", "USER_KEY", "UserInfo", "load_token_file", "token_auth_middleware"]

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


def token_auth_middleware(tokens: Mapping[str, str | UserInfo] | Iterable[str]) -> Callable[..., Awaitable]:
    """An aiohttp middleware accepting only ``Authorization: Bearer <token>`` with one of ``tokens``.

    ``tokens`` maps token -> user name (or :class:`UserInfo`, as :func:`load_token_file` returns), or is
    a plain collection of tokens. The token set is fixed when the middleware is made.
    """
    users = _users(tokens)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        header = request.headers.get("Authorization", "")
        scheme, _, credential = header.partition(" ")
        user = users.get(_digest(credential.strip())) if scheme.lower() == "bearer" and credential.strip() else None
        if user is None:
            if is_public(request.path):
                return await handler(request)
            return web.Response(status=401, body=_UNAUTHORIZED, content_type="application/json",
                                headers={"WWW-Authenticate": 'Bearer realm="kinformer"'})
        request[USER_KEY] = user
        return await handler(request)

    return middleware

"""Connection settings of a :class:`~kinformer.client.Client`: server URL, TLS and credentials.

Credentials come from an :class:`AuthProvider`: a static token, a token file re-read when it changes
(service-account tokens rotate), or an exec plugin (:mod:`kinformer.client.exec`). Providers hand out
headers per request and may be asked to refresh after a 401.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

__all__ = [
    "AuthProvider",
    "ClientConfig",
    "StaticTokenAuth",
    "TokenFileAuth",
    "build_ssl_context",
]


@runtime_checkable
class AuthProvider(Protocol):
    """Supplies credentials for requests."""

    async def headers(self) -> dict[str, str]:
        """Headers to add to the next request (e.g. ``Authorization``)."""
        ...

    async def refresh(self) -> bool:
        """Called after a 401: drop cached credentials. True if a retry may now succeed."""
        ...

    def configure_ssl(self, ctx: ssl.SSLContext) -> None:
        """Add client certificates the provider owns to ``ctx`` (no-op for token providers)."""
        ...


class StaticTokenAuth:
    """A fixed bearer token."""

    __slots__ = ("_headers",)

    def __init__(self, token: str) -> None:
        self._headers = {"Authorization": f"Bearer {token}"}

    async def headers(self) -> dict[str, str]:
        return self._headers

    async def refresh(self) -> bool:
        return False

    def configure_ssl(self, ctx: ssl.SSLContext) -> None:
        return None


class TokenFileAuth:
    """A bearer token read from a file, re-read when the file's mtime or size changes, and at least every
    ``recheck`` seconds (projected service-account tokens are rotated by the kubelet)."""

    __slots__ = ("_checked", "_clock", "_headers", "_stat", "path", "recheck")

    def __init__(self, path: str, recheck: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.recheck = recheck
        self._clock = clock
        self._stat: tuple[float, int] | None = None
        self._headers: dict[str, str] = {}
        self._checked = float("-inf")

    def _load(self, force: bool = False) -> None:
        st = os.stat(self.path)
        key = (st.st_mtime, st.st_size)
        now = self._clock()
        if force or key != self._stat or now - self._checked >= self.recheck:
            with open(self.path, encoding="utf-8") as f:
                token = f.read().strip()
            self._headers = {"Authorization": f"Bearer {token}"} if token else {}
            self._stat = key
            self._checked = now

    async def headers(self) -> dict[str, str]:
        self._load()
        return self._headers

    async def refresh(self) -> bool:
        old = self._headers
        self._load(force=True)
        return self._headers != old

    def configure_ssl(self, ctx: ssl.SSLContext) -> None:
        return None


@dataclass(slots=True)
class ClientConfig:
    """Everything needed to reach one API server.

    ``ca_file``/``ca_data`` (PEM) pin the server's CA; ``verify=False`` turns verification off
    (insecure-skip-tls-verify). Client certificates come from files or PEM data.
    """

    server: str
    auth: AuthProvider | None = None
    ca_file: str | None = None
    ca_data: str | bytes | None = None
    verify: bool = True
    tls_server_name: str | None = None
    client_cert_file: str | None = None
    client_key_file: str | None = None
    client_cert_data: str | bytes | None = None
    client_key_data: str | bytes | None = field(default=None, repr=False)  # never in logs or reprs
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may carry credentials
    default_namespace: str = "default"
    proxy_url: str | None = None


def _pem(data: str | bytes) -> str:
    return data.decode("ascii") if isinstance(data, bytes) else data


def load_cert_chain_data(ctx: ssl.SSLContext, cert_pem: str | bytes, key_pem: str | bytes) -> None:
    """``SSLContext.load_cert_chain`` for PEM held in memory (the stdlib only reads files: write private
    temporary files and remove them at once)."""
    with tempfile.TemporaryDirectory(prefix="kinformer-") as tmp:
        cert_path = os.path.join(tmp, "cert.pem")
        key_path = os.path.join(tmp, "key.pem")
        for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(_pem(data))
        ctx.load_cert_chain(cert_path, key_path)


def build_ssl_context(cfg: ClientConfig) -> ssl.SSLContext | bool:
    """The TLS context for ``cfg`` (``True`` = aiohttp's default for http:// URLs or plain defaults)."""
    if not cfg.server.startswith("https"):
        return True
    ctx = ssl.create_default_context()
    if cfg.ca_file or cfg.ca_data:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if cfg.ca_file:
            ctx.load_verify_locations(cafile=cfg.ca_file)
        if cfg.ca_data:
            ctx.load_verify_locations(cadata=_pem(cfg.ca_data))
    if not cfg.verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.client_cert_file:
        ctx.load_cert_chain(cfg.client_cert_file, cfg.client_key_file)
    elif cfg.client_cert_data and cfg.client_key_data:
        load_cert_chain_data(ctx, cfg.client_cert_data, cfg.client_key_data)
    if cfg.auth is not None:
        cfg.auth.configure_ssl(ctx)
    return ctx


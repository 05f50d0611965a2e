"""Exec credential plugins (``users[].user.exec`` in a kubeconfig).

The plugin is a command that prints an ``ExecCredential`` (``client.authentication.k8s.io/v1`` or
``v1beta1``) on stdout. Its token or client certificate is cached until ``status.expirationTimestamp``
(forever when absent) and the command is run again after expiry or when the server answers 401.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from kinformer.client.config import load_cert_chain_data
from kinformer.errors import KinformerError

__all__ = ["ExecCredentialError", "ExecCredentialProvider"]

_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")


class ExecCredentialError(KinformerError):
    """The exec plugin failed or printed something that is not a valid ExecCredential."""


def _parse_time(value: str) -> float:
    """RFC 3339 -> epoch seconds."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = _dt.datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_dt.UTC)
    return parsed.timestamp()


class ExecCredentialProvider:
    """An :class:`~kinformer.client.config.AuthProvider` backed by an exec plugin.

    Invariant: at most one plugin run at a time; callers waiting meanwhile share its result.
    """

    def __init__(self, spec: Mapping[str, Any], *, cluster: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.time, base_dir: str | None = None) -> None:
        command = spec.get("command")
        if not command:
            raise ExecCredentialError("exec plugin: 'command' is required")
        self.api_version: str = spec.get("apiVersion") or _API_VERSIONS[0]
        if self.api_version not in _API_VERSIONS:
            raise ExecCredentialError(f"exec plugin: unsupported apiVersion {self.api_version!r}")
        if base_dir and os.sep in command and not os.path.isabs(command):
            command = os.path.join(base_dir, command)  # relative paths resolve against the kubeconfig
        self.command: str = command
        self.args: list[str] = list(spec.get("args") or [])
        self.env: dict[str, str] = {e["name"]: e["value"] for e in spec.get("env") or []}
        self.install_hint: str = spec.get("installHint") or ""
        self.provide_cluster_info: bool = bool(spec.get("provideClusterInfo"))
        self.cluster = dict(cluster or {})
        self._clock = clock
        self._token: str | None = None
        self._cert: tuple[str, str] | None = None
        self._expiry: float | None = None
        self._loaded = False
        self._lock = asyncio.Lock()
        self._ssl_contexts: list[ssl.SSLContext] = []
        self.runs = 0

    def _exec_info(self) -> str:
        spec: dict[str, Any] = {"interactive": False}
        if self.provide_cluster_info and self.cluster:
            spec["cluster"] = self.cluster
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec})

    async def _run(self) -> None:
        env = dict(os.environ)
        env.update(self.env)
        env["KUBERNETES_EXEC_INFO"] = self._exec_info()
        try:
            proc = await asyncio.create_subprocess_exec(
                self.command, *self.args, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            hint = f" ({self.install_hint})" if self.install_hint else ""
            raise ExecCredentialError(f"exec plugin {self.command!r} could not run: {exc}{hint}") from exc
        out, err = await proc.communicate()
        self.runs += 1
        if proc.returncode != 0:
            raise ExecCredentialError(
                f"exec plugin {self.command!r} exited {proc.returncode}: {err.decode(errors='replace').strip()}")
        self._apply(out)

    def _apply(self, out: bytes) -> None:
        try:
            cred = json.loads(out)
        except ValueError as exc:
            raise ExecCredentialError(f"exec plugin {self.command!r} printed invalid JSON: {exc}") from exc
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise ExecCredentialError(f"exec plugin {self.command!r} did not print an ExecCredential")
        if cred.get("apiVersion") != self.api_version:
            raise ExecCredentialError(f"exec plugin {self.command!r} answered apiVersion {cred.get('apiVersion')!r},"
                                      f" expected {self.api_version!r}")
        status = cred.get("status") or {}
        token = status.get("token") or None
        cert, key = status.get("clientCertificateData"), status.get("clientKeyData")
        if not token and not (cert and key):
            raise ExecCredentialError(f"exec plugin {self.command!r}: status has neither token nor client certificate")
        expiry = status.get("expirationTimestamp")
        self._token = token
        new_cert = (cert, key) if cert and key else None
        cert_changed = new_cert is not None and new_cert != self._cert
        self._cert = new_cert
        self._expiry = _parse_time(expiry) if expiry else None
        self._loaded = True
        if cert_changed and new_cert is not None:
            for ctx in self._ssl_contexts:
                load_cert_chain_data(ctx, new_cert[0], new_cert[1])

    def _valid(self) -> bool:
        return self._loaded and (self._expiry is None or self._clock() < self._expiry)

    async def ensure(self) -> None:
        """Run the plugin unless cached credentials are still valid."""
        if self._valid():
            return
        async with self._lock:
            if not self._valid():
                await self._run()

    async def headers(self) -> dict[str, str]:
        await self.ensure()
        return {"Authorization": f"Bearer {self._token}"} if self._token else {}

    async def refresh(self) -> bool:
        self._loaded = False
        await self.ensure()
        return True

    def configure_ssl(self, ctx: ssl.SSLContext) -> None:
        """Remember ``ctx``; client certificates from the plugin are loaded into it (now and on rotation)."""
        self._ssl_contexts.append(ctx)
        if self._cert is not None:
            load_cert_chain_data(ctx, self._cert[0], self._cert[1])

    @property
    def provides_certificates(self) -> bool:
        return self._cert is not None

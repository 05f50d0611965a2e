"""Loading kubeconfig files into a :class:`~kinformer.client.config.ClientConfig`.

Rules follow kubectl: ``$KUBECONFIG`` is a list of files (``os.pathsep``-separated); they are merged so that
the first file to define a named cluster, user or context wins, and the first ``current-context`` set wins.
Relative file paths inside a file resolve against that file's directory.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kinformer.client.config import ClientConfig, StaticTokenAuth, TokenFileAuth
from kinformer.client.exec import ExecCredentialProvider
from kinformer.errors import KinformerError

__all__ = ["ConfigError", "KubeConfig", "default_kubeconfig_paths", "load_kubeconfig"]


class ConfigError(KinformerError):
    """A kubeconfig (or in-cluster environment) that cannot be used."""


def default_kubeconfig_paths(env: Mapping[str, str] | None = None) -> list[str]:
    """``$KUBECONFIG`` split on ``os.pathsep`` (empty entries dropped), else ``~/.kube/config``."""
    env = os.environ if env is None else env
    value = env.get("KUBECONFIG", "")
    if value:
        return [p for p in value.split(os.pathsep) if p]
    return [os.path.join(os.path.expanduser("~"), ".kube", "config")]


@dataclass
class _Entry:
    body: dict[str, Any]
    base_dir: str


@dataclass
class KubeConfig:
    """Merged kubeconfig: named clusters, users and contexts, each with the directory of its file."""

    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str | None = None

    @classmethod
    def load(cls, paths: list[str] | str | None = None) -> KubeConfig:
        """Read and merge ``paths`` (default: :func:`default_kubeconfig_paths`). Missing files in a
        ``$KUBECONFIG`` list are skipped, as kubectl does; if none exists, :class:`ConfigError`."""
        if paths is None:
            paths = default_kubeconfig_paths()
        elif isinstance(paths, str):
            paths = [paths]
        merged = cls()
        found = False
        for path in paths:
            path = os.path.expanduser(path)
            if not os.path.exists(path):
                continue
            found = True
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f) or {}
            if not isinstance(doc, dict):
                raise ConfigError(f"{path}: not a kubeconfig mapping")
            merged._merge(doc, os.path.dirname(os.path.abspath(path)))
        if not found:
            raise ConfigError(f"no kubeconfig found (looked at {', '.join(paths)})")
        return merged

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], base_dir: str = ".") -> KubeConfig:
        merged = cls()
        merged._merge(doc, base_dir)
        return merged

    def _merge(self, doc: Mapping[str, Any], base_dir: str) -> None:
        for section, target, inner in (("clusters", self.clusters, "cluster"), ("users", self.users, "user"),
                                       ("contexts", self.contexts, "context")):
            for item in doc.get(section) or []:
                name = item.get("name")
                if name is None or name in target:
                    continue
                target[name] = _Entry(dict(item.get(inner) or {}), base_dir)
        if not self.current_context and doc.get("current-context"):
            self.current_context = doc["current-context"]

    def client_config(self, context: str | None = None) -> ClientConfig:
        """The :class:`ClientConfig` for ``context`` (default: ``current-context``)."""
        name = context or self.current_context
        if not name:
            raise ConfigError("kubeconfig has no current-context and no context was given")
        if name not in self.contexts:
            raise ConfigError(f"context {name!r} not found in kubeconfig")
        ctx = self.contexts[name].body
        cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
        if cluster_name not in self.clusters:
            raise ConfigError(f"context {name!r}: cluster {cluster_name!r} not found")
        cluster = self.clusters[cluster_name]
        user = self.users.get(user_name) if user_name else None
        if user_name and user is None:
            raise ConfigError(f"context {name!r}: user {user_name!r} not found")
        cfg = _cluster_config(cluster.body, cluster.base_dir)
        cfg.default_namespace = ctx.get("namespace") or "default"
        if user is not None:
            _apply_user(cfg, user.body, user.base_dir, cluster.body)
        return cfg


def _path(base_dir: str, value: str) -> str:
    value = os.path.expanduser(value)
    return value if os.path.isabs(value) else os.path.join(base_dir, value)


def _b64(value: str) -> bytes:
    return base64.b64decode(value)


def _cluster_config(cluster: Mapping[str, Any], base_dir: str) -> ClientConfig:
    server = cluster.get("server")
    if not server:
        raise ConfigError("cluster has no server")
    cfg = ClientConfig(server=server.rstrip("/"))
    if cluster.get("certificate-authority-data"):
        cfg.ca_data = _b64(cluster["certificate-authority-data"]).decode("ascii")
    elif cluster.get("certificate-authority"):
        cfg.ca_file = _path(base_dir, cluster["certificate-authority"])
    cfg.verify = not cluster.get("insecure-skip-tls-verify", False)
    cfg.tls_server_name = cluster.get("tls-server-name") or None
    cfg.proxy_url = cluster.get("proxy-url") or None
    return cfg


def _exec_cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    info: dict[str, Any] = {"server": cluster.get("server")}
    for src, dst in (("certificate-authority-data", "certificate-authority-data"),
                     ("insecure-skip-tls-verify", "insecure-skip-tls-verify"),
                     ("tls-server-name", "tls-server-name"), ("proxy-url", "proxy-url")):
        if cluster.get(src) is not None:
            info[dst] = cluster[src]
    for ext in cluster.get("extensions") or []:
        if ext.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = ext.get("extension")
    return info


def _apply_user(cfg: ClientConfig, user: Mapping[str, Any], base_dir: str, cluster: Mapping[str, Any]) -> None:
    if user.get("client-certificate-data") and user.get("client-key-data"):
        cfg.client_cert_data = _b64(user["client-certificate-data"])
        cfg.client_key_data = _b64(user["client-key-data"])
    elif user.get("client-certificate"):
        cfg.client_cert_file = _path(base_dir, user["client-certificate"])
        cfg.client_key_file = _path(base_dir, user["client-key"]) if user.get("client-key") else None
    if user.get("token"):
        cfg.auth = StaticTokenAuth(user["token"])
    elif user.get("tokenFile"):
        cfg.auth = TokenFileAuth(_path(base_dir, user["tokenFile"]))
    elif user.get("exec"):
        cfg.auth = ExecCredentialProvider(user["exec"], cluster=_exec_cluster_info(cluster), base_dir=base_dir)
    elif user.get("username") and user.get("password"):
        raw = f"{user['username']}:{user['password']}".encode()
        cfg.headers["Authorization"] = "Basic " + base64.b64encode(raw).decode("ascii")
    elif user.get("auth-provider"):
        provider = (user["auth-provider"] or {}).get("name", "?")
        raise ConfigError(f"auth-provider {provider!r} is not supported (use an exec plugin)")
    if user.get("impersonate"):
        cfg.headers["Impersonate-User"] = user["impersonate"]


def load_kubeconfig(path: str | list[str] | None = None, context: str | None = None) -> ClientConfig:
    """Read kubeconfig file(s) and return the configuration of ``context`` (default: current-context)."""
    return KubeConfig.load(path).client_config(context)

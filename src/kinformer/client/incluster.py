"""In-cluster configuration: the pod's service account.

The API server address comes from ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``; the token and CA
from the service-account volume. The token file is re-read when it changes (projected tokens rotate).
Paths and environment are parameters so tests can point them elsewhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from kinformer.client.config import ClientConfig, TokenFileAuth
from kinformer.client.kubeconfig import ConfigError

__all__ = ["SERVICE_ACCOUNT_DIR", "in_cluster_config", "is_in_cluster"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def is_in_cluster(env: Mapping[str, str] | None = None, sa_dir: str = SERVICE_ACCOUNT_DIR) -> bool:
    """True when the service environment variables and the token file are present."""
    env = os.environ if env is None else env
    return bool(env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT")) and \
        os.path.exists(os.path.join(sa_dir, "token"))


def in_cluster_config(env: Mapping[str, str] | None = None, sa_dir: str = SERVICE_ACCOUNT_DIR,
                      token_recheck: float = 60.0) -> ClientConfig:
    """The :class:`ClientConfig` of the pod's service account (raises :class:`ConfigError` outside a pod)."""
    env = os.environ if env is None else env
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set")
    token_path = os.path.join(sa_dir, "token")
    if not os.path.exists(token_path):
        raise ConfigError(f"not in a cluster: {token_path} does not exist")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6 literal
    cfg = ClientConfig(server=f"https://{host}:{port}", auth=TokenFileAuth(token_path, recheck=token_recheck))
    ca_path = os.path.join(sa_dir, "ca.crt")
    if os.path.exists(ca_path):
        cfg.ca_file = ca_path
    ns_path = os.path.join(sa_dir, "namespace")
    if os.path.exists(ns_path):
        with open(ns_path, encoding="utf-8") as f:
            cfg.default_namespace = f.read().strip() or "default"
    return cfg

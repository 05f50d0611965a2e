"""``kinformer serve``: run the embedded API server until SIGTERM/SIGINT.

Safety rules: the server binds loopback by default; binding any other address requires TLS and
bearer tokens (exit status 2 otherwise). With TLS (the default) a CA, a serving certificate and an
admin bearer token are generated into ``--data`` once and reused across restarts, and a kubeconfig
using them is written, because kubectl never sends credentials to an ``http://`` server. With
``--no-tls`` on loopback the server speaks plain HTTP without authentication (unless a
``--token-file`` is given).

``--kubeconfig-auth cert`` writes the kubeconfig with an admin client certificate (CN
``kinformer-admin``, O ``system:masters``) issued by the generated CA, which is then trusted for client
certificates too (besides any ``--client-ca-file``). Users are authorized by RBAC (the bootstrap
roles, and the Roles and bindings written to the server; ``system:masters`` is unrestricted);
``--authorization-policy-file`` names a YAML/JSON file of RBAC objects written at every start (see
:mod:`kinformer.server.auth.bootstrappolicy`). Per-client limits are on
by default: ``--rate-limit-qps``/``--rate-limit-burst`` and ``--max-watches-per-client`` (0 turns
either off).

Several ``kinformer serve --storage etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`` processes on one etcd
cluster (same URL, a ``--port`` each) are replicas of one API server: each replica's watch cache
follows etcd, so a write through any replica is seen by all. With TLS, give them the same ``--data``
(start one first: it generates the CA and token the others reuse) and a ``--kubeconfig`` each.

``kinformer serve`` is a cluster that moves: it runs kube-controller-manager's controllers (those kinformer has)
and one simulated node with its kubelet (``--nodes N`` for more); ``--bare`` runs neither, an inert server as
envtest's. Replicas on one etcd should run the cluster in one of them only (``--bare`` for the others). Its
node-failure timings are kube's flags (:mod:`.clusterflags`: ``--node-monitor-grace-period``,
``--default-unreachable-toleration-seconds`` ...), and ``kubectl annotate node NAME kinformer.io/stopped=true``
stops a simulated node's kubelet (removing the annotation starts it again).

A data directory belongs to one server: ``kinformer serve`` locks it (:func:`lock_data_dir`) before writing
anything in it, and a second server on it exits with status 1 naming the directory. Replicas on etcd with a
``--kubeconfig`` each share the lock.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import fcntl
import ipaddress
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import yaml

__all__ = ["DataDirInUse", "add_arguments", "ensure_admin_token", "is_loopback", "lock_data_dir", "main",
           "write_kubeconfig"]

ADMIN_USER = "kinformer-admin"
ADMIN_GROUPS = ("system:masters", "system:authenticated")
DEFAULT_MAX_WATCHES = 100
DEFAULT_QPS = 500.0
DEFAULT_BURST = 1000
LOCK_FILE = "serve.lock"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``kinformer serve`` options."""
    from .storage.watchcache import DEFAULT_WATCHER_BUFFER_BYTES, DEFAULT_WATCHER_BUFFER_EVENTS

    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=6443, help="port to bind, 0 for any free port (default: 6443)")
    parser.add_argument("--data", default=".kinformer",
                        help="directory for the database, certificates, token and kubeconfig (default: ./.kinformer)")
    parser.add_argument("--storage", default=None,
                        help='storage URL: "memory", "sqlite:///path.db", "etcd://host:port[,host:port...][/prefix]" '
                             "(default: sqlite in --data); servers on one etcd are replicas of one API server")
    parser.add_argument("--kubeconfig", default=None, help="where to write the kubeconfig (default: DATA/kubeconfig)")
    parser.add_argument("--watch-cache-size", type=int, default=None, metavar="N",
                        help="events kept per resource in the watch cache")
    parser.add_argument("--watcher-buffer-events", type=int, default=DEFAULT_WATCHER_BUFFER_EVENTS, metavar="N",
                        help="events one watch may fall behind its client before it is ended (the client resumes "
                             f"from its last resourceVersion; default: {DEFAULT_WATCHER_BUFFER_EVENTS})")
    parser.add_argument("--watcher-buffer-bytes", type=int, default=DEFAULT_WATCHER_BUFFER_BYTES, metavar="B",
                        help="bytes of objects one watch may fall behind its client before it is ended "
                             f"(default: {DEFAULT_WATCHER_BUFFER_BYTES})")
    parser.add_argument("--token-file", default=None, metavar="F",
                        help='static token CSV (token,user,uid[,"group1,group2"]) accepted as bearer tokens')
    parser.add_argument("--tls", action=argparse.BooleanOptionalAction, default=True,
                        help="serve HTTPS with a generated CA and require bearer tokens (default: on)")
    parser.add_argument("--client-ca-file", default=None, metavar="F",
                        help="PEM CA bundle: TLS client certificates it signed authenticate as CN (user), O (groups)")
    parser.add_argument("--kubeconfig-auth", choices=("token", "cert"), default="token",
                        help="credentials written to the kubeconfig: the admin token or an admin client "
                             "certificate (default: token)")
    parser.add_argument("--anonymous-auth", type=_true_or_false, default=True, metavar="true|false",
                        help="with authentication on (--tls), a request without credentials is system:anonymous, "
                             "which RBAC lets read /healthz, /livez, /readyz and /version; false: a 401 "
                             "(default: true)")
    parser.add_argument("--authorization-policy-file", default=None, metavar="F",
                        help="YAML/JSON file of RBAC objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding) "
                             "created or replaced at start; users are authorized by RBAC")
    parser.add_argument("--max-watches-per-client", type=int, default=DEFAULT_MAX_WATCHES, metavar="N",
                        help=f"concurrent watches per user (or address), 0: unlimited (default: {DEFAULT_MAX_WATCHES})")
    parser.add_argument("--rate-limit-qps", type=float, default=DEFAULT_QPS, metavar="QPS",
                        help=f"requests per second per user (or address), 0: unlimited (default: {DEFAULT_QPS:g})")
    parser.add_argument("--rate-limit-burst", type=int, default=DEFAULT_BURST, metavar="N",
                        help=f"token bucket size: requests a client may send at once (default: {DEFAULT_BURST})")
    _flow_control_arguments(parser)


def _true_or_false(value: str) -> bool:
    """A boolean flag's value as kube-apiserver spells it (``--anonymous-auth=false``)."""
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def _flow_control_arguments(parser: argparse.ArgumentParser) -> None:
    from .apiserver import HEADER_TIMEOUT
    from .eventloop import EVENT_LOOPS
    from .filters.flowcontrol import DEFAULT_MAX_WAITS, DEFAULT_QUEUE_LENGTH, DEFAULT_QUEUE_WAIT, DEFAULT_SEATS

    parser.add_argument("--max-requests-inflight", type=int, default=DEFAULT_SEATS, metavar="N",
                        help="seats: concurrent non-watch requests, shared fairly by users; system:masters have "
                             f"as many of their own (default: {DEFAULT_SEATS})")
    parser.add_argument("--max-queued-requests-per-client", type=int, default=DEFAULT_QUEUE_LENGTH, metavar="N",
                        help=f"requests a user may queue for a seat, beyond: 429 (default: {DEFAULT_QUEUE_LENGTH})")
    parser.add_argument("--queue-wait-seconds", type=float, default=DEFAULT_QUEUE_WAIT, metavar="S",
                        help=f"longest wait for a seat, then 429 (default: {DEFAULT_QUEUE_WAIT:g})")
    parser.add_argument("--max-rv-waits-per-client", type=int, default=DEFAULT_MAX_WAITS, metavar="N",
                        help="reads a user may have waiting for a future resourceVersion at once, beyond: 429 "
                             f"(default: {DEFAULT_MAX_WAITS})")
    parser.add_argument("--header-timeout", type=float, default=HEADER_TIMEOUT, metavar="S",
                        help="close a connection that sends no complete request head within S seconds of opening "
                             f"or of its last response (default: {HEADER_TIMEOUT:g})")
    parser.add_argument("--allowed-hosts", default="", metavar="H,H",
                        help="on a loopback address, Host names accepted besides loopback ones (default: none)")
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto",
                        help="asyncio event loop: uvloop (faster per request), asyncio's own, or auto: uvloop "
                             "when installed (default: auto)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log every request on stderr: method, path, user, status code, milliseconds")
    parser.add_argument("--nodes", type=int, default=None, metavar="N",
                        help="simulated nodes and kubelets to run beside kube-controller-manager's controllers "
                             "(default: 1)")
    parser.add_argument("--bare", action="store_true",
                        help="run neither controllers nor nodes: an inert API server, as envtest")
    from . import clusterflags

    clusterflags.add_arguments(parser)


def is_loopback(host: str) -> bool:
    """True when ``host`` names only the local machine (``localhost``, 127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def ensure_admin_token(data_dir: str | os.PathLike[str]) -> str:
    """The admin bearer token kept in ``DATA/token`` (mode 0600), generated on first use."""
    path = Path(data_dir) / "token"
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if not token:
        from kinformer.tls import write_atomic

        token = secrets.token_urlsafe(32)
        write_atomic(path, token.encode() + b"\n")
    return token


def write_kubeconfig(path: str | os.PathLike[str], server_url: str, ca_path: str | os.PathLike[str] | None,
                     token: str | None, context_name: str = "kinformer", *, client_cert: bytes | None = None,
                     client_key: bytes | None = None) -> Path:
    """Write a kubeconfig with one cluster, user and context named ``context_name``, and select it.

    The CA certificate (and a client certificate and key, when given) are embedded (``*-data``) so the
    file stays valid when copied; the file is written atomically with mode 0600 as it may hold a token
    or a private key. Returns the path written.
    """
    cluster: dict[str, Any] = {"server": server_url}
    if ca_path is not None:
        cluster["certificate-authority-data"] = base64.b64encode(Path(ca_path).read_bytes()).decode()
    user: dict[str, Any] = {"token": token} if token else {}
    if client_cert is not None and client_key is not None:
        user = {"client-certificate-data": base64.b64encode(client_cert).decode(),
                "client-key-data": base64.b64encode(client_key).decode()}
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context_name, "cluster": cluster}],
        "users": [{"name": context_name, "user": user}],
        "contexts": [{"name": context_name, "context": {"cluster": context_name, "user": context_name}}],
        "current-context": context_name,
        "preferences": {},
    }
    from kinformer.tls import write_atomic

    out = Path(path)
    write_atomic(out, yaml.safe_dump(config, sort_keys=False).encode())
    return out


class DataDirInUse(Exception):
    """Another ``kinformer serve`` holds the data directory (see :func:`lock_data_dir`)."""


def lock_data_dir(data: Path, *, shared: bool = False) -> BinaryIO:
    """Lock ``data`` for this process: an ``flock`` on ``DATA/serve.lock``, held as long as the returned file is
    open (closing it, or the process ending, releases it).

    One server owns a data directory exclusively; ``shared`` is for the replicas of one API server on etcd,
    which share its CA and token and each write a kubeconfig of their own. Raises :class:`DataDirInUse`,
    naming the directory, when another process holds a lock that excludes this one; nothing in ``data`` but
    the lock file (created when missing) is touched before the lock is held.
    """
    path = data / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirInUse(f"data directory {data} is in use by another kinformer serve (it holds {path}); stop "
                           "that server or give this one another --data") from None
    return os.fdopen(fd, "rb")


def _cert_hosts(host: str) -> list[str]:
    hosts = ["127.0.0.1", "localhost", "::1"]
    if host in {"0.0.0.0", "::", ""}:
        hosts.append(socket.gethostname())
        try:
            hosts.extend(str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None))
        except OSError:
            pass
    else:
        hosts.insert(0, host.strip("[]"))
    return list(dict.fromkeys(hosts))


def _client_host(host: str) -> str:
    """The address clients on this machine use to reach a server bound to ``host``."""
    if host in {"0.0.0.0", ""}:
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _tokens(args: argparse.Namespace, data: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(accepted tokens or None for no auth, the token written to the kubeconfig)."""
    from kinformer.server.auth.authentication import UserInfo, load_token_file

    tokens: dict[str, Any] = {}
    if args.token_file:
        tokens.update(load_token_file(args.token_file))
    admin = None
    if args.tls:
        admin = ensure_admin_token(data)
        tokens[admin] = UserInfo(name=ADMIN_USER, uid=ADMIN_USER, groups=ADMIN_GROUPS)
    return (tokens or None), admin


def _security_kwargs(args: argparse.Namespace, certs: Any, policy: Any) -> dict[str, Any]:
    """APIServer options for client certificates, authorization and per-client limits."""
    client_cas = [args.client_ca_file] if args.client_ca_file else []
    if args.kubeconfig_auth == "cert" and certs is not None:
        client_cas.append(str(certs.ca_cert))
    return {"client_ca": client_cas or None, "authorization_policy": policy,
            "max_watches_per_client": args.max_watches_per_client or None,
            "rate_limit_qps": args.rate_limit_qps or None, "rate_limit_burst": args.rate_limit_burst,
            "max_inflight": args.max_requests_inflight, "queue_length_per_client": args.max_queued_requests_per_client,
            "queue_wait": args.queue_wait_seconds, "max_waits_per_client": args.max_rv_waits_per_client,
            "header_timeout": args.header_timeout, "anonymous_auth": args.anonymous_auth,
            "allowed_hosts": [h.strip() for h in args.allowed_hosts.split(",") if h.strip()]}


def _kubeconfig_credentials(args: argparse.Namespace, certs: Any, admin_token: str | None) -> dict[str, Any]:
    """``write_kubeconfig`` keyword arguments: the admin token, or a fresh admin client certificate."""
    if args.kubeconfig_auth == "cert" and certs is not None:
        from kinformer.tls import issue_client_cert

        cert, key = issue_client_cert(certs, ADMIN_USER, [g for g in ADMIN_GROUPS if g != "system:authenticated"])
        return {"token": None, "client_cert": cert, "client_key": key}
    return {"token": admin_token}


async def _serve(args: argparse.Namespace, data: Path, storage: str, tokens: Mapping[str, Any] | None,
                 admin_token: str | None, policy: Any = None) -> int:
    from kinformer.server import APIServer
    from kinformer.server.python_gc import tune_for_server
    from kinformer.tls import ensure_certs

    certs = ensure_certs(data / "pki", hosts=_cert_hosts(args.host)) if args.tls else None
    kwargs: dict[str, Any] = {"storage": storage, "host": args.host, "port": args.port, "tls": certs,
                              "tokens": tokens, "data_dir": str(data), **_security_kwargs(args, certs, policy),
                              **_cluster_kwargs(args)}
    if args.watch_cache_size is not None:
        kwargs["watch_cache_size"] = args.watch_cache_size
    kwargs["watcher_buffer_events"], kwargs["watcher_buffer_bytes"] = args.watcher_buffer_events, \
        args.watcher_buffer_bytes
    if args.verbose:
        _log_requests_to_stderr()
        kwargs["log_requests"] = True
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with APIServer(**kwargs) as server:
            port = urlsplit(server.url).port or args.port
            url = f"{'https' if args.tls else 'http'}://{_client_host(args.host)}:{port}"
            kubeconfig = Path(args.kubeconfig) if args.kubeconfig else data / "kubeconfig"
            write_kubeconfig(kubeconfig, url, certs.ca_cert if certs else None,
                             **_kubeconfig_credentials(args, certs, admin_token))
            shown = server.url if server.url == url else f"{server.url} (clients: {url})"
            print(f"kinformer API server listening on {shown}", flush=True)
            print(f"storage: {storage}", flush=True)
            print(f"event loop: {'uvloop' if type(loop).__module__.startswith('uvloop') else 'asyncio'}", flush=True)
            print(f"kubeconfig: {kubeconfig}", flush=True)
            print(f"cluster: {'bare (no controllers, no nodes)' if args.bare else _cluster_line(server)}", flush=True)
            print(f"try: kubectl --kubeconfig {kubeconfig} get ns", flush=True)
            tune_for_server()
            await stop.wait()
            print("shutting down", flush=True)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0


def _cluster_line(server: Any) -> str:
    names = ", ".join(server.controllers) or "none"
    return f"controllers: {names}; simulated nodes: {server.nodes}"


def _log_requests_to_stderr() -> None:
    from kinformer.server.filters.requestlog import REQUEST_LOG

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    REQUEST_LOG.addHandler(handler)
    REQUEST_LOG.setLevel(logging.INFO)
    REQUEST_LOG.propagate = False


def _check_security_args(args: argparse.Namespace) -> str | None:
    """Why the client-certificate and limit options cannot be used together, or None."""
    if (args.client_ca_file or args.kubeconfig_auth == "cert") and not args.tls:
        return "client certificates (--client-ca-file, --kubeconfig-auth cert) need --tls"
    if args.client_ca_file and not Path(args.client_ca_file).is_file():
        return f"--client-ca-file {args.client_ca_file}: no such file"
    if args.max_watches_per_client < 0 or args.rate_limit_qps < 0 or args.rate_limit_burst < 0:
        return "--max-watches-per-client, --rate-limit-qps and --rate-limit-burst must be >= 0"
    return None


def _check_cluster_args(args: argparse.Namespace) -> str | None:
    """Why ``--nodes`` and ``--bare`` cannot be used as given, or None."""
    if args.nodes is not None and args.nodes < 0:
        return "--nodes must be >= 0"
    if args.bare and args.nodes:
        return "--bare runs no nodes: drop --nodes or --bare"
    from . import clusterflags

    return clusterflags.check(args)


def _cluster_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The controllers and nodes to run (all controllers and one node by default, neither with ``--bare``), their
    timings and the pods' default tolerations (:mod:`.clusterflags`)."""
    from . import clusterflags

    if args.bare:
        return {"controllers": False, "nodes": 0, **clusterflags.server_kwargs(args)}
    return {"controllers": True, "nodes": 1 if args.nodes is None else args.nodes, **clusterflags.server_kwargs(args)}


def main(args: argparse.Namespace) -> int:
    """Run ``kinformer serve``; returns the exit status (2 for unsafe or invalid options)."""
    if not (0 <= args.port <= 65535):
        print(f"kinformer serve: invalid --port {args.port}", file=sys.stderr)
        return 2
    if args.watch_cache_size is not None and args.watch_cache_size < 0:
        print("kinformer serve: --watch-cache-size must be >= 0", file=sys.stderr)
        return 2
    if args.watcher_buffer_events < 1 or args.watcher_buffer_bytes < 1:
        print("kinformer serve: --watcher-buffer-events and --watcher-buffer-bytes must be >= 1", file=sys.stderr)
        return 2
    if not is_loopback(args.host) and not args.tls:
        print(f"kinformer serve: refusing to bind non-loopback address {args.host!r} without TLS and token "
              "authentication; drop --no-tls (TLS generates a token) or bind 127.0.0.1", file=sys.stderr)
        return 2
    problem = _check_security_args(args) or _check_cluster_args(args)
    if problem:
        print(f"kinformer serve: {problem}", file=sys.stderr)
        return 2
    policy = None
    if args.authorization_policy_file:
        from kinformer.server.auth.bootstrappolicy import load_seed_file

        try:
            policy = load_seed_file(args.authorization_policy_file)
        except (OSError, ValueError) as exc:
            print(f"kinformer serve: --authorization-policy-file: {exc}", file=sys.stderr)
            return 2
    if args.storage is not None:
        from kinformer.server.storage import parse_storage_url

        try:
            parse_storage_url(args.storage)  # refused before anything is written to --data
        except ValueError as exc:
            print(f"kinformer serve: --storage: {exc}", file=sys.stderr)
            return 2
    data = Path(args.data).resolve()
    data.mkdir(parents=True, exist_ok=True)
    storage = args.storage or f"sqlite:///{data / 'kinformer.db'}"
    try:
        lock = lock_data_dir(data, shared=storage.startswith("etcd://") and bool(args.kubeconfig))
    except DataDirInUse as exc:
        print(f"kinformer serve: {exc}", file=sys.stderr)
        return 1
    with lock:
        return _run(args, data, storage, policy)


def _run(args: argparse.Namespace, data: Path, storage: str, policy: Any) -> int:
    """Serve with the data directory locked: write its token, certificates and kubeconfig, run until stopped."""
    try:
        tokens, admin = _tokens(args, data)
    except (OSError, ValueError) as exc:
        print(f"kinformer serve: --token-file: {exc}", file=sys.stderr)
        return 2
    if tokens and not args.tls:
        print("kinformer serve: warning: tokens are required but kubectl never sends credentials over plain "
              "http; use --tls for kubectl", file=sys.stderr)
    from kinformer.server.eventloop import loop_factory

    try:
        factory = loop_factory(args.event_loop)
    except ImportError:
        print("kinformer serve: --event-loop uvloop: uvloop is not installed", file=sys.stderr)
        return 2
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(_serve(args, data, storage, tokens, admin, policy))
    except KeyboardInterrupt:
        return 130
    except ValueError as exc:  # a bad --storage URL or option the server refuses
        print(f"kinformer serve: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the port is in use
        print(f"kinformer serve: {exc}", file=sys.stderr)
        return 1

"""``kinformer run MODULE:ATTR``: run a Manager with controller-runtime's flags.

ATTR is a Manager, or a callable taking the :class:`~kinformer.Client` built from ``--kubeconfig`` (in-cluster
configuration when running in a pod, else ``$KUBECONFIG`` / ``~/.kube/config``) and returning one. ``--kubeconfig``
is also exported as ``KUBECONFIG`` for code that reads it. ``--leader-elect`` turns on leader election with a Lease
named ``--leader-election-id`` in ``--leader-election-namespace``; ``--health-probe-bind-address`` serves
/healthz, /readyz and /metrics (``--metrics-bind-address`` is the same server: kinformer serves both on one
address, so when both are given they must be equal; "0" turns it off). ``--zap-log-level`` is debug, info, error
or a verbosity number (any number is debug). SIGTERM and SIGINT stop the Manager gracefully: in-flight reconciles
finish, the Lease is released; the exit status is 0. ``--run-for SECONDS`` stops it after that long (for tests
and demos).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kinformer.client import Client
    from kinformer.controller import Manager

__all__ = ["add_arguments", "add_leader_election_arguments", "configure_leader_election", "log_level", "main"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR,
           "dpanic": logging.CRITICAL, "panic": logging.CRITICAL, "fatal": logging.CRITICAL}


def log_level(value: str) -> int:
    """A zap level name, or a positive verbosity (debug), as a logging level."""
    if value.isdigit() and int(value) > 0:
        return logging.DEBUG
    if value.lower() not in _LEVELS:
        raise argparse.ArgumentTypeError(f"unknown log level {value!r} (debug, info, error, or a number > 0)")
    return _LEVELS[value.lower()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE:ATTR", help="a Manager, or a callable taking a Client returning one")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config, else $KUBECONFIG)")
    add_leader_election_arguments(parser)
    parser.add_argument("--metrics-bind-address", default=None, help="address of /metrics (same as the probes')")
    parser.add_argument("--health-probe-bind-address", default=None, help="address of /healthz and /readyz")
    parser.add_argument("--zap-log-level", type=log_level, default=logging.INFO, help="debug, info, error or N")
    parser.add_argument("--run-for", type=float, default=None, metavar="SECONDS", help="stop after this long")


def add_leader_election_arguments(parser: argparse.ArgumentParser) -> None:
    """controller-runtime's leader-election flags (``kinformer rbac`` takes them too, to grant the Lease)."""
    parser.add_argument("--leader-elect", action="store_true", help="run only while holding the leader Lease")
    parser.add_argument("--leader-election-id", default=None, help="the Lease's name (default: the module name)")
    parser.add_argument("--leader-election-namespace", default="default", help="the Lease's namespace")


def configure_leader_election(mgr: Manager, args: argparse.Namespace) -> None:
    """Give ``mgr`` leader election when ``--leader-elect`` was given."""
    from kinformer.controller import LeaderElectionConfig

    if args.leader_elect:
        lease = args.leader_election_id or args.target.partition(":")[0].replace(".", "-").replace("_", "-")
        mgr.leader_election = LeaderElectionConfig(lease_name=lease, lease_namespace=args.leader_election_namespace)


def _health_bind(args: argparse.Namespace) -> str | None:
    given = {a for a in (args.metrics_bind_address, args.health_probe_bind_address) if a is not None}
    if len(given) > 1:
        raise ValueError("kinformer serves /metrics and the probes on one address: give one value")
    bind = given.pop() if given else None
    return None if bind in (None, "0") else bind


def _configure(mgr: Manager, args: argparse.Namespace) -> None:
    mgr.health_bind = _health_bind(args)
    configure_leader_election(mgr, args)


async def _client(args: argparse.Namespace) -> Client:
    from kinformer.client import Client

    if args.kubeconfig:
        os.environ["KUBECONFIG"] = args.kubeconfig
        return await Client.from_kubeconfig(args.kubeconfig)
    return await Client.auto()


async def _run(args: argparse.Namespace) -> None:
    from kinformer.cli.target import load, manager_of

    _, value = load(args.target)
    async with await _client(args) as client:
        mgr = await manager_of(value, client, args.target)
        _configure(mgr, args)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, mgr.stop)
        timer = loop.call_later(args.run_for, mgr.stop) if args.run_for is not None else None
        try:
            await mgr.run()
        finally:
            if timer is not None:
                timer.cancel()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


def main(args: argparse.Namespace) -> int:
    from kinformer.cli.target import TargetError
    from kinformer.controller import LeaderElectionLost

    logging.basicConfig(level=args.zap_log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(_run(args))
    except (TargetError, ValueError) as exc:
        print(f"kinformer run: {exc}", file=sys.stderr)
        return 2
    except LeaderElectionLost:
        print("kinformer run: leader election lost", file=sys.stderr)
        return 1
    return 0

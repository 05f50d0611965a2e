"""``kinformer demo``: Kubernetes' sample-controller in Python, on an embedded API server, under faults.

A ``Foo`` (samplecontroller.k8s.io/v1alpha1; ``spec.deploymentName``, ``spec.replicas``) is reconciled
into an owned Deployment, and the Deployment's ``status.availableReplicas`` is copied back to the
Foo. The embedded server runs no kube-controller-manager, so a second controller stands in for it
and reports every Deployment's replicas as available.

While Foos are created, scaled and deleted, the demo injects faults: dropped watch connections (a
proxy between client and server cuts them), a forced 410 relist (the proxy stalls, objects change
and are deleted, the server compacts its history, then the connections drop), reconciles that fail
a few times before succeeding, and a deliberately slow event handler. It ends by checking, through
the API, that every Foo converged; it exits non-zero if any did not.

With ``--replicas N`` (and ``--storage etcd://...``) the same workload runs against N API server
replicas sharing the etcd cluster and N manager replicas, each talking to a different server replica
through its own proxy and campaigning for one Lease; mid-run the demo kills the leading manager and
then the server replica the new leader talks to (its proxy fails over to a surviving replica, as a
load balancer would), and the Foos must still converge (see :class:`ReplicatedDemo`).
"""


from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from kinformer.demo.replicated import ReplicatedDemo
from kinformer.demo.run import Demo

__all__ = ["Demo", "ReplicatedDemo", "add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--foos", type=int, default=24, help="how many Foos to create (default 24)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload and the faults")
    parser.add_argument("--storage", default=None,
                        help="server storage URL (default: a SQLite file in a temporary directory)")
    parser.add_argument("--duration", type=float, default=50.0,
                        help="roughly how long the workload runs, in seconds (default 50)")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds allowed to converge")
    parser.add_argument("--keep", action="store_true",
                        help="leave the server running at the end (Ctrl-C to stop)")
    parser.add_argument("--plain", action="store_true",
                        help="log lines only, no live view (the figures once, as summary lines at the end)")
    parser.add_argument("--replicas", type=int, default=1,
                        help="API server and manager replicas (default 1); more than 1 needs --storage etcd://...")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    # Reconcile failures are part of the show: they are counted in the live view, not logged.
    logging.getLogger("kinformer.controller.controller").setLevel(logging.CRITICAL)
    replicas = getattr(args, "replicas", 1)
    if replicas < 1:
        print("kinformer demo: --replicas must be >= 1", file=sys.stderr)
        return 2
    if replicas > 1 and not (args.storage or "").startswith("etcd://"):
        print("kinformer demo: --replicas > 1 needs shared storage: --storage etcd://HOST:PORT[,HOST:PORT...]",
              file=sys.stderr)
        return 2
    try:
        return asyncio.run((ReplicatedDemo(args) if replicas > 1 else Demo(args)).run())
    except KeyboardInterrupt:
        return 130

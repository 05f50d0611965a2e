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

With ``--sharding`` the N manager replicas (3 by default) split the keys instead (one Lease each, over
one API server): the run reports which member reconciled how many keys, checks that no key was ever
reconciled by two members at once, and kills one member and stops another midway, following their keys
to the others (see :class:`ShardedDemo`).
"""


from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from kinformer.demo.replicated import ReplicatedDemo
from kinformer.demo.run import Demo
from kinformer.demo.sharded import ShardedDemo

__all__ = ["Demo", "ReplicatedDemo", "ShardedDemo", "add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--foos", type=int, default=24, help="how many Foos to create (default 24)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload and the faults")
    parser.add_argument("--storage", default=None,
                        help="server storage URL (default: a SQLite file in a temporary directory)")
    parser.add_argument("--duration", type=float, default=None,
                        help="roughly how long the workload runs, in seconds (default 50; 10 with --sharding)")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds allowed to converge")
    parser.add_argument("--keep", action="store_true",
                        help="leave the server running at the end (Ctrl-C to stop)")
    parser.add_argument("--plain", action="store_true",
                        help="log lines only, no live view (the figures once, as summary lines at the end); "
                             "the default when stdout is not a terminal")
    parser.add_argument("--replicas", type=int, default=None,
                        help="API server and manager replicas (default 1); more than 1 needs --storage etcd://..., "
                             "except with --sharding (default 3 members)")
    parser.add_argument("--sharding", action="store_true",
                        help="the manager replicas split the Foos (one Lease each, over one API server) instead "
                             "of electing a leader; one member is killed and another stopped midway, and the "
                             "run shows the spread, that no key was reconciled by two members at once, and "
                             "the keys moving to the others")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    # Reconcile failures are part of the show: they are counted in the live view, not logged.
    logging.getLogger("kinformer.controller.controller").setLevel(logging.CRITICAL)
    sharding = getattr(args, "sharding", False)
    if getattr(args, "replicas", None) is None:
        args.replicas = 3 if sharding else 1
    replicas = args.replicas
    if getattr(args, "duration", None) is None:
        args.duration = 10.0 if sharding else 50.0
    if sharding and replicas < 2:
        print("kinformer demo: --sharding needs --replicas >= 2", file=sys.stderr)
        return 2
    if replicas < 1:
        print("kinformer demo: --replicas must be >= 1", file=sys.stderr)
        return 2
    if replicas > 1 and not sharding and not (args.storage or "").startswith("etcd://"):
        print("kinformer demo: --replicas > 1 needs shared storage: --storage etcd://HOST:PORT[,HOST:PORT...]",
              file=sys.stderr)
        return 2
    demo = ShardedDemo(args) if sharding else ReplicatedDemo(args) if replicas > 1 else Demo(args)
    try:
        return asyncio.run(demo.run())
    except KeyboardInterrupt:
        return 130

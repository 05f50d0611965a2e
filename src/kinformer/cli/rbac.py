"""``kinformer rbac MODULE:ATTR``: the RBAC a Manager needs, as YAML, without contacting a server.

The target's Manager is built with a Client that is never used; :mod:`kinformer.authoring.rbac` derives the
roles. Resource names its controllers use are resolved against kube's built-ins, the CRD dicts at the top level of
the target's module, and those given with ``--crd``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence

from kinformer.cli.run import add_leader_election_arguments, configure_leader_election

__all__ = ["add_arguments", "main"]

_UNUSED_SERVER = "https://kinformer-rbac.invalid"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE:ATTR", help="a Manager, or a callable taking a Client returning one")
    parser.add_argument("--name", default="manager", help="prefix of the role names (default: manager)")
    parser.add_argument("--service-account", metavar="NAMESPACE/NAME",
                        help="also print bindings of the roles to this ServiceAccount")
    parser.add_argument("--crd", action="append", default=[], metavar="MODULE:ATTR",
                        help="CRDs whose resources the controllers use (repeatable)")
    add_leader_election_arguments(parser)  # as `kinformer run` will be given them: the Lease's Role follows


async def _documents(args: argparse.Namespace) -> Sequence[Mapping[str, object]]:
    from kinformer.authoring.rbac import rbac_documents
    from kinformer.cli.offline import OfflineResolver
    from kinformer.cli.target import crds_of, load, manager_of, module_crds
    from kinformer.client import Client

    module, value = load(args.target)
    crds = module_crds(module) + [c for t in args.crd for c in crds_of(load(t)[1], t)]
    async with Client(_UNUSED_SERVER) as client:
        mgr = await manager_of(value, client, args.target)
        configure_leader_election(mgr, args)
        return rbac_documents(mgr, OfflineResolver(crds), name=args.name, service_account=args.service_account)


def main(args: argparse.Namespace) -> int:
    from kinformer.cli.target import TargetError, dump_yaml

    try:
        docs = asyncio.run(_documents(args))
    except (TargetError, LookupError, ValueError) as exc:
        print(f"kinformer rbac: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(dump_yaml(docs))
    return 0

"""``kinformer crd MODULE:ATTR``: the CRDs a module defines (``ki.crd(...)`` dicts), as YAML."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_arguments", "main"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="MODULE:ATTR", help="a CRD dict (ki.crd(...)) or a list of them")


def main(args: argparse.Namespace) -> int:
    from kinformer.cli.target import TargetError, crds_of, dump_yaml, load

    try:
        crds = crds_of(load(args.target)[1], args.target)
    except TargetError as exc:
        print(f"kinformer crd: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(dump_yaml(crds))
    return 0

"""The ``kinformer`` command: ``serve``, ``watch``, ``demo``, and for operator authors ``run``, ``rbac``, ``crd``.

Each subcommand lives beside the code it drives (``add_arguments`` and ``main``); those modules
keep their heavy imports inside ``main`` so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import importlib
import sys

_DESCRIPTION = "The kinformer command: serve, watch, demo, run, rbac and crd."  # plain text, as every help string here

# subcommand -> (module, help). Each module defines add_arguments(parser) and main(args) -> int.
_COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("kinformer.server.cli", "run the embedded Kubernetes-compatible API server"),
    "watch": ("kinformer.cli.watch", "run an informer and print each delta as it arrives"),
    "demo": ("kinformer.demo", "the sample controller against an embedded server, with faults"),
    "run": ("kinformer.cli.run", "run a Manager (MODULE:ATTR) with controller-runtime's flags"),
    "rbac": ("kinformer.cli.rbac", "print the RBAC roles a Manager (MODULE:ATTR) needs, as YAML"),
    "crd": ("kinformer.cli.crd", "print the CRDs a module defines (MODULE:ATTR), as YAML"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``kinformer`` parser, with the arguments of ``command`` (of every subcommand when None).

    Only the modules of the subcommands whose arguments are added are imported: ``kinformer serve`` never
    imports the demo's or the watcher's code, and the top-level help imports none of them.
    """
    parser = argparse.ArgumentParser(prog="kinformer", description=_DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        p.set_defaults(_module=module)
        if command is not None and name != command:
            continue
        try:
            importlib.import_module(module).add_arguments(p)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            p.set_defaults(_missing=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in _COMMANDS else ""  # "": a bare or help-only invocation
    parser = build_parser(command)
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        parser.error(f"'{args.command}' is not available in this build")
    return int(importlib.import_module(args._module).main(args) or 0)


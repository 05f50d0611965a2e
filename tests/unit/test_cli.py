"""The ``kinformer`` command line: one parser, each subcommand's code imported only when it runs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kinformer.cli import build_parser

_IMPORTED = """
import sys
from kinformer.cli import build_parser
build_parser({command!r}).parse_args({argv!r})
print(sorted({{m.split(".")[1] for m in sys.modules if m.startswith("kinformer.") and m.count(".") >= 1}}))
"""


def _kinformer_packages_after(command: str | None, argv: list[str]) -> str:
    out = subprocess.run([sys.executable, "-c", _IMPORTED.format(command=command, argv=argv)],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout


def test_serve_imports_neither_the_demo_nor_the_client_library() -> None:
    packages = _kinformer_packages_after("serve", ["serve", "--port", "0"])
    assert "server" in packages
    for other in ("demo", "client", "cache", "controller"):
        assert f"'{other}'" not in packages, packages


def test_the_full_parser_knows_every_subcommand_and_its_arguments() -> None:
    parser = build_parser()
    assert parser.parse_args(["serve", "--port", "0"]).port == 0
    assert parser.parse_args(["demo", "--foos", "3"]).foos == 3
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--foos", "3"])


@pytest.mark.parametrize("command", [None, "serve", "watch", "demo"])
def test_help_is_plain_text(command: str | None, capsys: pytest.CaptureFixture[str]) -> None:
    """No reStructuredText markup (``code``, :class:`...`) reaches a terminal; each subcommand says what it is."""
    argv = [command, "--help"] if command else ["--help"]
    with pytest.raises(SystemExit):
        build_parser(command).parse_args(argv)
    text = capsys.readouterr().out
    assert "``" not in text and ":class:" not in text and ":mod:" not in text, text
    description = {None: "The kinformer command", "serve": "Run the embedded Kubernetes-compatible API server",
                   "watch": "Run an informer", "demo": "The sample controller"}[command]
    assert "\n\n" + description in text, text

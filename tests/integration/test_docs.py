"""Every code block of README.md and docs/*.md runs as written.

- A ``python`` block is saved to a file in an empty directory and run: with pytest when it defines a
  ``test_`` function (a test, with only the documented configuration), else with ``python`` (a program).
  It must exit 0 within a bound and leave no warning about unclosed sessions or destroyed tasks. When the
  next block is a ``text`` block introduced by prose ending in "prints ...:", the program's standard output
  must be exactly that text (the README's first example has one).
- A ``bash`` block's ``kinformer ...`` commands are parsed by the real command-line parser, so every
  documented subcommand and flag exists; they are not run (servers and watches run until stopped).
- A block whose first line is ``# fragment`` is exempt (kept for a few illustrative pieces); the README's
  first Python example never is. Other languages (diagrams, output samples) are text.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from kinformer.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FRAGMENT = "# fragment"
RUN_TIMEOUT = 90.0
LEAK_MARKERS = ("Unclosed client session", "Unclosed connector", "Task was destroyed", "Traceback", "ResourceWarning",
                "was never awaited")

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    code: str
    expected: str | None = None  # what the block prints, from the ``text`` block that follows it

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def fragment(self) -> bool:
        return self.code.lstrip().startswith(FRAGMENT)


def blocks(lang: str) -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text()
        fences = list(_FENCE.finditer(text))
        for i, match in enumerate(fences):
            if match.group(1) == lang:
                following = fences[i + 1] if i + 1 < len(fences) else None
                found.append(Block(path, text.count("\n", 0, match.start()) + 1, lang, match.group(2),
                                   _printed(text, match, following)))
    return found


def _printed(text: str, block: re.Match[str], following: re.Match[str] | None) -> str | None:
    """The output the docs say ``block`` prints: the ``text`` block right after it, when the prose between
    them says "prints" and ends with a colon."""
    if following is None or following.group(1) != "text":
        return None
    prose = text[block.end():following.start()].strip()
    return following.group(2) if "prints" in prose and prose.endswith(":") else None


PYTHON = [b for b in blocks("python") if not b.fragment]
BASH = [b for b in blocks("bash") if not b.fragment]


def test_the_readme_example_is_a_program_and_fragments_are_few() -> None:
    first = blocks("python")[0]
    assert first.path.name == "README.md" and not first.fragment and first.expected, first
    fragments = [b.id for b in blocks("python") + blocks("bash") if b.fragment]
    assert len(fragments) <= 3, f"too many exempt blocks: {fragments}"


def _run(block: Block, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    if re.search(r"^(async )?def test_", block.code, re.M):
        (tmp_path / "test_example.py").write_text(block.code)
        # no rootdir configuration of ours: only what the docs say a user needs
        (tmp_path / "pytest.ini").write_text("[pytest]\n")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"]
    else:
        (tmp_path / "example.py").write_text(block.code)
        cmd = [sys.executable, "-X", "dev", "example.py"]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          stdin=subprocess.DEVNULL, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    proc = _run(block, tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{block.id} failed:\n{output[-4000:]}"
    if block.expected is not None:
        assert proc.stdout == block.expected, f"{block.id} printed something else:\n{proc.stdout[-4000:]}"
    leaks = [marker for marker in LEAK_MARKERS if marker in output]
    assert not leaks, f"{block.id} left {leaks}:\n{output[-4000:]}"


def _kinformer_commands(code: str) -> list[list[str]]:
    commands = []
    for line in code.replace("\\\n", " ").splitlines():  # a backslash-newline continues the command, as in bash
        for segment in re.split(r"&&|\|\||;|\|", line.split(" #")[0]):
            words = shlex.split(segment)
            if words and words[0] == "kinformer":
                commands.append(words[1:])
    return commands


@pytest.mark.parametrize("block", BASH, ids=[b.id for b in BASH])
def test_bash_block_commands_parse(block: Block) -> None:
    for argv in _kinformer_commands(block.code):
        try:
            build_parser().parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"{block.id}: `kinformer {shlex.join(argv)}` is not a valid command (exit {exc.code})")


def test_command_check_reads_continued_lines() -> None:
    code = "git log \\\n  --oneline && kinformer watch \\\n  configmaps"
    assert _kinformer_commands(code) == [["watch", "configmaps"]]


def test_command_check_rejects_an_unknown_flag() -> None:
    argv = _kinformer_commands("kinformer watch configmaps --no-such-flag  # comment")[0]
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)


_ISSUE = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.I)
_CLOCK_HEADING = re.compile(r"^#+ .*\b\d{1,2}:\d{2}\b", re.M)


def _findings(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in DOCS:
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()!r}"
                  for m in pattern.finditer(text)]
    return found


def test_user_docs_name_no_issue_number_and_no_clock_time_in_a_heading() -> None:
    """A reader cannot look up the project's issues; the lab notes live in docs/design-notes/, outside DOCS."""
    assert _findings(_ISSUE) == []
    assert _findings(_CLOCK_HEADING) == []
    assert _ISSUE.search("the targets of issue 4") and _CLOCK_HEADING.search("### round 5 (20:15 to 21:30 UTC)")


def test_the_user_guide_names_every_runtime_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[<>=~!;\[ ]", requirement, maxsplit=1)[0] for requirement in project["dependencies"]]
    rows = {line.split("|")[1].strip() for line in (ROOT / "docs" / "user-guide.md").read_text().splitlines()
            if line.startswith("| ")}
    assert len(names) >= 12 and [n for n in names if n not in rows] == []


def test_the_user_guide_names_every_cluster_controller() -> None:
    """``controllers=`` takes these names: the user guide's table says what each does."""
    from kinformer.cluster import CONTROLLERS

    rows = {line.split("|")[1].strip().strip("`") for line in (ROOT / "docs" / "user-guide.md").read_text().splitlines()
            if line.startswith("| `")}
    assert sorted(set(CONTROLLERS) - rows) == []

"""The embedded server stays laid out by concern, as k8s.io/apiserver is (docs/architecture.md, "The embedded API
server"): a reader finds a module by the package that names its concern, so no package grows past
:data:`MAX_ENTRIES` modules and subpackages, every package says in its docstring what it holds, and the server's
modules import one another without a circle (TYPE_CHECKING imports aside; the check over all of src/ is
tests/unit/test_layering.py's, this one reports the server's on its own).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from unit.test_layering import SRC, _circle, _module_name, _runtime_graph

SERVER = SRC / "server"
#: modules and subpackages directly in one package, at most
MAX_ENTRIES = 30


def _entries(package: Path) -> list[str]:
    """The modules (``__init__`` aside) and subpackages directly in ``package``."""
    return sorted(p.name for p in package.iterdir()
                  if (p.suffix == ".py" and p.name != "__init__.py") or (p / "__init__.py").is_file())


def _packages(root: Path) -> list[Path]:
    return sorted(init.parent for init in root.rglob("__init__.py"))


def _oversized(root: Path, limit: int = MAX_ENTRIES) -> dict[str, int]:
    """Packages under ``root`` (itself included) holding more than ``limit`` entries, with their count."""
    counts = {str(p.relative_to(root.parent)): len(_entries(p)) for p in _packages(root)}
    return {name: count for name, count in counts.items() if count > limit}


def _without_docstring(root: Path) -> list[str]:
    return [str(p.relative_to(root.parent)) for p in _packages(root)
            if not (ast.get_docstring(ast.parse((p / "__init__.py").read_text())) or "").strip()]


def test_the_server_top_holds_at_most_30_modules_and_subpackages() -> None:
    entries = _entries(SERVER)
    assert len(entries) <= MAX_ENTRIES, entries


def test_no_server_subpackage_holds_more_than_30_modules() -> None:
    assert len(_packages(SERVER)) > 1  # the server is split: this test would pass on one flat package
    assert _oversized(SERVER) == {}


def test_every_server_package_opens_with_a_docstring() -> None:
    assert _without_docstring(SERVER) == []


def test_no_import_circle_among_server_modules_outside_type_checking() -> None:
    paths = {_module_name(p): p for p in SERVER.rglob("*.py")}
    graph = _runtime_graph(paths)
    assert {m.rpartition(".")[0] for m in graph} >= {_module_name(p / "__init__.py") for p in _packages(SERVER)}
    assert _circle(graph) == []


def test_the_checks_report_a_package_too_large_and_one_without_a_docstring(tmp_path: Path) -> None:
    root = tmp_path / "server"
    (root / "endpoints").mkdir(parents=True)
    (root / "__init__.py").write_text('"""The server."""\n')
    (root / "endpoints" / "__init__.py").write_text("# no docstring\n")
    for n in range(MAX_ENTRIES + 1):
        (root / "endpoints" / f"m{n}.py").write_text("")
    (root / "endpoints" / "notes.txt").write_text("not a module")
    assert _oversized(root) == {"server/endpoints": MAX_ENTRIES + 1}
    assert _entries(root) == ["endpoints"]
    assert _without_docstring(root) == ["server/endpoints"]



def test_docs_architecture_names_every_server_package() -> None:
    """docs/architecture.md's table of the server's packages names each package directly in server/ (and no
    package that is gone)."""
    doc = (SRC.parent.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"^\| `server/(\w+)/` \|", doc, re.MULTILINE))
    assert named == {p.parent.name for p in SERVER.glob("*/__init__.py")}

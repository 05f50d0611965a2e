"""Dependencies point one way, down the layers docs/architecture.md draws.

    sync | authoring                (the blocking facade; CRDs and RBAC from Python types)
    controller                      (reconcilers, the Manager, leader election, sharding)
    webhook                         (admission and conversion webhook servers)
    workqueue | client | cache      (siblings: none imports another)
    bottom modules                  (names, errors, clock, meta, selectors, listwatch, metrics, kinds, ...)

The package ``kinformer`` itself sits on top: its public names are imported lazily, by name.

A module may import its own package and the layers below its own; bottom modules may import each other.
The applications (the embedded server, the demo, the testing fixtures, the simulated cluster and the
``kinformer`` command) sit apart: they may use the library, and the library never imports them. Imports are
read from the source with ``ast``, every import statement counted: under ``if TYPE_CHECKING:`` and inside
functions too. A new package must be given a layer here before it may be imported.
"""

from __future__ import annotations

import ast
import graphlib
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

import kinformer

SRC = Path(kinformer.__file__).parent
APPLICATIONS = ("kinformer.server", "kinformer.demo", "kinformer.cli", "kinformer.testing", "kinformer.cluster")
BOTTOM = ("kinformer.aio", "kinformer.clock", "kinformer.errors", "kinformer.kinds", "kinformer.listwatch",
          "kinformer.meta", "kinformer.metrics", "kinformer.names", "kinformer.selectors", "kinformer.tls",
          "kinformer.tracing", "kinformer.typed_resources", "kinformer.quantity", "kinformer.quota",
          "kinformer.untrack", "kinformer.timestamps")
SIBLINGS = ("kinformer.workqueue", "kinformer.client", "kinformer.cache")
#: package -> layer; a module may import from strictly lower layers (and its own package).
LAYERS: dict[str, int] = {
    **dict.fromkeys(BOTTOM, 0),
    **dict.fromkeys(SIBLINGS, 1),
    "kinformer.webhook": 2,
    "kinformer.controller": 3,
    "kinformer.sync": 4,  # the blocking facade over client, cache and controller
    "kinformer.authoring": 4,  # CRDs from types, a Manager's RBAC
    "kinformer": 5,  # the package's facade: re-exports public names (imported lazily, so importing it loads none)
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _package(module: str) -> str:
    """The layered unit ``module`` belongs to: ``kinformer.cache.store`` -> ``kinformer.cache``."""
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> set[str]:
    """Every kinformer module ``path`` imports (absolute names; relative imports resolved)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    return _imports_in(path.read_text(), package)


def _imports_in(source: str, package: str) -> set[str]:
    """Every kinformer module ``source`` (a module of ``package``) imports, at any depth of its syntax tree."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            if base == "kinformer":  # "from kinformer import errors" imports the module kinformer.errors
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if _is_within(m, ("kinformer",))}


def library_modules() -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if not _is_within(_module_name(p), APPLICATIONS)]


def _violations(module: str, imported: set[str]) -> list[str]:
    """The imports of ``module`` (a library module) that break the order, each with the reason."""
    own = _package(module)
    bad = []
    for target in sorted(imported - {"kinformer"}):  # the facade itself imports nothing eagerly
        dest = _package(target)
        if _is_within(target, APPLICATIONS):
            bad.append(f"{target} (an application; the library never imports it)")
        elif dest not in LAYERS:
            bad.append(f"{target} (package {dest} has no layer in tests/unit/test_layering.py)")
        elif dest != own and LAYERS[dest] >= LAYERS[own] and LAYERS[own] > 0:
            bad.append(f"{target} (layer {LAYERS[dest]} is not below {own}'s layer {LAYERS[own]})")
        elif LAYERS[own] == 0 and LAYERS[dest] > 0:
            bad.append(f"{target} (a bottom module imports layer {LAYERS[dest]})")
    return bad


def test_every_import_of_the_library_points_down_the_layers() -> None:
    offenders = {}
    for path in library_modules():
        module = _module_name(path)
        assert _package(module) in LAYERS, f"{module}: give package {_package(module)} a layer in this test"
        if bad := _violations(module, _imports(path)):
            offenders[module] = bad
    assert offenders == {}


@pytest.mark.parametrize(("module", "imports", "expected"), [
    ("kinformer.cache.reflector", {"kinformer.client.client"}, "layer 1 is not below kinformer.cache's layer 1"),
    ("kinformer.client.client", {"kinformer.cache.store"}, "layer 1 is not below kinformer.client's layer 1"),
    ("kinformer.webhook.server", {"kinformer.controller.metrics"}, "layer 3 is not below kinformer.webhook's"),
    ("kinformer.meta", {"kinformer.workqueue"}, "a bottom module imports layer 1"),
    ("kinformer.controller.manager", {"kinformer.server.storage"}, "an application"),
    ("kinformer.cache.store", {"kinformer.newpackage.x"}, "has no layer"),
])
def test_an_upward_or_sideways_import_is_reported(module: str, imports: set[str], expected: str) -> None:
    assert expected in " ".join(_violations(module, imports))


def test_a_downward_import_or_one_within_a_package_is_allowed() -> None:
    assert _violations("kinformer.controller.manager", {"kinformer.webhook", "kinformer.cache.factory",
                                                        "kinformer.client", "kinformer.metrics"}) == []
    assert _violations("kinformer.cache.reflector", {"kinformer.cache.store", "kinformer.listwatch"}) == []
    assert _violations("kinformer.selectors", {"kinformer.errors", "kinformer.names", "kinformer"}) == []


def test_the_check_sees_library_modules_and_lazy_and_type_checking_imports() -> None:
    names = {_module_name(p) for p in library_modules()}
    assert {"kinformer.cache.reflector", "kinformer.controller.manager", "kinformer.meta"} <= names
    assert not any(_is_within(n, APPLICATIONS) for n in names)
    assert "kinformer.server" in _imports(SRC / "demo" / "run.py")  # imported inside functions
    sample = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..controller import x\n"
              "def f():\n    import kinformer.server.app\n")
    assert _imports_in(sample, "kinformer.cache") == {"kinformer.controller", "kinformer.server.app"}


@pytest.mark.parametrize("package", SIBLINGS)
def test_importing_one_sibling_loads_none_of_the_others(package: str) -> None:
    """``import kinformer.client`` loads neither the cache nor the work queues (and so on), nor anything above."""
    code = f"import sys, {package}; print(' '.join(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC.parent), os.environ.get("PYTHONPATH", "")])}
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env,
                            timeout=60).stdout.split()
    above = [p for p in (*SIBLINGS, "kinformer.webhook", "kinformer.controller", *APPLICATIONS) if p != package]
    assert [m for m in loaded if _is_within(m, tuple(above))] == []


class _RuntimeImports(ast.NodeVisitor):
    """The kinformer modules a module imports when it runs: ``if TYPE_CHECKING:`` blocks left out, imports in
    functions kept; ``from package import submodule`` counts as the submodule."""

    def __init__(self, module: str, package: str, modules: set[str]) -> None:
        self.module, self.package, self.modules = module, package, modules
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self._add(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            anchor = self.package.split(".")[: len(self.package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in self.modules]
        self._add(subs if len(subs) == len(node.names) else [base, *subs])

    def _add(self, names: Iterable[str]) -> None:
        # a module's own packages are imported before it, whatever it says: not a circle
        self.found.update(n for n in names if n in self.modules and not _is_within(self.module, (n,)))


def _runtime_graph(paths: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        visitor = _RuntimeImports(module, package, set(paths))
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph[module] = visitor.found
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str]:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_no_import_circle_in_src_outside_type_checking() -> None:
    """Every module of src/ (server included): lazy imports inside functions count, TYPE_CHECKING ones do not."""
    assert _circle(_runtime_graph({_module_name(p): p for p in SRC.rglob("*.py")})) == []


def test_the_circle_check_finds_a_function_level_circle_and_skips_type_checking() -> None:
    assert set(_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})) == {"a", "b", "c"}
    assert _circle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kinformer.x import T\n"
              "def f():\n    from . import y\n")
    visitor = _RuntimeImports("kinformer.z", "kinformer", {"kinformer", "kinformer.x", "kinformer.y", "kinformer.z"})
    visitor.visit(ast.parse(source))
    assert visitor.found == {"kinformer.y"}

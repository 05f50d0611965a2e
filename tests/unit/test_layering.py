"""Dependencies point one way: the library never imports the embedded server (nor the applications on top).

The library is every module of ``kinformer`` except ``kinformer.server`` itself and the applications that
may use it: ``kinformer.demo``, ``kinformer.cli`` (which names its subcommands' modules as strings) and
``kinformer.testing`` (fixtures that start an embedded server). Imports are read from the source, so a
lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kinformer

SRC = Path(kinformer.__file__).parent
APPLICATIONS = ("kinformer.server", "kinformer.demo", "kinformer.cli", "kinformer.testing")


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names; relative imports resolved)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def library_modules() -> list[Path]:
    return [p for p in sorted(SRC.rglob("*.py")) if not _is_within(_module_name(p), APPLICATIONS)]


def test_the_library_never_imports_the_server_or_the_applications() -> None:
    offenders = {
        _module_name(path): sorted(m for m in _imports(path) if _is_within(m, APPLICATIONS))
        for path in library_modules()
    }
    assert {name: mods for name, mods in offenders.items() if mods} == {}


def test_the_check_sees_library_modules_and_lazy_imports() -> None:
    names = {_module_name(p) for p in library_modules()}
    assert {"kinformer.cache.reflector", "kinformer.controller.manager", "kinformer.meta"} <= names
    assert not any(_is_within(n, APPLICATIONS) for n in names)
    sample = SRC / "demo" / "run.py"  # imports the server lazily, inside functions
    assert "kinformer.server" in _imports(sample)

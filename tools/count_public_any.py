"""Count the public signatures of the library that mention ``Any`` (parameters or return).

Public: a function or method whose name, and whose classes' and modules' names, do not start with "_", in the
library (src/kinformer less the applications server, cluster, demo, cli, testing, and the generated kinds).
An overloaded function counts its ``@overload`` signatures (what type checkers see), not its implementation.

    python3 tools/count_public_any.py [ROOT]     # prints the total, then the ten modules with most
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

APPLICATIONS = ("server", "cluster", "demo", "cli", "testing", "kinds")


def _mentions_any(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    annotations = [p.annotation for p in params if p is not None and p.annotation is not None]
    if fn.returns is not None:
        annotations.append(fn.returns)
    return any("Any" in ast.unparse(x) for x in annotations)


def _is_overload(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(ast.unparse(d) in ("overload", "typing.overload") for d in fn.decorator_list)


def _count(body: list[ast.stmt]) -> int:
    found = 0
    overloaded = {n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _is_overload(n)}
    for node in body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            found += _count(node.body)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            if node.name in overloaded and not _is_overload(node):
                continue  # the implementation of an overloaded function
            found += _mentions_any(node)
    return found


def count(root: Path) -> Counter[str]:
    package = root / "src" / "kinformer"
    per_module: Counter[str] = Counter()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.parts[0] in APPLICATIONS or any(p.startswith("_") and p != "__init__.py" for p in rel.parts):
            continue
        per_module[rel.as_posix()] = _count(ast.parse(path.read_text()).body)
    return per_module


if __name__ == "__main__":
    counts = count(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1])
    print(sum(counts.values()))
    for module, n in counts.most_common(10):
        print(f"{n:4d}  {module}")

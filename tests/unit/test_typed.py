"""Typed end to end: a class stands for its resource in the client, the informers, the listers and the
reconcilers, so mypy checks field use (``kinformer.kinds`` TypedDicts and the user's own types).

One mypy run checks two snippets and the example programs: the well-typed snippet and the examples must pass,
each misuse in the other snippet must be reported.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kinformer
from kinformer.typed_resources import resource_spec

SRC = Path(kinformer.__file__).parent.parent
EXAMPLES = SRC.parent / "examples"

GOOD = '''
from kinformer import sync as kis
from kinformer import Client, Manager, ObjectReconciler, Result, SharedInformerFactory
from kinformer.kinds.apps_v1 import Deployment
from kinformer.kinds.core_v1 import ConfigMap


async def use(client: Client, factory: SharedInformerFactory) -> int:
    d = await client.get(Deployment, "web", "default")
    replicas: int = d["spec"].get("replicas", 1)
    cms = factory.informer(ConfigMap).lister().namespaced("default").list()
    data: dict[str, str] = cms[0].get("data", {})
    created = await client.create(ConfigMap, {"metadata": {"name": "x"}}, "default")
    return replicas + len(data) + len(created.get("binaryData", {}))


class Scaler(ObjectReconciler[Deployment]):
    async def reconcile(self, obj: Deployment) -> Result | None:
        cm = await self.client.get(ConfigMap, "limits", "default")  # the Manager's cache, typed
        return Result(requeue_after=float(obj["spec"].get("replicas", 0)) + len(cm.get("data", {})))


def setup(mgr: Manager) -> None:
    mgr.controller(Scaler()).for_(Deployment).owns(ConfigMap).writes_status()


def blocking(client: kis.Client) -> str:  # the blocking facade keeps the resource-name spelling
    return str(client.get("configmaps", "x", "default")["data"])
'''

BAD = '''
from kinformer import Client, ObjectReconciler, Result, SharedInformerFactory
from kinformer.kinds.apps_v1 import Deployment
from kinformer.kinds.core_v1 import ConfigMap


async def misuse(client: Client, factory: SharedInformerFactory) -> None:
    d = await client.get(Deployment, "web", "default")
    name: int = d["metadata"]["name"]  # BAD-1: a str
    d["spec"]["replica"]  # BAD-2: no such key
    cm = factory.informer(ConfigMap).lister().get("x", "default")
    cm["data"] + 1  # BAD-3: a dict


class Scaler(ObjectReconciler[Deployment]):
    async def reconcile(self, obj: Deployment) -> Result | None:
        cm = await self.client.get(ConfigMap, "limits", "default")
        cm["data"]["limit"] + 1  # BAD-5: a str
        return Result(requeue_after=obj["spec"]["paused"] + "s")  # BAD-4: a bool
'''


def run_mypy(tmp_path: Path, *files: Path) -> str:
    config = SRC.parent / "pyproject.toml"
    proc = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context",
                           "--cache-dir", str(tmp_path / ".mypy_cache"), "--config-file", str(config),
                           *map(str, files)],
                          capture_output=True, text=True, env={"MYPYPATH": str(SRC), "PATH": ""}, timeout=600,
                          check=False)
    return proc.stdout + proc.stderr


@pytest.mark.slow
def test_mypy_passes_typed_use_and_fails_each_misuse_of_a_typed_field(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(textwrap.dedent(GOOD))
    bad.write_text(textwrap.dedent(BAD))
    examples = [p for p in EXAMPLES.rglob("*.py") if not p.name.startswith("test_")]  # programs, typed too
    out = run_mypy(tmp_path, good, bad, *examples)
    errors = [line.split(":")[:2] for line in out.splitlines() if ": error:" in line]
    assert not [e for e in errors if Path(e[0]).name != "bad.py"], out
    lines = bad.read_text().splitlines()
    flagged = {int(line) for file, line in errors if Path(file).name == "bad.py"}
    for n in range(1, 6):
        number = next(i for i, text in enumerate(lines, 1) if f"BAD-{n}" in text)
        assert number in flagged, f"mypy did not flag BAD-{n} (line {number}):\n{out}"


def test_the_package_names_are_the_same_for_type_checkers() -> None:
    """kinformer imports its public names lazily; the ``if TYPE_CHECKING:`` imports say the same to mypy."""
    tree = ast.parse((SRC / "kinformer" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {alias.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
    assert typed == kinformer._EXPORTS


def test_a_class_stands_for_its_resource() -> None:
    from kinformer.kinds.apps_v1 import Deployment
    from kinformer.kinds.core_v1 import ConfigMap
    from kinformer.kinds.rbac_v1 import ClusterRole

    class Website(dict):  # type: ignore[type-arg]
        pass

    class Pinned(dict):  # type: ignore[type-arg]
        __api_version__ = "example.com/v1"

    assert resource_spec(ConfigMap) == "v1/ConfigMap" and resource_spec(Deployment) == "apps/v1/Deployment"
    assert resource_spec(ClusterRole) == "rbac.authorization.k8s.io/v1/ClusterRole"
    assert resource_spec(Website) == "Website" and resource_spec(Pinned) == "example.com/v1/Pinned"
    with pytest.raises(TypeError, match="a resource is a name"):
        resource_spec("configmaps")  # type: ignore[arg-type]

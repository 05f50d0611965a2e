"""kinformer.kinds: TypedDict views generated from the API definitions the embedded server serves."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import is_typeddict

from kinformer.kinds import apimachinery, apps_v1, coordination_v1, core_v1

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_kinds", ROOT / "tools" / "gen_kinds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_package_is_what_the_generator_writes() -> None:
    gen = _generator()
    files = gen.render()
    package = ROOT / "src" / "kinformer" / "kinds"
    assert sorted(files) == sorted(p.name for p in package.glob("*.py"))
    stale = [name for name, text in files.items() if (package / name).read_text() != text]
    assert stale == [], "run: python tools/gen_kinds.py"


def _annotation(view: type, field: str) -> str:
    """A field's annotation as written (the views are types for checkers: annotations stay unevaluated)."""
    value = view.__annotations__[field]
    return getattr(value, "__forward_arg__", value)


def test_views_follow_the_schemas() -> None:
    assert is_typeddict(core_v1.ConfigMap) and is_typeddict(apps_v1.Deployment)
    fields = {"apiVersion", "kind", "metadata", "data", "binaryData", "immutable"}
    assert fields <= set(core_v1.ConfigMap.__annotations__)
    assert _annotation(core_v1.ConfigMap, "data") == "dict[str, str]"
    assert _annotation(apps_v1.Deployment, "spec") == "DeploymentSpec"
    assert _annotation(apps_v1.DeploymentSpec, "selector") == "Required[apimachinery.LabelSelector]"
    assert _annotation(coordination_v1.Lease, "metadata") == "apimachinery.ObjectMeta"
    assert is_typeddict(apimachinery.ObjectMeta)


def test_a_view_describes_a_plain_object() -> None:
    cm: core_v1.ConfigMap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}}
    assert cm["metadata"].get("name") == "x"

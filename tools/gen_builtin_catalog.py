"""Regenerate ``src/kinformer/server/schema/builtin_catalog.py``: the resources kube-apiserver 1.32 serves by default.

Source of the facts:

* lightkube-models 1.32 (``pip download --no-deps 'lightkube-models>=1.32,<1.33'`` and unzip it, or install it):
  its ``lightkube/resources/<group>_<version>.py`` modules carry, per resource, the group/version/kind, plural,
  scope, verbs and subresources that kube 1.32's OpenAPI paths define. The modules are read with ``ast``, never
  imported. Only GA versions are kept: kube-apiserver 1.32 enables no alpha or beta group/version by default.
* the tables below (:data:`NAMES`, :data:`CONNECT`, :data:`GATED_OFF`, :data:`VERBS`), for what no package
  ships: short names and categories (``ShortNames()`` / ``Categories()`` of kube's REST storages), the connect
  subresources (exec, attach, portforward, proxy), wrong verbs, and the subresources that kube 1.32 serves only
  behind a feature gate that is off by default.

Usage: ``python tools/gen_builtin_catalog.py [LIGHTKUBE_MODELS_DIR]``; the output is written in place.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "src" / "kinformer" / "server" / "schema" / "builtin_catalog.py"

_ALL = ("all",)
_EXT = ("api-extensions",)
# (group, plural) -> short names, categories
NAMES: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("", "componentstatuses"): (("cs",), ()),
    ("", "configmaps"): (("cm",), ()),
    ("", "endpoints"): (("ep",), ()),
    ("", "events"): (("ev",), ()),
    ("", "limitranges"): (("limits",), ()),
    ("", "namespaces"): (("ns",), ()),
    ("", "nodes"): (("no",), ()),
    ("", "persistentvolumeclaims"): (("pvc",), ()),
    ("", "persistentvolumes"): (("pv",), ()),
    ("", "pods"): (("po",), _ALL),
    ("", "replicationcontrollers"): (("rc",), _ALL),
    ("", "resourcequotas"): (("quota",), ()),
    ("", "serviceaccounts"): (("sa",), ()),
    ("", "services"): (("svc",), _ALL),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ((), _EXT),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ((), _EXT),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): ((), _EXT),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): ((), _EXT),
    ("apiextensions.k8s.io", "customresourcedefinitions"): (("crd", "crds"), _EXT),
    ("apiregistration.k8s.io", "apiservices"): ((), _EXT),
    ("apps", "daemonsets"): (("ds",), _ALL),
    ("apps", "deployments"): (("deploy",), _ALL),
    ("apps", "replicasets"): (("rs",), _ALL),
    ("apps", "statefulsets"): (("sts",), _ALL),
    ("autoscaling", "horizontalpodautoscalers"): (("hpa",), _ALL),
    ("batch", "cronjobs"): (("cj",), _ALL),
    ("batch", "jobs"): ((), _ALL),
    ("certificates.k8s.io", "certificatesigningrequests"): (("csr",), ()),
    ("events.k8s.io", "events"): (("ev",), ()),
    ("networking.k8s.io", "ingresses"): (("ing",), ()),
    ("networking.k8s.io", "networkpolicies"): (("netpol",), ()),
    ("policy", "poddisruptionbudgets"): (("pdb",), ()),
    ("scheduling.k8s.io", "priorityclasses"): (("pc",), ()),
    ("storage.k8s.io", "storageclasses"): (("sc",), ()),
}
_PROXY_VERBS = ("create", "delete", "get", "patch", "update")
# (group, plural) -> connect subresources (name, verbs); their response kind is the parent kind, as kube says.
CONNECT: dict[tuple[str, str], tuple[tuple[str, tuple[str, ...]], ...]] = {
    ("", "pods"): (("attach", ("create", "get")), ("exec", ("create", "get")),
                   ("portforward", ("create", "get")), ("proxy", _PROXY_VERBS)),
    ("", "nodes"): (("proxy", _PROXY_VERBS),),
    ("", "services"): (("proxy", _PROXY_VERBS),),
}
# Subresources lightkube-models 1.32 lists that kube-apiserver 1.32 does not serve by default.
GATED_OFF = {("", "pods", "resize")}  # InPlacePodVerticalScaling: alpha in 1.32

# Verbs the OpenAPI paths suggest but kube's REST storage does not implement (componentstatuses cannot be watched).
VERBS: dict[tuple[str, str], tuple[str, ...]] = {("", "componentstatuses"): ("get", "list")}

_VERB_NAMES = {"post": "create", "put": "update"}
_GA = re.compile(r"^v\d+$")


def _models_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg) / "lightkube" / "resources"
    spec = importlib.util.find_spec("lightkube.resources")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("lightkube-models 1.32 not found: pass the directory it was unzipped to")
    return Path(next(iter(spec.submodule_search_locations)))


def _literal(node: ast.expr) -> object:
    if isinstance(node, ast.Call):  # res.ResourceDef('apps', 'v1', 'Deployment')
        return tuple(ast.literal_eval(a) for a in node.args)
    return ast.literal_eval(node)


def _api_infos(path: Path):
    """(base class name, keyword dict) of every ``_api_info = res.ApiInfo(...)`` in one module."""
    for cls in ast.parse(path.read_text()).body:
        if not isinstance(cls, ast.ClassDef) or not cls.bases:
            continue
        base = ast.unparse(cls.bases[0]).removeprefix("res.")
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "_api_info":
                assert isinstance(stmt.value, ast.Call)
                yield base, {k.arg: _literal(k.value) for k in stmt.value.keywords}


def _verbs(raw: list[str]) -> tuple[str, ...]:
    return tuple(sorted({_VERB_NAMES.get(v, v) for v in raw if not v.startswith("global_")}))


def collect(resources_dir: Path) -> list[tuple]:
    mains: dict[tuple[str, str, str], dict] = {}
    subs: dict[tuple[str, str, str], list[tuple]] = {}
    for path in sorted(resources_dir.glob("*_v*.py")):
        for base, kw in _api_infos(path):
            parent = kw.get("parent") or kw["resource"]
            group, version, kind = parent
            if not _GA.match(version):
                continue
            key = (group, version, kw["plural"])
            if "action" in kw:
                if (group, kw["plural"], kw["action"]) in GATED_OFF:
                    continue
                sub_group, sub_version, sub_kind = kw["resource"]
                subs.setdefault(key, []).append((kw["action"], _verbs(kw["verbs"]), sub_group, sub_version,
                                                 sub_kind))
            else:
                mains[key] = {"kind": kind, "namespaced": base.startswith("Namespaced"), "verbs": _verbs(kw["verbs"])}
    rows = []
    for (group, version, plural), main in sorted(mains.items()):
        short, categories = NAMES.get((group, plural), ((), ()))
        sub_rows = list(subs.get((group, version, plural), ()))
        for name, verbs in CONNECT.get((group, plural), ()):
            sub_rows.append((name, verbs, group, version, main["kind"]))
        verbs = VERBS.get((group, plural), main["verbs"])
        rows.append((group, version, main["kind"], plural, main["kind"].lower(), main["namespaced"], verbs,
                     short, categories, tuple(sorted(sub_rows))))
    return rows


def render(rows: list[tuple]) -> str:
    lines = [
        '"""The resources kube-apiserver 1.32 serves by default.',
        "",
        "Generated by tools/gen_builtin_catalog.py from lightkube-models 1.32 and its tables; do not edit.",
        "",
        "Each row: (group, version, kind, plural, singular, namespaced, verbs, short names, categories, subresources);",
        "a subresource is (name, verbs, response group, response version, response kind).",
        '"""',
        "# ruff: noqa: E501",
        "",
        "RESOURCES = (",
    ]
    lines += [f"    {row!r}," for row in rows]
    lines += [")", ""]
    return "\n".join(lines)


def main() -> None:
    rows = collect(_models_dir(sys.argv[1] if len(sys.argv) > 1 else None))
    OUT.write_text(render(rows))
    print(f"wrote {len(rows)} resources to {OUT}")


if __name__ == "__main__":
    main()

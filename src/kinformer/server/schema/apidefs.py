"""The Kubernetes 1.32 API definitions: the schema of every built-in kind, from the kubernetes-validate package.

kubernetes-validate ships, per Kubernetes release, the OpenAPI definitions of kube-apiserver's swagger converted to
JSON Schema (``type: [T, "null"]`` for optional fields, ``$ref: "#/$defs/<name>"``), keeping the Kubernetes
extensions: ``x-kubernetes-group-version-kind``, ``x-kubernetes-patch-merge-key``/``-patch-strategy``,
``x-kubernetes-list-type``/``-list-map-keys``, ``x-kubernetes-map-type``. This module reads the 1.32 release's
file without importing the package (so neither jsonschema nor its other dependencies load).

Invariants:

* Nothing is read until a caller needs a schema. The file is then split once into its definitions' raw bytes
  (a few ms, nothing built), and a definition is decoded only when first asked for: writing a Deployment decodes
  the definitions Deployment refers to, not the whole release. :func:`loaded` says whether the file was read.
* :func:`openapi_definition` returns the OpenAPI form (single ``type``, ``$ref`` to ``ref_prefix``) of one
  definition, converted once per (name, prefix) and shared: callers must not mutate it.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import orjson

__all__ = [
    "KUBE_RELEASE",
    "closure",
    "definition",
    "definition_name",
    "definitions",
    "loaded",
    "openapi_definition",
    "ref_name",
]

KUBE_RELEASE = "1.32.0"
_PACKAGE = "kubernetes_validate"
_FILE = f"kubernetes-json-schema/v{KUBE_RELEASE}-local/_definitions.json"
_REF = "#/$defs/"

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"

class _File(msgspec.Struct):
    defs: dict[str, msgspec.Raw] = msgspec.field(name="$defs")


class _Definitions(Mapping[str, Mapping[str, Any]]):
    """The release's definitions by name, each decoded from its raw bytes on first access."""

    __slots__ = ("_decoded", "_raw")

    def __init__(self, raw: dict[str, msgspec.Raw]) -> None:
        self._raw = raw
        self._decoded: dict[str, Mapping[str, Any]] = {}

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        found = self._decoded.get(name)
        if found is None:
            found = self._decoded[name] = orjson.loads(bytes(self._raw[name]))
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def mentions(self, name: str, text: bytes) -> bool:
        """Whether definition ``name``'s raw JSON contains ``text`` (no decoding)."""
        return text in bytes(self._raw[name])


_state: dict[str, _Definitions] = {}


def _path() -> Path:
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the {_PACKAGE} package (Kubernetes API schemas) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / _FILE


def definitions() -> _Definitions:
    """Every definition of the release, by OpenAPI name (``io.k8s.api.apps.v1.Deployment``), in JSON Schema form."""
    defs = _state.get("defs")
    if defs is None:
        defs = _state["defs"] = _Definitions(msgspec.json.decode(_path().read_bytes(), type=_File).defs)
    return defs


def loaded() -> bool:
    """True once the definitions file has been read."""
    return "defs" in _state


def definition(name: str) -> Mapping[str, Any] | None:
    defs = definitions()
    return defs[name] if name in defs else None


@functools.cache
def _by_suffix() -> dict[tuple[str, str], tuple[str, ...]]:
    """(version, kind) -> the definition names ending in ``.<version>.<kind>`` (names only, nothing decoded)."""
    index: dict[tuple[str, str], list[str]] = {}
    for name in definitions():
        parts = name.rsplit(".", 2)
        if len(parts) == 3:
            index.setdefault((parts[1], parts[2]), []).append(name)
    return {key: tuple(names) for key, names in index.items()}


@functools.cache
def definition_name(group: str, version: str, kind: str) -> str | None:
    """The definition of kind ``group/version/kind`` (by its ``x-kubernetes-group-version-kind``), or None.

    Only the few definitions named ``*.<version>.<kind>`` are decoded to compare their group.
    """
    for name in _by_suffix().get((version, kind), ()):
        gvks = definitions()[name].get("x-kubernetes-group-version-kind") or []
        if len(gvks) == 1 and (gvks[0].get("group", ""), gvks[0].get("version"), gvks[0].get("kind")) == (
                group, version, kind):
            return name
    return None


def ref_name(node: Mapping[str, Any]) -> str | None:
    """The definition name a schema node refers to (``$ref``), or None."""
    ref = node.get("$ref")
    return ref[len(_REF):] if isinstance(ref, str) and ref.startswith(_REF) else None


def closure(names: Iterable[str]) -> list[str]:
    """``names`` and every definition they refer to, transitively, sorted."""
    seen: set[str] = set()
    todo = [n for n in names if n in definitions()]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(r for r in _refs(name) if r not in seen)
    return sorted(seen)


@functools.cache
def _refs(name: str) -> tuple[str, ...]:
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = ref_name(node)
            if ref is not None:
                out.add(ref)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(definition(name) or {})
    defs = definitions()
    return tuple(sorted(r for r in out if r in defs))


# ------------------------------------------------------------------------------------------- OpenAPI form

_SPECIAL: dict[str, dict[str, Any]] = {
    INT_OR_STRING: {"type": "string", "format": "int-or-string"},
    QUANTITY: {"type": "string"},
}


@functools.cache
def openapi_definition(name: str, ref_prefix: str, wrap_refs: bool) -> Mapping[str, Any]:
    """Definition ``name`` in OpenAPI form; refs point at ``ref_prefix + name``; ``wrap_refs`` puts a ref that has
    sibling keys (a description) inside ``allOf``, as kube's OpenAPI v3 documents do (v2 keeps ``$ref`` beside
    its description)."""
    raw = definitions()[name]
    if name in _SPECIAL:
        out = dict(_SPECIAL[name])
        if raw.get("description"):
            out["description"] = raw["description"]
        return out
    converted = _convert(raw, ref_prefix, wrap_refs)
    props = converted.get("properties")
    if raw.get("x-kubernetes-group-version-kind") and isinstance(props, dict):
        for field in ("apiVersion", "kind"):  # the package adds an enum of the kind's own value: kube has none
            if isinstance(props.get(field), dict):
                props[field].pop("enum", None)
    return converted


def _convert(node: Any, ref_prefix: str, wrap_refs: bool) -> Any:
    if isinstance(node, list):
        return [_convert(v, ref_prefix, wrap_refs) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            out["type"] = types[0] if len(types) == 1 else types
        elif key == "$ref":
            continue
        elif key in ("properties", "additionalProperties", "items") and isinstance(value, dict):
            out[key] = ({k: _convert(v, ref_prefix, wrap_refs) for k, v in value.items()} if key == "properties"
                        else _convert(value, ref_prefix, wrap_refs))
        else:
            out[key] = value
    ref = ref_name(node)
    if ref is not None:
        target = {"$ref": ref_prefix + ref}
        if wrap_refs and out:
            return {"allOf": [target], **out}
        return {**target, **out}
    return out

"""Structural schemas of custom resources: schema checks, validation against a schema, pruning and defaulting.

Every function reads a CRD version's ``openAPIV3Schema`` as given and never mutates its inputs, except that
:func:`prune` and :func:`apply_defaults` return new objects.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from kinformer.server.machinery.causes import (
    Cause,
    _render,
    duplicate,
    invalid,
    json_type,
    not_supported,
    required,
    too_long,
    type_invalid,
)

__all__ = ["apply_defaults", "prune", "validate_against_schema", "validate_schema_structure"]

_SCHEMA_TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_SCHEMA_BOOLS = ("nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string",
                 "x-kubernetes-embedded-resource", "exclusiveMinimum", "exclusiveMaximum", "uniqueItems")
_SCHEMA_COUNTS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")


def validate_schema_structure(schema: Any, path: str = "openAPIV3Schema") -> list[Cause]:
    """Causes for a CRD schema the functions below cannot use safely (wrong shapes, bad patterns).

    Every schema accepted here is safe for :func:`validate_against_schema`, :func:`prune` and
    :func:`apply_defaults`; the CRD validator runs it on each version's ``openAPIV3Schema``.
    """
    if not isinstance(schema, Mapping):
        return [invalid(path, schema, "must be an object")]
    causes: list[Cause] = []
    kind = schema.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in _SCHEMA_TYPES):
        causes.append(not_supported(f"{path}.type", kind, sorted(_SCHEMA_TYPES)))
    for name in _SCHEMA_BOOLS:
        if name in schema and not isinstance(schema[name], bool):
            causes.append(invalid(f"{path}.{name}", schema[name], "must be a boolean"))
    for name in _SCHEMA_COUNTS:
        value = schema.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            causes.append(invalid(f"{path}.{name}", value, "must be a non-negative integer"))
    for name in ("minimum", "maximum"):
        value = schema.get(name)
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            causes.append(invalid(f"{path}.{name}", value, "must be a number"))
    causes += _validate_schema_lists(schema, path)
    causes += _validate_schema_children(schema, path)
    return causes


def _validate_schema_lists(schema: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    for name in ("required", "x-kubernetes-list-map-keys"):
        value = schema.get(name)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            causes.append(invalid(f"{path}.{name}", value, "must be a list of strings"))
    if schema.get("enum") is not None and not isinstance(schema["enum"], list):
        causes.append(invalid(f"{path}.enum", schema["enum"], "must be a list"))
    list_type = schema.get("x-kubernetes-list-type")
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        causes.append(not_supported(f"{path}.x-kubernetes-list-type", list_type, ["atomic", "map", "set"]))
    pattern = schema.get("pattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as exc:
            causes.append(invalid(f"{path}.pattern", pattern, f"must be a valid regular expression: {exc}"))
    return causes


def _validate_schema_children(schema: Mapping[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    props = schema.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            causes.append(invalid(f"{path}.properties", props, "must be an object"))
        else:
            for name, sub in props.items():
                causes += validate_schema_structure(sub, f"{path}.properties[{name}]")
    items = schema.get("items")
    if items is not None:
        causes += validate_schema_structure(items, f"{path}.items")
    additional = schema.get("additionalProperties")
    if additional is not None and not isinstance(additional, bool):
        causes += validate_schema_structure(additional, f"{path}.additionalProperties")
    return causes


_JSON_TYPES = {"object": "object", "array": "array", "string": "string", "integer": "integer",
               "number": "number", "boolean": "boolean"}



def _type_ok(expected: str, value: Any) -> bool:
    actual = json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return actual == expected


def validate_against_schema(schema: Mapping[str, Any], obj: Any) -> list[Cause]:
    """Causes for ``obj`` against a CRD ``openAPIV3Schema``; apiVersion/kind/metadata at the root are implicit."""
    causes: list[Cause] = []
    _validate_node(schema, obj, "", causes, root=True)
    return causes


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _validate_node(schema: Mapping[str, Any], value: Any, path: str, causes: list[Cause], *,
                   root: bool = False) -> None:
    if value is None:
        if not schema.get("nullable"):
            if schema.get("type") and not schema.get("x-kubernetes-preserve-unknown-fields"):
                causes.append(type_invalid(path, value, schema["type"]))
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            causes.append(type_invalid(path, value, "integer or string"))
            return
    elif schema.get("type") in _JSON_TYPES and not _type_ok(schema["type"], value):
        causes.append(type_invalid(path, value, schema["type"]))
        return
    _validate_scalar(schema, value, path, causes)
    if isinstance(value, dict):
        _validate_object_node(schema, value, path, causes, root=root)
    elif isinstance(value, list):
        _validate_array_node(schema, value, path, causes)


def _validate_scalar(schema: Mapping[str, Any], value: Any, path: str, causes: list[Cause]) -> None:
    label = path or "<root>"
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        causes.append(not_supported(path, value, list(enum)))
    if isinstance(value, int | float) and not isinstance(value, bool):
        minimum, maximum = schema.get("minimum"), schema.get("maximum")
        if minimum is not None:
            exclusive = schema.get("exclusiveMinimum") is True
            if value < minimum or (exclusive and value == minimum):
                op = "greater than" if exclusive else "greater than or equal to"
                causes.append(invalid(path, value, f"{label} in body should be {op} {_render(minimum)}"))
        if maximum is not None:
            exclusive = schema.get("exclusiveMaximum") is True
            if value > maximum or (exclusive and value == maximum):
                op = "less than" if exclusive else "less than or equal to"
                causes.append(invalid(path, value, f"{label} in body should be {op} {_render(maximum)}"))
    if isinstance(value, str):
        if schema.get("maxLength") is not None and len(value) > schema["maxLength"]:
            causes.append(too_long(path, schema["maxLength"]))
        if schema.get("minLength") is not None and len(value) < schema["minLength"]:
            causes.append(invalid(path, value, f"{label} in body should be at least {schema['minLength']} chars long"))
        pattern = schema.get("pattern")
        if pattern is not None and not re.search(pattern, value):
            causes.append(invalid(path, value, f"{label} in body should match '{pattern}'"))


def _validate_object_node(schema: Mapping[str, Any], value: dict[str, Any], path: str, causes: list[Cause], *,
                          root: bool) -> None:
    props = schema.get("properties") or {}
    implicit = ("apiVersion", "kind", "metadata") if root or schema.get("x-kubernetes-embedded-resource") else ()
    for name in schema.get("required") or ():
        if name not in value and name not in implicit:
            causes.append(required(_join(path, name)))
    additional = schema.get("additionalProperties")
    for name, item in value.items():
        if name in implicit and name not in props:
            continue
        sub = props.get(name)
        if sub is None and isinstance(additional, Mapping):
            sub = additional
        if sub is not None:
            _validate_node(sub, item, _join(path, name), causes)
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        causes.append(too_long(path, schema["maxProperties"], "properties"))


def _validate_array_node(schema: Mapping[str, Any], value: list[Any], path: str, causes: list[Cause]) -> None:
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            _validate_node(items, item, f"{path}[{i}]", causes)
    if schema.get("maxItems") is not None and len(value) > schema["maxItems"]:
        causes.append(too_long(path, schema["maxItems"], "items"))
    if schema.get("minItems") is not None and len(value) < schema["minItems"]:
        causes.append(invalid(path, len(value), f"{path} in body should have at least {schema['minItems']} items"))
    if schema.get("x-kubernetes-list-type") in ("set", "map"):
        keys = schema.get("x-kubernetes-list-map-keys") or ()
        seen = set()
        for i, item in enumerate(value):
            ident = json.dumps([item.get(k) for k in keys] if keys and isinstance(item, dict) else item,
                               sort_keys=True)
            if ident in seen:
                causes.append(duplicate(f"{path}[{i}]", item))
            seen.add(ident)


def prune(schema: Mapping[str, Any], obj: Any) -> tuple[Any, list[str]]:
    """Drop fields the structural schema does not specify; returns (new object, removed field paths).

    ``x-kubernetes-preserve-unknown-fields`` keeps a subtree's unknown fields; apiVersion, kind and metadata
    survive at the root and in embedded resources. Paths look like ``spec.foo`` and ``spec.items[0].bar``.
    """
    removed: list[str] = []
    return _prune(schema, copy.deepcopy(obj), "", removed, root=True), removed


def _prune(schema: Mapping[str, Any] | None, value: Any, path: str, removed: list[str], *, root: bool = False) -> Any:
    if schema is None:
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        keep_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or additional is True
        implicit = root or schema.get("x-kubernetes-embedded-resource")
        for name in list(value):
            if implicit and name in ("apiVersion", "kind", "metadata"):
                if name == "metadata" and not root and isinstance(value[name], dict):
                    value[name] = _prune_embedded_meta(value[name], _join(path, name), removed)
                continue
            sub = props.get(name)
            if sub is None and isinstance(additional, Mapping):
                sub = additional
            if sub is not None:
                value[name] = _prune(sub, value[name], _join(path, name), removed)
            elif not keep_unknown:
                removed.append(_join(path, name))
                del value[name]
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            value[i] = _prune(schema["items"], item, f"{path}[{i}]", removed)
    return value


_EMBEDDED_META_FIELDS = frozenset({"name", "namespace", "generateName", "labels", "annotations", "finalizers"})


def _prune_embedded_meta(meta: dict[str, Any], path: str, removed: list[str]) -> dict[str, Any]:
    for name in [n for n in meta if n not in _EMBEDDED_META_FIELDS]:
        removed.append(_join(path, name))
        del meta[name]
    return meta


def apply_defaults(schema: Mapping[str, Any], obj: Any) -> Any:
    """A copy of ``obj`` with the schema's ``default`` values filled in for absent properties, depth first.

    Defaults apply only inside objects that exist (a defaulted object's own children are defaulted too).
    """
    return _default(schema, copy.deepcopy(obj))


def _default(schema: Mapping[str, Any], value: Any) -> Any:
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for name, sub in props.items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = _default(sub, value[name])
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for name in value:
                if name not in props:
                    value[name] = _default(additional, value[name])
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            value[i] = _default(schema["items"], item)
    return value

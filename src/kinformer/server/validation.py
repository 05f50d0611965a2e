"""Object validation, name generation and structural-schema handling (pruning, defaulting) for the API server.

Validators return Kubernetes Status causes ``{"reason", "message", "field"}`` (empty list = valid); the
message texts follow kube-apiserver's so clients and users see familiar errors. Nothing here mutates its
inputs except :func:`apply_defaults`, which documents that it returns a new object.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from kinformer.names import (
    is_config_map_key,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
)
from kinformer.server.patch import ResourceInfoLike

__all__ = [
    "apply_defaults",
    "generate_name",
    "invalid_message",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "prune",
    "unknown_fields",
    "validate_against_schema",
    "validate_object",
    "validate_schema_structure",
]

Cause = dict[str, str]

# --------------------------------------------------------------------------------------------- name rules
# (the checks themselves are kinformer.names, shared with selectors; re-exported here)

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_PREFIX = 63 - 5


def generate_name(prefix: str) -> str:
    """``prefix`` (cut to 58 chars) followed by 5 random characters from kube's consonant-digit alphabet."""
    return prefix[:_MAX_GENERATED_PREFIX] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


# ------------------------------------------------------------------------------------------------- causes

def _render(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def invalid(field: str, value: Any, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {_render(value)}: {detail}", "field": field}


def required(field: str, detail: str = "") -> Cause:
    return {"reason": "FieldValueRequired", "message": "Required value" + (f": {detail}" if detail else ""),
            "field": field}


def not_supported(field: str, value: Any, supported: list[Any]) -> Cause:
    valid = ", ".join(_render(v) for v in supported)
    return {"reason": "FieldValueNotSupported", "message": f"Unsupported value: {_render(value)}: supported values: "
            f"{valid}", "field": field}


def too_long(field: str, limit: int, unit: str = "bytes") -> Cause:
    return {"reason": "FieldValueTooLong", "message": f"Too long: may not be more than {limit} {unit}", "field": field}


def duplicate(field: str, value: Any) -> Cause:
    return {"reason": "FieldValueDuplicate", "message": f"Duplicate value: {_render(value)}", "field": field}


def type_invalid(field: str, value: Any, expected: str) -> Cause:
    actual = _render(_go_type(value))
    return {"reason": "FieldValueTypeInvalid", "message": f"Invalid value: {actual}: {field or '<root>'} in "
            f"body must be of type {expected}: {actual}", "field": field}


def invalid_message(kind: str, name: str, causes: list[Cause]) -> str:
    """The Status message of a 422 answer: ``Kind "name" is invalid: field: message, ...``."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    if len(parts) == 1:
        return f'{kind} "{name}" is invalid: {parts[0]}'
    return f'{kind} "{name}" is invalid: [{", ".join(parts)}]'


# ------------------------------------------------------------------------------------------------ metadata

_TOTAL_ANNOTATION_SIZE = 256 * 1024
_CONFIG_SIZE = 1024 * 1024


def _name_validator(info: ResourceInfoLike) -> Callable[[str], list[str]]:
    if info.kind == "Service":
        return is_dns1035_label
    if info.kind == "Namespace":
        return is_dns1123_label
    return is_dns1123_subdomain


def _validate_metadata(info: ResourceInfoLike, meta: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes: list[Cause] = []
    name = meta.get("name")
    if not name:
        if not meta.get("generateName"):
            causes.append(required("metadata.name", "name or generateName is required"))
    elif not isinstance(name, str):
        causes.append(invalid("metadata.name", name, "must be a string"))
    else:
        causes += [invalid("metadata.name", name, msg) for msg in _name_validator(info)(name)]
    namespace = meta.get("namespace")
    if info.namespaced and namespace:
        causes += [invalid("metadata.namespace", namespace, msg) for msg in is_dns1123_label(str(namespace))]
    causes += _validate_labels(meta.get("labels"), "metadata.labels")
    causes += _validate_annotations(meta.get("annotations"), "metadata.annotations")
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list):
        causes.append(invalid("metadata.finalizers", finalizers, "must be a list of strings"))
    else:
        for i, finalizer in enumerate(finalizers):
            if finalizer is None:
                finalizer = ""  # a JSON null decodes to the empty string in a Go []string
            if not isinstance(finalizer, str):
                causes.append(invalid(f"metadata.finalizers[{i}]", finalizer, "must be a string"))
                continue
            for msg in is_qualified_name(finalizer):
                causes.append(invalid(f"metadata.finalizers[{i}]", finalizer, msg))
    if old is not None:
        causes += _validate_immutable_meta(meta, old.get("metadata") or {})
    return causes


def _validate_immutable_meta(meta: Mapping[str, Any], old_meta: Mapping[str, Any]) -> list[Cause]:
    causes = []
    for field in ("name", "namespace"):
        if (meta.get(field) or "") != (old_meta.get(field) or ""):
            causes.append(invalid(f"metadata.{field}", meta.get(field), "field is immutable"))
    return causes


def _validate_labels(labels: Any, field: str) -> list[Cause]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [invalid(field, labels, "must be a map of string keys to string values")]
    causes = []
    for key, value in labels.items():
        causes += [invalid(field, key, msg) for msg in is_qualified_name(str(key))]
        if not isinstance(value, str):
            causes.append(invalid(f"{field}", value, "label values must be strings"))
        else:
            causes += [invalid(field, value, msg) for msg in is_valid_label_value(value)]
    return causes


def _validate_annotations(annotations: Any, field: str) -> list[Cause]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return [invalid(field, annotations, "must be a map of string keys to string values")]
    causes = []
    total = 0
    for key, value in annotations.items():
        causes += [invalid(field, key, msg) for msg in is_qualified_name(str(key).lower())]
        if not isinstance(value, str):
            causes.append(invalid(field, value, "annotation values must be strings"))
            continue
        total += len(str(key)) + len(value.encode())
    if total > _TOTAL_ANNOTATION_SIZE:
        causes.append({"reason": "FieldValueTooLong",
                       "message": f"Too long: may not be more than {_TOTAL_ANNOTATION_SIZE} bytes", "field": field})
    return causes


# ----------------------------------------------------------------------------------------------- kind rules

def _validate_string_map(obj: Mapping[str, Any], field: str, *, base64_values: bool) -> tuple[list[Cause], int]:
    value = obj.get(field)
    if value is None:
        return [], 0
    if not isinstance(value, Mapping):
        return [invalid(field, value, "must be a map")], 0
    causes: list[Cause] = []
    size = 0
    for key, item in value.items():
        causes += [invalid(f"{field}[{key}]", key, msg) for msg in is_config_map_key(str(key))]
        if not isinstance(item, str):
            causes.append(invalid(f"{field}[{key}]", item, "must be a string"))
            continue
        if base64_values:
            try:
                size += len(base64.b64decode(item, validate=True))
            except (binascii.Error, ValueError):
                causes.append(invalid(f"{field}[{key}]", "<value omitted>", "illegal base64 data"))
        else:
            size += len(item)
    return causes, size


def _validate_configmap(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes, size = _validate_string_map(obj, "data", base64_values=False)
    binary_causes, binary_size = _validate_string_map(obj, "binaryData", base64_values=True)
    causes += binary_causes
    for key in set(obj.get("data") or {}) & set(obj.get("binaryData") or {}):
        causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    if size + binary_size > _CONFIG_SIZE:
        causes.append({"reason": "FieldValueTooLong", "field": "",
                       "message": f"Too long: may not be more than {_CONFIG_SIZE} bytes"})
    return causes + _validate_immutable_data(obj, old, ("data", "binaryData"))


def _validate_secret(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    causes, size = _validate_string_map(obj, "data", base64_values=True)
    string_causes, string_size = _validate_string_map(obj, "stringData", base64_values=False)
    causes += string_causes
    if size + string_size > _CONFIG_SIZE:
        causes.append({"reason": "FieldValueTooLong", "field": "data",
                       "message": f"Too long: may not be more than {_CONFIG_SIZE} bytes"})
    secret_type = obj.get("type")
    if secret_type is not None and not isinstance(secret_type, str):
        causes.append(invalid("type", secret_type, "must be a string"))
    if old is not None and (old.get("type") or "Opaque") != (secret_type or "Opaque"):
        causes.append(invalid("type", secret_type, "field is immutable"))
    return causes + _validate_immutable_data(obj, old, ("data", "stringData"))


def _validate_immutable_data(obj: Mapping[str, Any], old: Mapping[str, Any] | None,
                             fields: tuple[str, ...]) -> list[Cause]:
    if old is None or not old.get("immutable"):
        return []
    causes = []
    if not obj.get("immutable"):
        causes.append(invalid("immutable", obj.get("immutable"), "field is immutable when `immutable` is set"))
    if any((obj.get(f) or {}) != (old.get(f) or {}) for f in fields if f != "stringData") or obj.get("stringData"):
        causes.append({"reason": "FieldValueForbidden", "field": "data",
                       "message": "Forbidden: field is immutable when `immutable` is set"})
    return causes


def _validate_containers(spec: Any, field: str) -> list[Cause]:
    if not isinstance(spec, Mapping):
        return [required(field)]
    containers = spec.get("containers")
    if not containers:
        return [required(f"{field}.containers")]
    if not isinstance(containers, list):
        return [invalid(f"{field}.containers", containers, "must be a list")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(kind) or []):
            path = f"{field}.{kind}[{i}]"
            if not isinstance(container, Mapping):
                causes.append(invalid(path, container, "must be an object"))
                continue
            causes += _unique_entry_name(container.get("name"), path, seen)
            if not container.get("image"):
                causes.append(required(f"{path}.image"))
    return causes


def _unique_entry_name(name: Any, path: str, seen: set[str]) -> list[Cause]:
    """Causes for ``{path}.name`` of a list entry keyed by a required, unique DNS-1123 label; adds it to ``seen``."""
    if not name:
        return [required(f"{path}.name")]
    causes = [invalid(f"{path}.name", name, msg) for msg in is_dns1123_label(str(name))]
    if name in seen:
        causes.append(duplicate(f"{path}.name", name))
    seen.add(str(name))
    return causes


def _validate_pod(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    return _validate_containers(obj.get("spec"), "spec")


def _selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if ((op == "In" and (not present or labels[key] not in values))
                or (op == "NotIn" and present and labels[key] in values)
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present)):
            return False
    return True


def _validate_workload(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    causes: list[Cause] = []
    selector = spec.get("selector")
    template = spec.get("template") if isinstance(spec.get("template"), Mapping) else {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, Mapping):
        causes.append(required("spec.selector"))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        causes.append(invalid("spec.selector", selector, "empty selector is invalid for deployment"))
    elif not _selector_matches(selector, labels):
        causes.append(invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0):
        causes.append(invalid("spec.replicas", replicas, "must be greater than or equal to 0"))
    causes += _validate_labels(labels, "spec.template.metadata.labels")
    causes += _validate_containers(template.get("spec"), "spec.template.spec")
    if old is not None and isinstance(old.get("spec"), Mapping) and old["spec"].get("selector") != selector:
        causes.append(invalid("spec.selector", selector, "field is immutable"))
    return causes


_MICROTIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def _validate_lease(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec") or {}
    if not isinstance(spec, Mapping):
        return [invalid("spec", spec, "must be an object")]
    causes: list[Cause] = []
    for field in ("holderIdentity", "strategy", "preferredHolder"):
        if spec.get(field) is not None and not isinstance(spec[field], str):
            causes.append(type_invalid(f"spec.{field}", spec[field], "string"))
    for field, minimum in (("leaseDurationSeconds", 1), ("leaseTransitions", 0)):
        value = spec.get(field)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            causes.append(type_invalid(f"spec.{field}", value, "integer"))
        elif value < minimum:
            bound = "0" if minimum else "or equal to 0"
            causes.append(invalid(f"spec.{field}", value, f"must be greater than {bound}"))
    for field in ("acquireTime", "renewTime"):
        value = spec.get(field)
        if value is not None and (not isinstance(value, str) or not _MICROTIME_RE.match(value)):
            causes.append(invalid(f"spec.{field}", value, "must be an RFC 3339 date-time with microseconds"))
    return causes


def _validate_crd(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    causes: list[Cause] = []
    group = spec.get("group")
    if not group:
        causes.append(required("spec.group"))
    else:
        causes += [invalid("spec.group", group, msg) for msg in is_dns1123_subdomain(str(group))]
        if "." not in str(group):
            causes.append(invalid("spec.group", group, "should be a domain with at least one dot"))
    causes += _validate_crd_names(spec.get("names"))
    scope = spec.get("scope")
    if scope not in ("Cluster", "Namespaced"):
        causes.append(required("spec.scope") if not scope else not_supported("spec.scope", scope,
                                                                             ["Cluster", "Namespaced"]))
    causes += _validate_crd_versions(spec.get("versions"))
    plural = (spec.get("names") or {}).get("plural")
    name = (obj.get("metadata") or {}).get("name")
    if plural and group and name != f"{plural}.{group}":
        causes.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("group") != group:
            causes.append(invalid("spec.group", group, "field is immutable"))
        if old_spec.get("scope") != scope:
            causes.append(invalid("spec.scope", scope, "field is immutable"))
    return causes


def _validate_crd_names(names: Any) -> list[Cause]:
    if not isinstance(names, Mapping):
        return [required("spec.names.plural"), required("spec.names.kind")]
    causes: list[Cause] = []
    for field in ("plural", "singular"):
        value = names.get(field)
        if not value:
            if field == "plural":
                causes.append(required(f"spec.names.{field}"))
            continue
        causes += [invalid(f"spec.names.{field}", value, msg) for msg in is_dns1123_label(str(value))]
    for field in ("kind", "listKind"):
        value = names.get(field)
        if not value:
            if field == "kind":
                causes.append(required(f"spec.names.{field}"))
            continue
        if not re.match(r"^[A-Za-z][A-Za-z0-9]*$", str(value)):
            causes.append(invalid(f"spec.names.{field}", value, "may have mixed case, but should otherwise match: "
                                  "[a-z]([-a-z0-9]*[a-z0-9])?"))
    for i, short in enumerate(names.get("shortNames") or []):
        causes += [invalid(f"spec.names.shortNames[{i}]", short, msg) for msg in is_dns1123_label(str(short))]
    return causes


def _validate_crd_versions(versions: Any) -> list[Cause]:
    if not versions:
        return [invalid("spec.versions", versions, "must have exactly one version marked as storage version"),
                required("spec.versions")]
    if not isinstance(versions, list):
        return [invalid("spec.versions", versions, "must be a list")]
    causes: list[Cause] = []
    storage = 0
    seen: set[str] = set()
    for i, version in enumerate(versions):
        path = f"spec.versions[{i}]"
        if not isinstance(version, Mapping):
            causes.append(invalid(path, version, "must be an object"))
            continue
        causes += _unique_entry_name(version.get("name"), path, seen)
        storage += bool(version.get("storage"))
        causes += _validate_version_schema(version.get("schema"), f"{path}.schema")
    if storage != 1:
        versions_repr = [v.get("name") for v in versions if isinstance(v, Mapping)]
        causes.append(invalid("spec.versions", versions_repr,
                              "must have exactly one version marked as storage version"))
    if not any(isinstance(v, Mapping) and v.get("served") for v in versions):
        causes.append(invalid("spec.versions", [v.get("name") for v in versions if isinstance(v, Mapping)],
                              "must have at least one served version"))
    return causes


def _validate_version_schema(wrapper: Any, path: str) -> list[Cause]:
    if wrapper is not None and not isinstance(wrapper, Mapping):
        return [invalid(path, wrapper, "must be an object")]
    schema = (wrapper or {}).get("openAPIV3Schema")
    if schema is None:
        return [required(f"{path}.openAPIV3Schema", "schemas are required")]
    causes = validate_schema_structure(schema, f"{path}.openAPIV3Schema")
    if isinstance(schema, Mapping) and schema.get("type") != "object":
        causes.append(invalid(f"{path}.openAPIV3Schema.type", schema.get("type"), "must be object at the root"))
    return causes


_KIND_VALIDATORS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None], list[Cause]]] = {
    "ConfigMap": _validate_configmap,
    "Secret": _validate_secret,
    "Pod": _validate_pod,
    "Deployment": _validate_workload,
    "ReplicaSet": _validate_workload,
    "StatefulSet": _validate_workload,
    "DaemonSet": _validate_workload,
    "Lease": _validate_lease,
    "CustomResourceDefinition": _validate_crd,
}


def validate_object(info: ResourceInfoLike, obj: Mapping[str, Any],
                    old: Mapping[str, Any] | None = None) -> list[Cause]:
    """Status causes for ``obj`` (``old`` set on updates); empty when the object is valid.

    Covers metadata for every kind, the built-in rules users hit, and the CRD schema for custom resources.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return [required("metadata.name", "name or generateName is required")]
    causes = _validate_metadata(info, meta, old)
    validator = _KIND_VALIDATORS.get(info.kind) if getattr(info, "builtin", True) else None
    if validator is not None:
        causes += validator(obj, old)
    schema = getattr(info, "schema", None)
    if not getattr(info, "builtin", True) and schema:
        causes += validate_against_schema(schema, obj)
    return causes


# ------------------------------------------------------------------------------------- structural schemas

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


def _go_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_ok(expected: str, value: Any) -> bool:
    actual = _go_type(value)
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


# ---------------------------------------------------------------------------------------- unknown fields

_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields",
})
_COMMON_TOP = frozenset({"apiVersion", "kind", "metadata"})
_TOP_FIELDS: dict[str, frozenset[str]] = {
    "ConfigMap": frozenset({"data", "binaryData", "immutable"}),
    "Secret": frozenset({"data", "stringData", "type", "immutable"}),
    "ServiceAccount": frozenset({"secrets", "imagePullSecrets", "automountServiceAccountToken"}),
    "Event": frozenset({"involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                        "type", "eventTime", "series", "action", "related", "reportingComponent",
                        "reportingInstance"}),
    "CustomResourceDefinition": frozenset({"spec", "status"}),
}


def unknown_fields(info: ResourceInfoLike, obj: Mapping[str, Any]) -> list[str]:
    """Field paths of ``obj`` the kind does not define, for ``fieldValidation=Strict|Warn``.

    Custom resources: what structural pruning would drop. Built-ins: unknown top-level and metadata fields.
    """
    schema = getattr(info, "schema", None)
    if not getattr(info, "builtin", True):
        if not schema:
            return []
        return prune(schema, obj)[1] + _unknown_meta(obj)
    known = _COMMON_TOP | _TOP_FIELDS.get(info.kind, frozenset({"spec", "status"}))
    return [name for name in obj if name not in known] + _unknown_meta(obj)


def _unknown_meta(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return []
    return [f"metadata.{name}" for name in meta if name not in _META_FIELDS]

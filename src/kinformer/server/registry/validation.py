"""Object validation and name generation for the API server.

Validators return Kubernetes Status causes ``{"reason", "message", "field"}`` (empty list = valid); the
message texts follow kube-apiserver's so clients and users see familiar errors. Built-in kinds are checked
against their compiled 1.32 schema (:mod:`kinformer.server.schema.schemas`: types, required fields, enums, unknown
fields) plus the kind rules below; custom resources against their CRD's structural schema
(:mod:`kinformer.server.schema.structural`, re-exported here). Nothing here mutates its inputs except
:func:`prune_builtin`, which documents that it works in place.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from kinformer.names import (
    all_qualified_names,
    is_config_map_key,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_path_segment_name,
    is_qualified_name,
    is_valid_label_value,
)
from kinformer.server.admission.webhook_client import client_config_causes
from kinformer.server.machinery.causes import (
    Cause,
    duplicate,
    invalid,
    invalid_message,
    not_supported,
    required,
    type_invalid,
)
from kinformer.server.machinery.status import StatusError
from kinformer.server.registry.patch import ResourceInfoLike
from kinformer.server.registry.resources import BUILTIN_KINDS, BUILTIN_RESOURCES
from kinformer.server.schema import schemas, structcheck
from kinformer.server.schema.structural import apply_defaults, prune, validate_against_schema, validate_schema_structure

__all__ = [
    "apply_defaults",
    "decoded_fine",
    "distinct_causes",
    "generate_name",
    "invalid_message",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_qualified_name",
    "is_valid_label_value",
    "prune",
    "prune_builtin",
    "unknown_fields",
    "validate_against_schema",
    "validate_object",
    "validate_schema_structure",
]

# --------------------------------------------------------------------------------------------- name rules
# (the checks themselves are kinformer.names, shared with selectors; re-exported here)

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_MAX_GENERATED_PREFIX = 63 - 5


def generate_name(prefix: str) -> str:
    """``prefix`` (cut to 58 chars) followed by 5 random characters from kube's consonant-digit alphabet."""
    return prefix[:_MAX_GENERATED_PREFIX] + "".join(secrets.choice(_NAME_ALPHABET) for _ in range(5))


# ------------------------------------------------------------------------------------------------ metadata

_TOTAL_ANNOTATION_SIZE = 256 * 1024
_CONFIG_SIZE = 1024 * 1024


# kinds whose names kube validates as path segments (ValidateRBACName, APIService and flow control names)
_PATH_SEGMENT_NAMED = frozenset({
    ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "RoleBinding"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiregistration.k8s.io", "APIService"), ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
})


def _any_name(name: str) -> list[str]:
    return []


def _name_validator(info: ResourceInfoLike) -> Callable[[str], list[str]]:
    if (info.group, info.kind) in _PATH_SEGMENT_NAMED:
        return is_path_segment_name
    if (info.group, info.kind) == ("certificates.k8s.io", "CertificateSigningRequest"):
        return _any_name  # kube takes any name for a request (kubelets send node-csr-<base64url>)
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
        errors = _name_validator(info)(name)
        if errors:  # the messages of valid names (nearly all) are not looked at
            causes += [invalid("metadata.name", name, msg) for msg in errors]
    namespace = meta.get("namespace")
    if info.namespaced and namespace:
        errors = is_dns1123_label(str(namespace))
        if errors:
            causes += [invalid("metadata.namespace", namespace, msg) for msg in errors]
    labels, annotations = meta.get("labels"), meta.get("annotations")
    if labels is not None:
        causes += _validate_labels(labels, "metadata.labels")
    if annotations is not None:
        causes += _validate_annotations(annotations, "metadata.annotations")
    finalizers = meta.get("finalizers")  # absent, null or empty (of any type): nothing to check
    if finalizers and not isinstance(finalizers, list):
        causes.append(invalid("metadata.finalizers", finalizers, "must be a list of strings"))
    elif finalizers and not all_qualified_names(finalizers):
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


@functools.lru_cache(maxsize=4096)
def _label_errors(key: str, value: str) -> tuple[tuple[str, str], ...]:
    """(bad value, message) of one label with string key and value: the key's messages, then the value's."""
    return tuple((key, msg) for msg in is_qualified_name(key)) + tuple(
        (value, msg) for msg in is_valid_label_value(value))


def _validate_labels(labels: Any, field: str) -> list[Cause]:
    if labels is None:
        return []
    if type(labels) is not dict and not isinstance(labels, Mapping):
        return [invalid(field, labels, "must be a map of string keys to string values")]
    causes = []
    for key, value in labels.items():
        if type(key) is str and type(value) is str:
            errors = _label_errors(key, value)
            if errors:
                causes += [invalid(field, bad, msg) for bad, msg in errors]
            continue
        causes += [invalid(field, key, msg) for msg in is_qualified_name(str(key))]
        if not isinstance(value, str):
            causes.append(invalid(f"{field}", value, "label values must be strings"))
        else:
            causes += [invalid(field, value, msg) for msg in is_valid_label_value(value)]
    return causes


@functools.lru_cache(maxsize=4096)
def _annotation_key_errors(key: str) -> tuple[str, ...]:
    return tuple(is_qualified_name(key.lower()))


def _validate_annotations(annotations: Any, field: str) -> list[Cause]:
    if annotations is None:
        return []
    if type(annotations) is not dict and not isinstance(annotations, Mapping):
        return [invalid(field, annotations, "must be a map of string keys to string values")]
    causes = []
    total = 0
    for key, value in annotations.items():
        text = key if type(key) is str else str(key)
        key_errors = _annotation_key_errors(text)
        if key_errors:
            causes += [invalid(field, key, msg) for msg in key_errors]
        if type(value) is not str and not isinstance(value, str):
            causes.append(invalid(field, value, "annotation values must be strings"))
            continue
        total += len(text) + (len(value) if value.isascii() else len(value.encode()))
    if total > _TOTAL_ANNOTATION_SIZE:
        causes.append({"reason": "FieldValueTooLong",
                       "message": f"Too long: may not be more than {_TOTAL_ANNOTATION_SIZE} bytes", "field": field})
    return causes


# ----------------------------------------------------------------------------------------------- kind rules

def _validate_string_map(obj: Mapping[str, Any], field: str, *, base64_values: bool) -> tuple[list[Cause], int]:
    value = obj.get(field)
    if value is None:
        return [], 0
    if type(value) is not dict and not isinstance(value, Mapping):
        return [invalid(field, value, "must be a map")], 0
    causes: list[Cause] = []
    size = 0
    for key, item in value.items():
        key_errors = is_config_map_key(str(key))
        if key_errors:
            causes += [invalid(f"{field}[{key}]", key, msg) for msg in key_errors]
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
    binary = obj.get("binaryData")
    if binary:
        for key in set(obj.get("data") or {}) & set(binary):
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    if size + binary_size > _CONFIG_SIZE:
        causes.append({"reason": "FieldValueTooLong", "field": "",
                       "message": f"Too long: may not be more than {_CONFIG_SIZE} bytes"})
    return causes  # immutable data: the ConfigMap strategy


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
    return causes  # immutable type and data: the Secret strategy


def _validate_containers(spec: Any, field: str) -> list[Cause]:
    if type(spec) is not dict and not isinstance(spec, Mapping):
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
            if type(container) is not dict and not isinstance(container, Mapping):
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


def _validate_workload(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [required("spec")]
    # selector rules, replicas and immutable selectors: the kinds' strategies (server/registry/strategies/apps.py)
    causes: list[Cause] = []
    template = template if isinstance(template := spec.get("template"), Mapping) else {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    causes += _validate_labels(labels, "spec.template.metadata.labels")
    causes += _validate_containers(template.get("spec"), "spec.template.spec")
    return causes


_MICROTIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def _validate_webhooks(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """Each webhook of a Mutating/ValidatingWebhookConfiguration names one https URL or one Service."""
    hooks = obj.get("webhooks")
    if not isinstance(hooks, list):
        return []
    return [cause for i, hook in enumerate(hooks) if isinstance(hook, Mapping)
            for cause in client_config_causes(hook.get("clientConfig"), f"webhooks[{i}].clientConfig")]


def _conversion_webhook_causes(spec: Mapping[str, Any]) -> list[Cause]:
    """A CRD converting through a webhook names one https URL or one Service for it."""
    conversion = spec.get("conversion")
    if not isinstance(conversion, Mapping) or conversion.get("strategy") != "Webhook":
        return []
    webhook = conversion.get("webhook")
    config = webhook.get("clientConfig") if isinstance(webhook, Mapping) else None
    return client_config_causes(config, "spec.conversion.webhook.clientConfig")


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
    causes += _conversion_webhook_causes(spec)
    names: Mapping[str, Any] = spec["names"] if isinstance(spec.get("names"), Mapping) else {}
    plural = names.get("plural")
    name = (obj.get("metadata") or {}).get("name")
    if plural and group and name != f"{plural}.{group}":
        causes.append(invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    causes += _builtin_name_causes(str(group or ""), names)
    causes += _api_approval_causes(str(group or ""), obj, old)
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("group") != group:
            causes.append(invalid("spec.group", group, "field is immutable"))
        if old_spec.get("scope") != scope:
            causes.append(invalid("spec.scope", scope, "field is immutable"))
    return causes


def _builtin_name_causes(group: str, names: Mapping[str, Any]) -> list[Cause]:
    """A CRD may not name a resource the server serves itself, nor a kind of a built-in in its group."""
    plural, kind = str(names.get("plural") or ""), str(names.get("kind") or "")
    if (group, plural) in BUILTIN_RESOURCES:
        label = f"{plural}.{group}" if group else plural
        return [invalid("spec.names.plural", plural, f"{label} is a built-in resource of the API server")]
    if (group, kind) in BUILTIN_KINDS:
        return [invalid("spec.names.kind", kind, f'a built-in resource of group "{group}" has this kind')]
    return []


API_APPROVED = "api-approved.kubernetes.io"
_APPROVAL_SEE = "see https://github.com/kubernetes/enhancements/pull/1111"


def protected_group(group: str) -> bool:
    """kube's IsProtectedCommunityGroup: ``k8s.io``, ``kubernetes.io`` and their subdomains."""
    return any(group == d or group.endswith("." + d) for d in ("k8s.io", "kubernetes.io"))


def _approval_state(obj: Mapping[str, Any]) -> tuple[str, str]:
    """kube's GetAPIApprovalState of a CRD's annotation: (missing|bypassed|approved|invalid, the reason)."""
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(API_APPROVED) or ""
    if not isinstance(value, str) or not value:
        return "missing", f'protected groups must have approval annotation "{API_APPROVED}", {_APPROVAL_SEE}'
    if value.startswith("unapproved"):
        return "bypassed", f'not approved: "{value}"'
    url = urlsplit(value) if value.isprintable() and " " not in value else None
    if url is not None and url.scheme and url.netloc:
        return "approved", f"approved in {value}"
    return "invalid", (f'protected groups must have approval annotation "{API_APPROVED}" with either a URL or a '
                       f'reason starting with "unapproved", {_APPROVAL_SEE}')


def _api_approval_causes(group: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[Cause]:
    """kube's validateAPIApproval: a CRD of a protected group carries a URL or an ``unapproved...`` reason
    (an update that leaves the state as it was is never refused)."""
    if not protected_group(group):
        return []
    state, reason = _approval_state(obj)
    if state in ("approved", "bypassed") or (old is not None and _approval_state(old)[0] == state):
        return []
    field = f"metadata.annotations[{API_APPROVED}]"
    if state == "missing":
        return [required(field, reason)]
    return [invalid(field, obj["metadata"]["annotations"][API_APPROVED], reason)]


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
    "MutatingWebhookConfiguration": _validate_webhooks,
    "ValidatingWebhookConfiguration": _validate_webhooks,
}


def distinct_causes(causes: list[Cause]) -> list[Cause]:
    """``causes`` without repeats (same reason, field and message), first ones kept: the schema's enum check and a
    kind's own rules may both name one value, and kube reports it once."""
    seen: set[tuple[Any, Any, Any]] = set()
    out = []
    for cause in causes:
        key = (cause.get("reason"), cause.get("field"), cause.get("message"))
        if key not in seen:
            seen.add(key)
            out.append(cause)
    return out


def validate_object(info: ResourceInfoLike, obj: Mapping[str, Any],
                    old: Mapping[str, Any] | None = None, *, spec: bool = True) -> list[Cause]:
    """Status causes for ``obj`` (``old`` set on updates); empty when the object is valid.

    Covers metadata for every kind, the built-in rules users hit, and the CRD schema for custom resources.
    Without ``spec`` (a built-in kind's status write, whose spec is the stored one) a built-in kind's own
    rules are skipped: metadata and types are still checked.
    """
    meta = obj.get("metadata")
    if type(meta) is not dict and not isinstance(meta, Mapping):
        return [required("metadata.name", "name or generateName is required")]
    causes = _validate_metadata(info, meta, old)
    validator = _KIND_VALIDATORS.get(info.kind) if spec and getattr(info, "builtin", True) else None
    if validator is not None:
        causes += validator(obj, old)
    if getattr(info, "builtin", True):
        node = _builtin_node(info)
        if node is not None and not _schema_fine(node, obj, old):
            seen = {(c.get("field"), c.get("reason")) for c in causes}
            found: list[Cause] = []
            node.check(obj, "", found)
            causes += [c for c in found if (c.get("field"), c.get("reason")) not in seen]
        return causes
    schema = getattr(info, "schema", None)
    if schema:
        causes += validate_against_schema(schema, obj)
    return causes


# ---------------------------------------------------------------------------------------- unknown fields

_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields",
})


def _builtin_node(info: ResourceInfoLike) -> schemas.Node | None:
    return structcheck.typed_kind_node(info.group, getattr(info, "version", ""), info.kind)


# The last body found fine (no unknown field, no wrong type, no missing required field, no value outside an enum).
# A write checks its decoded body (fieldValidation), prunes that same body, prepares it in place (system fields,
# strategy, defaults), records managedFields on a shallow copy and validates that: the schema is walked once, at
# decoding, plus the top-level fields that are not the very objects checked then (the copy's new metadata). This
# holds because client data never changes an object in place once it is checked: only server code does, and what
# it sets is schema-valid; a webhook's patch, an update's copy and a patch's or an apply's result are new objects.
# Likewise an update's ``old``, the stored object (every write of a built-in was checked before it was stored, and
# server code keeps it valid): a top-level field the update's object shares with it by identity (a status write
# keeps the stored spec; a patch shares what it did not reach), or a field of a top-level object it shares so,
# was found fine then and is not walked again.
_last_fine: list[Any] = [None]


def _schema_fine(node: schemas.Node, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> bool:
    """Whether ``obj`` passes the schema, not walking again the top-level fields the last fine body shares, nor
    what it shares with the stored object ``old`` (see :func:`_unshared`)."""
    checked = _last_fine[0]
    if checked is obj:
        return True
    if type(obj) is dict and (type(old) is dict or type(checked) is dict):
        obj = _unshared(obj, old if type(old) is dict else {}, checked if type(checked) is dict else None)
    return node.fine(obj)


def _unshared(obj: dict[str, Any], old: dict[str, Any], checked: dict[str, Any] | None = None) -> dict[str, Any]:
    """What of ``obj`` the schema has to walk, an update's object whose stored version ``old`` was found fine:
    ``obj`` with each field that is ``old``'s (or ``checked``'s, the last fine body's) very object set to None,
    and likewise one level down in an object field it does not share whole with ``old`` (a patch's new
    metadata keeps the stored labels and owner references). A value shared by identity sits where it sat in
    ``old`` (the same schema node); the object check judges each field on its own (a required one by its
    presence), so a None in its place tells the same."""
    view = {}
    for key, value in obj.items():
        before = old.get(key)
        if before is value or (checked is not None and checked.get(key) is value):
            value = None
        elif type(value) is dict and type(before) is dict:
            value = {name: None if before.get(name) is item else item for name, item in value.items()}
        view[key] = value
    return view


def _fine(node: schemas.Node | None, obj: Any, old: Any = None) -> bool:
    """Whether the kind's schema finds nothing to report in ``obj`` (remembered for the next call on it), the
    top-level fields it shares with the stored object ``old`` (an update's) taken as fine."""
    if node is None or _last_fine[0] is obj:
        return True
    view = _unshared(obj, old) if type(old) is dict and type(obj) is dict else obj
    if node.fine(view):
        _last_fine[0] = obj
        return True
    return False


def decoded_fine(info: ResourceInfoLike, doc: Any) -> bool:
    """Whether ``doc``, a built-in kind's freshly decoded JSON body, is fine by the kind's schema and nests within
    ``nesting.MAX_DEPTH``, as told by one typed conversion (:mod:`structcheck`). True is remembered for the checks
    that follow (the schema walk of ``doc`` is spared); False tells nothing."""
    node = _builtin_node(info)
    if node is None or not structcheck.doc_fine(node, doc):
        return False
    _last_fine[0] = doc
    return True


def _builtin_unknown(info: ResourceInfoLike, obj: Mapping[str, Any],
                     old: Any = None) -> list[tuple[str, dict[str, Any], str]]:
    node = _builtin_node(info)
    out: list[tuple[str, dict[str, Any], str]] = []
    if node is not None and isinstance(obj, dict) and not _fine(node, obj, old):
        node.unknown(obj, "", out)
    return out


def unknown_fields(info: ResourceInfoLike, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    """Field paths of ``obj`` the kind does not define, for ``fieldValidation=Strict|Warn``.

    Built-ins: every field the kind's compiled schema lacks, at any depth (``spec.template.spec.containers[0].x``);
    a top-level field ``obj`` shares by identity with ``old``, the stored object a patch was applied to, has none.
    Custom resources: what structural pruning would drop, plus unknown metadata fields.
    """
    if getattr(info, "builtin", True):
        if _last_fine[0] is obj:  # found fine (as decoded, nearly always): nothing unknown
            return []
        return [path for path, _, _ in _builtin_unknown(info, obj, old)]
    schema = getattr(info, "schema", None)
    if not schema:
        return []
    return prune(schema, obj)[1] + _unknown_meta(obj)


def prune_builtin(info: ResourceInfoLike, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` decoded as kube decodes a built-in: fields the kind does not define dropped (in place), and a value
    of the wrong JSON type refused with Go's error (400 ``Deployment in version "v1" cannot be handled as a
    Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32``).
    """
    if _last_fine[0] is obj:  # found fine (as decoded, nearly always): nothing to drop
        return obj
    node = _builtin_node(info)
    if _fine(node, obj):
        return obj
    assert node is not None
    for _, container, key in _builtin_unknown(info, obj):
        container.pop(key, None)
    error = node.type_error(obj)
    if error:
        kind, version = info.kind, getattr(info, "version", "")
        raise StatusError(400, "BadRequest", f'{kind} in version "{version}" cannot be handled as a {kind}: {error}')
    return obj


def _unknown_meta(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return []
    return [f"metadata.{name}" for name in meta if name not in _META_FIELDS]

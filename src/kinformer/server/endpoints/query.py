"""Query parameters of list and watch requests: label/field selectors and continue tokens.

A malformed parameter is a 400 :class:`~kinformer.server.machinery.status.StatusError`, never a 5xx.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ...errors import SelectorError
from ...selectors import FieldSelector, LabelSelector, field_value, parse_field_selector, parse_label_selector
from ..machinery import status as st
from ..registry.resources import ResourceInfo
from .shardselector import ShardSelector, parse_shard_selector

_FALSE = ("0", "false", "False", "FALSE")
CONTINUE_TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can start a new list "
    "without the continue parameter, or use the continue token in this response to retrieve the remainder of the "
    "results. Continuing with the provided token results in an inconsistent list - objects that were created, "
    "modified, or deleted between the time the first chunk was returned and now may show up in the list.")
_BUILTIN_FIELDS: dict[tuple[str, str], frozenset[str]] = {
    ("", "pods"): frozenset({"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"}),
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "nodes"): frozenset({"spec.unschedulable"}),
    ("", "events"): frozenset({"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}),
    ("apps", "replicasets"): frozenset({"status.replicas"}),
}




def _event_source(obj: Mapping[str, Any]) -> str:
    """A core/v1 Event's ``source`` field label: its source component, else its reporting component (kube's)."""
    return field_value(obj, "source.component") or field_value(obj, "reportingComponent")


# Field labels whose value is not the object's field of that path, by resource.
_COMPUTED_FIELDS: dict[tuple[str, str], dict[str, Callable[[Mapping[str, Any]], str]]] = {
    ("", "events"): {"source": _event_source},
}


INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


def parse_int64(text: str, what: str) -> int:
    """``text`` read as Go's ``strconv.ParseInt(text, 10, 64)`` reads it (as kube parses integer query
    parameters): an optional sign and ASCII digits, within int64; 400 otherwise."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    well_formed = digits.isascii() and digits.isdigit() and len(digits) <= 19
    if not well_formed or not -INT64_MAX - 1 <= int(text) <= INT64_MAX:
        raise st.bad_request(f'invalid {what}: "{st.truncate(text, 64)}": must be a 64-bit integer')
    return int(text)


def truthy(value: str | None) -> bool:
    return value is not None and value not in _FALSE


class Filter:
    """Label + field + shard selector of a list or watch; ``None`` members mean "match everything"."""

    __slots__ = ("computed", "fields", "labels", "shard")

    def __init__(self, labels: LabelSelector | None, fields: FieldSelector | None,
                 shard: ShardSelector | None = None,
                 computed: Mapping[str, Callable[[Mapping[str, Any]], str]] | None = None) -> None:
        self.labels = labels
        self.fields = fields
        self.shard = shard
        self.computed = computed or {}  # field label -> its value of an object, where not the field of its path

    @property
    def empty(self) -> bool:
        return self.labels is None and self.fields is None and self.shard is None

    def __call__(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        if self.shard is not None and not self.shard.matches(obj):
            return False
        if self.labels is not None and not self.labels.matches(meta.get("labels") or {}):
            return False
        if self.fields is not None:
            values = {}
            computed = self.computed
            for req in self.fields.requirements:
                fn = computed.get(req.field)
                values[req.field] = fn(obj) if fn is not None else field_value(obj, req.field)
            if not self.fields.matches(values):
                return False
        return True


def make_filter(info: ResourceInfo, query: Mapping[str, str]) -> Filter:
    """Parse ``labelSelector``/``fieldSelector``/``shardSelector``; 400 when one is malformed or names an
    unsupported field."""
    labels = fields = None
    try:
        text = query.get("labelSelector", "")
        if text:
            labels = parse_label_selector(text)
            if labels.empty():
                labels = None
        text = query.get("fieldSelector", "")
        if text:
            fields = parse_field_selector(text)
            if fields.empty():
                fields = None
    except SelectorError as e:
        raise st.bad_request(f"unable to parse requirement: {e}" if "requirement" not in str(e) else str(e)) from None
    if fields is not None:
        allowed = {"metadata.name", "metadata.namespace"}
        allowed.update(f.lstrip(".") for f in info.selectable_fields)
        if info.builtin:
            allowed.update(_BUILTIN_FIELDS.get((info.group, info.plural), ()))
        for req in fields.requirements:
            if req.field not in allowed:
                raise st.bad_request(f'field label not supported: {req.field}')
    computed = _COMPUTED_FIELDS.get((info.group, info.plural)) if info.builtin and fields is not None else None
    return Filter(labels, fields, parse_shard_selector(query.get("shardSelector", "")), computed)


def storage_field_selector(text: str, labels: Mapping[str, str]) -> str:
    """A field selector of a resource stored as another (events.k8s.io Events are core ones) in the storage
    resource's labels: each of ``labels`` renamed, ``metadata.name``/``metadata.namespace`` kept; any other label
    is a 400, as the served resource does not support it. A malformed selector is left for the list to refuse."""
    try:
        selector = parse_field_selector(text)
    except SelectorError:
        return text
    out = []
    for req in selector.requirements:
        if req.field in ("metadata.name", "metadata.namespace"):
            out.append(req)
        elif req.field in labels:
            out.append(req._replace(field=labels[req.field]))
        else:
            raise st.bad_request(f"field label not supported: {req.field}")
    return ",".join(map(str, out))


# ------------------------------------------------------------------------------------------ continue tokens


def encode_continue(rv: int, key: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        pad = "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(token + pad))
        rv, start = data["rv"], data["start"]
        if not isinstance(rv, int) or isinstance(rv, bool) or not isinstance(start, str):
            raise TypeError("continue token fields have the wrong types")
    except Exception:
        raise st.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                             "meta.k8s.io/v1)") from None
    if data.get("v") != "meta.k8s.io/v1" or ".." in start or start.startswith("/"):
        raise st.bad_request("continue key is not valid: incorrect encoded start resourceVersion (version "
                             "meta.k8s.io/v1)")
    return rv, start

"""Compiled schemas of the built-in kinds: unknown fields, types, required fields and enums, and list semantics.

A kind's definition (:mod:`kinformer.server.apidefs`) is compiled once, on first use, into a tree of
:class:`Node` objects; definitions referred to from several places (ObjectMeta, PodSpec, Container) compile to one
shared node, and recursive definitions (JSONSchemaProps) to a cyclic graph. Requests then walk the object against
the compiled tree only; the raw schema is never consulted per request.

What the walks report follows kube-apiserver's decoding of built-ins: a field the Go type lacks is an unknown
field (``spec.template.spec.containers[0].containerPrt``); ``null`` is accepted anywhere (Go leaves the field at
its zero value); a value of the wrong JSON type, a missing required field or a value outside an enum is a cause.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kinformer.server import apidefs
from kinformer.server.causes import json_type

__all__ = ["Node", "kind_node", "node_at"]

Cause = dict[str, str]

# Node kinds: a typed object (props), a map (item = value node), an array (item), a scalar, or anything.
# Ordered so that ``kind > ANY`` means "has children to walk".
SCALAR, ANY, OBJECT, MAP, ARRAY = 0, 1, 2, 3, 4
_JSON_TYPE_NAMES = {"string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float)}


class Node:
    """One compiled schema node. ``types`` are the JSON types accepted (empty: any)."""

    __slots__ = ("accepts", "enum", "go_type", "item", "kind", "list_map_keys", "list_type", "merge_key",
                 "patch_strategy", "props", "required", "struct", "types")

    def __init__(self) -> None:
        self.kind: int = ANY
        self.types: tuple[str, ...] = ()
        self.accepts: Callable[[Any], bool] = _accept_any
        self.props: dict[str, Node] = {}
        self.required: tuple[str, ...] = ()
        self.item: Node | None = None
        self.enum: tuple[Any, ...] | None = None
        self.list_type: str | None = None
        self.list_map_keys: tuple[str, ...] = ()
        self.patch_strategy: str | None = None
        self.merge_key: str | None = None
        self.go_type = "interface {}"  # as Go names the field's type in decoding errors
        self.struct = ""  # a definition's Go struct name (PodSpec), "" for inline schemas

    # --------------------------------------------------------------------------------- fast walks
    # These answer only "is everything fine?" without building paths: the common case costs one pass, and only a
    # failing object is walked again by the reporting walks below.

    def clean(self, value: Any) -> bool:
        """True when ``value`` has no field this schema does not define."""
        kind = self.kind
        if kind == OBJECT:
            if type(value) is not dict:
                return True
            props = self.props
            for key, item in value.items():
                sub = props.get(key)
                if sub is None:
                    return False
                if item is not None and sub.kind > ANY and not sub.clean(item):
                    return False
            return True
        item_node = self.item
        if item_node is None or item_node.kind <= ANY:
            return True
        if kind == ARRAY and type(value) is list:
            return all(item_node.clean(v) for v in value)
        if kind == MAP and type(value) is dict:
            return all(item_node.clean(v) for v in value.values())
        return True

    def valid(self, value: Any) -> bool:
        """True when ``value`` has the right types, every required field and enum values (``None`` is fine)."""
        if value is None:
            return True
        if not self.accepts(value) or (self.enum is not None and value not in self.enum):
            return False
        kind = self.kind
        if kind == OBJECT:
            if type(value) is not dict:
                return True  # a schema without a type accepts any value
            for name in self.required:
                if name not in value:
                    return False
            props = self.props
            for key, item in value.items():
                sub = props.get(key)
                if sub is not None and item is not None:
                    if sub.kind == SCALAR and sub.enum is None:
                        if not sub.accepts(item):
                            return False
                    elif not sub.valid(item):
                        return False
            return True
        item_node = self.item
        if item_node is None:
            return True
        items: Iterable[Any]
        if type(value) is list:
            items = value if kind == ARRAY else ()
        elif type(value) is dict:
            items = value.values() if kind == MAP else ()
        else:
            return True
        if item_node.kind == SCALAR and item_node.enum is None:  # labels, annotations, command, args
            accepts = item_node.accepts
            return all(v is None or accepts(v) for v in items)
        return all(item_node.valid(v) for v in items)

    def type_error(self, value: Any, field: str = "", struct: str = "") -> str | None:
        """Go's decoding error for the first value of the wrong JSON type, as kube-apiserver reports it.

        ``json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32``: the
        innermost struct, the field's JSON path from the root (no list indices or map keys), the field's Go type.
        """
        if value is None:
            return None
        if not self.accepts(value):
            return (f"json: cannot unmarshal {_GO_VALUE[json_type(value)]} into Go struct field "
                    f"{struct}.{field} of type {self.go_type}")
        struct = self.struct or struct
        if self.kind == OBJECT and type(value) is dict:
            for key, item in value.items():
                sub = self.props.get(key)
                found = sub.type_error(item, f"{field}.{key}" if field else key, struct) if sub else None
                if found:
                    return found
        elif self.item is not None and (type(value) is list or (self.kind == MAP and type(value) is dict)):
            for item in (value.values() if type(value) is dict else value):
                found = self.item.type_error(item, field, struct)
                if found:
                    return found
        return None

    # ------------------------------------------------------------------------------------ walks

    def unknown(self, value: Any, path: str, out: list[tuple[str, dict[str, Any], str]]) -> None:
        """Append (path, container, key) for every field of ``value`` this schema does not define."""
        kind = self.kind
        if kind == OBJECT:
            if not isinstance(value, dict):
                return
            props = self.props
            for key, item in value.items():
                sub = props.get(key)
                if sub is None:
                    out.append((f"{path}.{key}" if path else key, value, key))
                elif sub.kind > ANY and item is not None:
                    sub.unknown(item, f"{path}.{key}" if path else key, out)
        elif kind == ARRAY:
            item_node = self.item
            if isinstance(value, list) and item_node is not None and item_node.kind > ANY:
                for i, item in enumerate(value):
                    item_node.unknown(item, f"{path}[{i}]", out)
        elif kind == MAP:
            item_node = self.item
            if isinstance(value, dict) and item_node is not None and item_node.kind > ANY:
                for key, item in value.items():
                    item_node.unknown(item, f"{path}.{key}" if path else key, out)

    def check(self, value: Any, path: str, causes: list[Cause]) -> None:
        """Append a cause for each wrong type, missing required field and value outside an enum."""
        if value is None:
            return
        if not self.accepts(value):
            causes.append(_type_invalid(path, value, self.types))
            return
        if self.enum is not None and value not in self.enum:
            causes.append(_not_supported(path, value, self.enum))
        kind = self.kind
        if kind == OBJECT and type(value) is dict:
            for name in self.required:
                if name not in value:
                    causes.append({"reason": "FieldValueRequired", "message": "Required value",
                                   "field": f"{path}.{name}" if path else name})
            props = self.props
            for key, item in value.items():
                sub = props.get(key)
                if sub is not None:
                    sub.check(item, f"{path}.{key}" if path else key, causes)
        elif kind == ARRAY and self.item is not None and type(value) is list:
            for i, item in enumerate(value):
                self.item.check(item, f"{path}[{i}]", causes)
        elif kind == MAP and self.item is not None and type(value) is dict:
            for key, item in value.items():
                self.item.check(item, f"{path}[{key}]", causes)


_GO_VALUE = {"string": "string", "integer": "number", "number": "number", "boolean": "bool", "array": "array",
             "object": "object"}
_GO_SCALARS = {("integer", "int32"): "int32", ("integer", "int64"): "int64", ("integer", None): "int",
               ("number", "double"): "float64", ("number", None): "float64", ("boolean", None): "bool",
               ("string", "byte"): "[]uint8"}
_SPECIAL_GO_TYPES = {apidefs.INT_OR_STRING: "intstr.IntOrString", apidefs.QUANTITY: "resource.Quantity"}


def _go_scalar(types: tuple[str, ...], fmt: str | None) -> str:
    if len(types) != 1:
        return "interface {}"
    return _GO_SCALARS.get((types[0], fmt)) or _GO_SCALARS.get((types[0], None)) or types[0]


def _accept_any(value: Any) -> bool:
    return True


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_integer(value: Any) -> bool:
    return type(value) is int or (type(value) is float and value.is_integer())


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_object(value: Any) -> bool:
    return type(value) is dict


def _is_array(value: Any) -> bool:
    return type(value) is list


_ACCEPTS: dict[tuple[str, ...], Callable[[Any], bool]] = {
    ("string",): _is_string, ("integer",): _is_integer, ("boolean",): _is_boolean, ("object",): _is_object,
    ("array",): _is_array}


def _acceptor(types: tuple[str, ...]) -> Callable[[Any], bool]:
    if not types:
        return _accept_any
    found = _ACCEPTS.get(types)
    if found is not None:
        return found
    return lambda value: _type_ok(types, value)


def _type_ok(types: tuple[str, ...], value: Any) -> bool:
    for t in types:
        if t == "object":
            if isinstance(value, dict):
                return True
        elif t == "array":
            if isinstance(value, list):
                return True
        elif isinstance(value, bool):
            if t == "boolean":
                return True
        elif t == "integer" and isinstance(value, float):
            if value.is_integer():
                return True
        elif isinstance(value, _JSON_TYPE_NAMES.get(t, ())):
            return True
    return False



def _type_invalid(path: str, value: Any, types: tuple[str, ...]) -> Cause:
    actual = json_type(value)
    expected = " or ".join(types)
    return {"reason": "FieldValueTypeInvalid", "field": path,
            "message": f'Invalid value: "{actual}": {path or "<root>"} in body must be of type {expected}: '
                       f'"{actual}"'}


def _not_supported(path: str, value: Any, enum: tuple[Any, ...]) -> Cause:
    import json

    supported = ", ".join(json.dumps(v) for v in enum)
    return {"reason": "FieldValueNotSupported", "field": path,
            "message": f"Unsupported value: {json.dumps(value)}: supported values: {supported}"}


# -------------------------------------------------------------------------------------------- compiling

_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_SPECIAL_TYPES = {apidefs.INT_OR_STRING: ("integer", "string"), apidefs.QUANTITY: ("string", "number")}


class _Compiler:
    """Compiles definitions to nodes, one node per definition (so shared and recursive ones work)."""

    def __init__(self) -> None:
        self.by_name: dict[str, Node] = {}

    def definition(self, name: str) -> Node:
        node = self.by_name.get(name)
        if node is not None:
            return node
        node = self.by_name[name] = Node()
        raw = apidefs.definition(name)
        if raw is None:
            return node  # an unknown reference accepts anything
        if name in _SPECIAL_TYPES:
            node.kind, node.types = SCALAR, _SPECIAL_TYPES[name]
            node.accepts = _acceptor(node.types)
            node.go_type = _SPECIAL_GO_TYPES[name]
            return node
        _, version, kind = name.rsplit(".", 2)
        node.go_type = f"{version}.{kind}"
        if isinstance(raw.get("properties"), Mapping):
            node.struct = kind
        self._fill(node, raw)
        if name == _OBJECT_META and "managedFields" in node.props:
            node.props["managedFields"] = Node()  # the field manager decodes (or drops) it, never the schema
        return node

    def schema(self, raw: Mapping[str, Any]) -> Node:
        ref = apidefs.ref_name(raw)
        if ref is not None:
            return self.definition(ref)
        node = Node()
        self._fill(node, raw)
        return node

    def _fill(self, node: Node, raw: Mapping[str, Any]) -> None:
        types = raw.get("type")
        types = [types] if isinstance(types, str) else [t for t in types or () if t != "null"]
        node.types = tuple(types)
        node.accepts = _acceptor(node.types)
        if node.go_type == "interface {}":
            node.go_type = _go_scalar(node.types, raw.get("format"))
        if raw.get("enum") is not None:
            node.enum = tuple(raw["enum"])
        props = raw.get("properties")
        if isinstance(props, Mapping):
            node.kind = OBJECT
            node.required = tuple(raw.get("required") or ())
            node.props = {key: self.schema(sub) for key, sub in props.items()}
            _drop_own_kind_enum(node)
        elif isinstance(raw.get("additionalProperties"), Mapping):
            node.kind = MAP
            node.item = self.schema(raw["additionalProperties"])
            node.go_type = f"map[string]{node.item.go_type}"
        elif "array" in types:
            node.kind = ARRAY
            if isinstance(raw.get("items"), Mapping):
                node.item = self.schema(raw["items"])
                node.go_type = f"[]{node.item.go_type}"
            node.list_type = raw.get("x-kubernetes-list-type")
            node.list_map_keys = tuple(raw.get("x-kubernetes-list-map-keys") or ())
            node.patch_strategy = raw.get("x-kubernetes-patch-strategy")
            node.merge_key = raw.get("x-kubernetes-patch-merge-key")
        elif "object" in types or not types:
            node.kind = ANY  # RawExtension, FieldsV1, JSON: free-form
        else:
            node.kind = SCALAR


def _drop_own_kind_enum(node: Node) -> None:
    """The package pins apiVersion/kind to the kind's own values; the server checks those itself."""
    for field in ("apiVersion", "kind"):
        sub = node.props.get(field)
        if sub is not None and sub.enum is not None:
            plain = Node()
            plain.kind, plain.types, plain.accepts = SCALAR, sub.types, sub.accepts
            node.props[field] = plain


@functools.cache
def _compiler() -> _Compiler:
    return _Compiler()


@functools.cache
def kind_node(group: str, version: str, kind: str) -> Node | None:
    """The compiled schema of a built-in kind, or None when the release has no definition for it."""
    name = apidefs.definition_name(group, version, kind)
    return None if name is None else _compiler().definition(name)


def node_at(root: Node | None, path: tuple[str, ...]) -> Node | None:
    """The node at ``path`` (field names from the root, list items elided; a map consumes one name)."""
    node = root
    for name in path:
        while node is not None and node.kind == ARRAY:
            node = node.item
        if node is None:
            return None
        if node.kind == OBJECT:
            node = node.props.get(name)
        elif node.kind == MAP:
            node = node.item
        else:
            return None
    return node

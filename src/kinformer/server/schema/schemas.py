"""Compiled schemas of the built-in kinds: unknown fields, types, required fields and enums, and list semantics.

A kind's definition (:mod:`kinformer.server.schema.apidefs`) is compiled once, on first use, into a tree of
:class:`Node` objects; definitions referred to from several places (ObjectMeta, PodSpec, Container) compile to one
shared node, and recursive definitions (JSONSchemaProps) to a cyclic graph. Requests then walk the object against
the compiled tree only; the raw schema is never consulted per request.

What the walks report follows kube-apiserver's decoding of built-ins: a field the Go type lacks is an unknown
field (``spec.template.spec.containers[0].containerPrt``); ``null`` is accepted anywhere (Go leaves the field at
its zero value); a value of the wrong JSON type, a missing required field or a value outside an enum is a cause.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from kinformer.server.machinery.causes import json_type
from kinformer.server.schema import apidefs, enums, optional_fields

__all__ = ["Node", "compiled", "definition_node", "kind_node", "node_at"]

Cause = dict[str, str]

# Node kinds: a typed object (props), a map (item = value node), an array (item), a scalar, or anything.
# Ordered so that ``kind > ANY`` means "has children to walk".
SCALAR, ANY, OBJECT, MAP, ARRAY = 0, 1, 2, 3, 4
_JSON_TYPE_NAMES = {"string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float)}


class Node:
    """One compiled schema node. ``types`` are the JSON types accepted (empty: any)."""

    __slots__ = ("accepts", "compiled", "enum", "enum_cause", "go_type", "item", "kind", "list_map_keys", "list_type",
                 "merge_key", "patch_strategy", "props", "required", "struct", "types")

    def __init__(self) -> None:
        self.kind: int = ANY
        self.types: tuple[str, ...] = ()
        self.accepts: Callable[[Any], bool] = _accept_any
        self.props: dict[str, Node] = {}
        self.required: tuple[str, ...] = ()
        self.item: Node | None = None
        self.enum: tuple[Any, ...] | None = None
        # kube's cause for a value outside ``enum`` (path, value), when it is not the generic "Unsupported value"
        self.enum_cause: Callable[[str, Any], Cause | None] | None = None
        self.compiled: Callable[[Any], bool] | None = None  # see fine(): built on first use
        self.list_type: str | None = None
        self.list_map_keys: tuple[str, ...] = ()
        self.patch_strategy: str | None = None
        self.merge_key: str | None = None
        self.go_type = "interface {}"  # as Go names the field's type in decoding errors
        self.struct = ""  # a definition's Go struct name (PodSpec), "" for inline schemas

    # --------------------------------------------------------------------------------- the fast check

    def fine(self, value: Any) -> bool:
        """True when ``value`` has no unknown field, the right JSON types, every required field and enum values.

        One pass through the closure :func:`compiled` builds for this node on first use; only a value it refuses is
        walked again by the reporting walks below (:meth:`unknown`, :meth:`check`, :meth:`type_error`).
        """
        return value is None or (self.compiled or compiled(self))(value)

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
            cause = self.enum_cause(path, value) if self.enum_cause else _not_supported(path, value, self.enum)
            if cause is not None:
                causes.append(cause)
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


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_int_or_string(value: Any) -> bool:
    return type(value) is str or _is_integer(value)


def _is_string_or_number(value: Any) -> bool:  # a Quantity
    return type(value) is str or type(value) is int or type(value) is float


_ACCEPTS: dict[tuple[str, ...], Callable[[Any], bool]] = {
    ("string",): _is_string, ("integer",): _is_integer, ("boolean",): _is_boolean, ("object",): _is_object,
    ("array",): _is_array, ("number",): _is_number, ("integer", "string"): _is_int_or_string,
    ("string", "number"): _is_string_or_number}


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


# ------------------------------------------------------------------------------------- compiled checks
# A node compiles to one closure answering Node.fine. An object's closure looks each field up in a table of
# entries: a Python type for a plain scalar (``type(v) is str``: no call at all) or the closure of the field's
# node. Free-form fields (RawExtension, managedFields) cost one call that accepts anything.

_PLAIN_SCALARS: dict[tuple[str, ...], type] = {("string",): str, ("boolean",): bool, ("integer",): int}
Entry = type | Callable[[Any], bool]


def compiled(node: Node) -> Callable[[Any], bool]:
    """The closure answering ``node.fine`` for a value that is not None (built once, kept on the node)."""
    fn = node.compiled
    if fn is None:
        node.compiled = lambda value: node.compiled(value)  # type: ignore[misc]  # only a cycle calls this one
        fn = node.compiled = _compile(node)
    return fn


def _entry(node: Node) -> Entry:
    if node.enum is None:
        if node.kind == SCALAR and node.types in _PLAIN_SCALARS:
            return _PLAIN_SCALARS[node.types]
        if node.kind <= ANY:
            return node.accepts
    return compiled(node)


def _integral(entry: type, value: Any) -> bool:
    """An integer field takes an integral float (``3.0``); no other scalar of another type passes."""
    return entry is int and type(value) is float and value.is_integer()


def _compile(node: Node) -> Callable[[Any], bool]:
    accepts, enum = node.accepts, node.enum
    if node.kind == OBJECT:
        fn = _object_check(node)
    elif node.kind in (ARRAY, MAP) and node.item is not None:
        fn = _items_check(_entry(node.item), list if node.kind == ARRAY else dict, accepts)
    else:
        fn = accepts
    if enum is None:
        return fn
    if fn is _is_string and all(type(v) is str for v in enum):
        strings = frozenset(enum)  # a str equals only a str: the set answers as the tuple would
        return lambda value: type(value) is str and value in strings
    return lambda value: value in enum and fn(value)


def _object_check(node: Node) -> Callable[[Any], bool]:
    table: dict[str, Any] = {}  # field name -> Entry
    required, accepts, get = node.required, node.accepts, table.get

    def check(value: Any) -> bool:
        if type(value) is not dict:
            return accepts(value)
        if required:
            for name in required:
                if name not in value:
                    return False
        for key, item in value.items():
            entry = get(key)
            if entry is None:
                return False
            if type(item) is entry or item is None or (
                    entry(item) if entry.__class__ is not type else _integral(entry, item)):
                continue
            return False
        return True

    node.compiled = check  # the fields' entries below may lead back here (JSONSchemaProps)
    for key, sub in node.props.items():
        table[key] = _entry(sub)
    return check


def _items_check(entry: Any, container: Any, accepts: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if type(value) is not container:
            return accepts(value)
        items: Any = value.values() if container is dict else value
        for item in items:
            if type(item) is entry or item is None or (
                    entry(item) if entry.__class__ is not type else _integral(entry, item)):
                continue
            return False
        return True

    return check


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
        node.required = optional_fields.required(name, node.required)
        enums.apply(name, node)
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


def definition_node(name: str) -> Node:
    """The compiled schema of definition ``name`` (``io.k8s.api.core.v1.PodSpec``)."""
    return _compiler().definition(name)


@functools.cache
def kind_node(group: str, version: str, kind: str) -> Node | None:
    """The compiled schema of a built-in kind, or None when the release has no definition for it.

    Its ``fine`` walks the schema; :func:`kinformer.server.schema.structcheck.typed_kind_node` is the same node with a
    typed one-pass check tried first."""
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

"""Python types -> structural OpenAPI v3 schemas, the form a CustomResourceDefinition's versions carry.

Mapping: ``str`` string, ``int`` integer, ``float`` number, ``bool`` boolean, ``datetime`` string/date-time,
``date`` string/date; ``list[X]``/``tuple[X, ...]``/``Sequence[X]`` array of X, ``set[X]``/``frozenset[X]`` array
with list-type set; ``dict[str, X]``/``Mapping[str, X]`` object with additionalProperties X; ``Literal[...]`` and
``Enum`` subclasses an enum of their values; ``X | None`` (``Optional[X]``) X, nullable; ``Any`` and a bare
``dict`` keep unknown fields; records (:mod:`.records`) objects with properties, required and defaults;
``Annotated[X, marker, ...]`` X with each :class:`~.markers.SchemaMarker` applied.

Each property's description ends with its constraints (``Constraints: minimum 0; maxLength 63; default 1.``):
kube publishes them in the OpenAPI document but ``kubectl explain`` prints descriptions only.

Invariant: the result is structural as kube-apiserver requires (every node has a type, or keeps unknown fields;
a recursive record is a ``TypeError`` since a structural schema cannot refer to itself).
"""

from __future__ import annotations

import collections.abc
import datetime
import enum
import json
import types
import typing
from typing import Any, cast

from kinformer.authoring.markers import SchemaMarker
from kinformer.authoring.records import MISSING, is_record, record_doc, record_fields
from kinformer.kinds.apiextensions_v1 import JSONSchemaProps

__all__ = ["schema_of"]

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
}
_ARRAYS = (list, tuple, collections.abc.Sequence, collections.abc.Iterable)
_SETS = (set, frozenset, collections.abc.Set)
_MAPS = (dict, collections.abc.Mapping)
_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}


def schema_of(tp: object) -> JSONSchemaProps:
    """The structural schema of ``tp`` (``TypeError`` naming the type when it has none)."""
    return cast(JSONSchemaProps, _schema(tp, ()))


def _schema(tp: Any, seen: tuple[type, ...]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        schema = _schema(args[0], seen)
        for extra in args[1:]:
            if isinstance(extra, SchemaMarker):
                extra.apply(cast(JSONSchemaProps, schema))
        return schema
    if tp in _SCALARS:
        return dict(_SCALARS[tp])
    if tp is typing.Any or tp is dict or tp is object:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True} if tp is dict else \
            {"x-kubernetes-preserve-unknown-fields": True}
    if origin is typing.Union or origin is types.UnionType:
        return _optional(tp, args, seen)
    if origin is typing.Literal:
        return _enum([a.value if isinstance(a, enum.Enum) else a for a in args], tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum([m.value for m in tp], tp)
    if origin in _SETS:
        return {"type": "array", "items": _schema(args[0], seen), "x-kubernetes-list-type": "set"}
    if origin in _ARRAYS:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise TypeError(f"{tp!r}: only tuple[X, ...] has a schema (a JSON array of one item type)")
        return {"type": "array", "items": _schema(args[0], seen)}
    if origin in _MAPS:
        if args and args[0] is not str:
            raise TypeError(f"{tp!r}: JSON object keys are strings; use dict[str, X]")
        return {"type": "object", "additionalProperties": _schema(args[1], seen) if args else {}}
    if is_record(tp):
        return _record(tp, seen)
    raise TypeError(f"{tp!r} has no OpenAPI schema (use a scalar, list, dict, Literal, Enum or a record type)")


def _optional(tp: Any, args: tuple[Any, ...], seen: tuple[type, ...]) -> dict[str, Any]:
    present = [a for a in args if a is not type(None)]
    if len(present) != 1:
        raise TypeError(f"{tp!r}: a union has no structural schema (only X | None has)")
    schema = _schema(present[0], seen)
    if len(present) != len(args):
        schema["nullable"] = True
    return schema


def _enum(values: list[Any], tp: Any) -> dict[str, Any]:
    kinds = {_JSON_TYPES.get(type(v)) for v in values}
    if len(kinds) != 1 or None in kinds:
        raise TypeError(f"{tp!r}: enum values must all be strings, or all integers, numbers or booleans")
    return {"type": kinds.pop(), "enum": list(values)}


_CONSTRAINTS = ("minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "default")


def _described(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its constraints also said in its description, where ``kubectl explain`` shows them."""
    said = []
    for key in _CONSTRAINTS:
        if key in schema:
            exclusive = "exclusive " if schema.get(f"exclusive{key.capitalize()}") else ""
            said.append(f"{exclusive}{key} {json.dumps(schema[key])}")
    said += [rule.get("message") or f"rule: {rule['rule']}" for rule in schema.get("x-kubernetes-validations", ())]
    if said:
        note = "Constraints: " + "; ".join(said) + "."
        schema["description"] = f"{schema['description']}\n{note}" if schema.get("description") else note
    return schema


def _record(tp: type, seen: tuple[type, ...]) -> dict[str, Any]:
    if tp in seen:
        chain = " -> ".join(t.__name__ for t in (*seen, tp))
        raise TypeError(f"recursive type {chain}: a structural schema cannot refer to itself")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in record_fields(tp):
        prop = _schema(f.type, (*seen, tp))
        if f.doc and "description" not in prop:
            prop["description"] = f.doc
        if f.default is not MISSING:
            prop["default"] = f.default
        properties[f.name] = _described(prop)
        if f.required:
            required.append(f.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    doc = record_doc(tp)
    if doc:
        schema["description"] = doc
    return schema

"""A built-in kind's compiled schema as msgspec Struct types: a check of a decoded JSON document in one C pass.

:func:`doc_fine` converts a document (as orjson decodes it) to the type built, once per kind, from the kind's
:class:`schemas.Node` graph; the structs are dropped. It answers True only for a document that ``Node.fine``
also finds fine and that nests within ``nesting.MAX_DEPTH``: every type accepts a subset of what its node
accepts (Structs forbid unknown fields; required fields have no default; ``null`` is taken wherever the walk
takes it; string enums are Literals; free-form values are JSON of a few levels, FieldsV1 nested objects), and
the types' nesting is bounded. So True spares the document both the schema walk and the depth measure; False
says nothing (an integral float in an integer field, an unusual free-form value, ...): the caller walks and
measures as before. Converting the decoded document costs less than decoding the body again (its strings are
not copied). A kind whose graph has something this cannot type (a recursive definition, a non-string enum)
has no type.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any, Literal, Union

import msgspec

from kinformer.server.machinery.nesting import MAX_DEPTH, too_deep_at
from kinformer.server.schema import schemas
from kinformer.server.schema.schemas import ANY, ARRAY, MAP, OBJECT, SCALAR, Node

__all__ = ["doc_fine", "install_typed_check", "typed_kind_node"]

# Generic aliases built at run time (typed Any: the types are values here)
_List: Any = list
_Dict: Any = dict
_Union: Any = Union
_Literal: Any = Literal

# The scalar types of the schema nodes, as msgspec types accepting a subset of what the node's ``accepts`` takes.
_SCALARS: dict[tuple[str, ...], Any] = {
    ("string",): str, ("boolean",): bool, ("integer",): int, ("number",): float,
    ("integer", "string"): _Union[int, str], ("string", "number"): _Union[str, int, float]}
_FREE_LEVELS = 6  # containers a free-form value (RawExtension, JSON) may nest in the fast check
_FIELDS_V1_LEVELS = 40  # objects a FieldsV1 (managedFields[].fieldsV1) may nest in the fast check
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_MANAGED_FIELDS_ENTRY = "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"
_FIELDS_V1 = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1"


class _Untypable(Exception):
    """A node with no msgspec type accepting only what it accepts."""


class _Empty(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """``{}``: the leaves of a FieldsV1."""


class _AnyObject(msgspec.Struct, gc=False):
    """Any object, its fields not looked at."""


def _json(levels: int) -> Any:
    """Any JSON value nesting at most ``levels`` containers."""
    value: Any = _Union[None, bool, int, float, str]
    for _ in range(levels):
        value = _Union[None, bool, int, float, str, _List[value], _Dict[str, value]]
    return value


def _fields_v1(levels: int) -> Any:
    """Objects of objects, ``levels`` deep, ending in ``{}``."""
    value: Any = _Empty
    for _ in range(levels - 1):
        value = _Dict[str, value]
    return value


# Nodes whose values may hold a free-form value (their types differ between the builders' modes)
_FREE_FORM: set[int] = set()


def _holds_free_form(node: Node) -> bool:
    """Whether ``node`` (its parts typed already) has a free-form value in it."""
    if node.kind == ANY or node is schemas.definition_node(_OBJECT_META):
        return True
    if node.kind in (ARRAY, MAP):
        return node.item is not None and id(node.item) in _FREE_FORM
    return node.kind == OBJECT and any(id(sub) in _FREE_FORM for sub in node.props.values())


class _Builder:
    """msgspec types of nodes, with the most containers a value of each may nest (one type per node).

    ``bounded``: free-form values are typed JSON of bounded nesting (for :func:`doc_fine`, which answers for the
    depth too); otherwise they are taken as they are, unlooked at (for ``node.fine``, which does not).
    """

    def __init__(self, bounded: bool) -> None:
        self.bounded = bounded
        self.types: dict[int, tuple[Any, int]] = {}
        self.untypable: set[int] = set()  # nodes whose values (or a part of them) have no such type
        self.building: set[int] = set()
        self.free: Any = None  # JSON of _FREE_LEVELS (built on first use: a few ms)
        self.names = itertools.count()
        self.own_meta: tuple[Any, int] | None = None  # a kind's own ObjectMeta (see root)
        self.peer: _Builder | None = None  # the builder of the other mode, whose types of plain nodes are shared

    def type_of(self, node: Node) -> tuple[Any, int]:
        done = self.types.get(id(node))
        if done is not None:
            return done
        if self.peer is not None and id(node) not in _FREE_FORM:
            done = self.peer.types.get(id(node))  # the same type in both modes: built once
            if done is not None:
                self.types[id(node)] = done
                return done
        if id(node) in self.untypable or id(node) in self.building:
            raise _Untypable("a recursive definition, or a part without a type")
        self.building.add(id(node))
        try:
            done = self.types[id(node)] = self._build(node)
        except _Untypable:
            self.untypable.add(id(node))
            raise
        finally:
            self.building.discard(id(node))
        if _holds_free_form(node):
            _FREE_FORM.add(id(node))
        return done

    def _free(self) -> Any:
        if self.free is None:
            self.free = _json(_FREE_LEVELS)
        return self.free

    def _build(self, node: Node) -> tuple[Any, int]:
        if node.kind == SCALAR:
            return self._scalar(node), 0
        if node.enum is not None:
            raise _Untypable("an enum of a container")
        if node.kind == ANY and not self.bounded:
            if node.types not in ((), ("object",)):
                raise _Untypable(f"a free-form value of types {node.types}")
            return (Any if node.types == () else _AnyObject), 0
        if node.kind == ANY:
            if node is schemas.definition_node(_FIELDS_V1):
                return _fields_v1(_FIELDS_V1_LEVELS), _FIELDS_V1_LEVELS
            if node.types == ():
                return self._free(), _FREE_LEVELS
            if node.types == ("object",):
                return _Dict[str, self._free()], _FREE_LEVELS + 1
            raise _Untypable(f"a free-form value of types {node.types}")
        if node.kind in (ARRAY, MAP):
            if node.item is None:
                raise _Untypable("an array of unknown items")
            item, height = self.type_of(node.item)
            item = item | None
            return (_List[item] if node.kind == ARRAY else _Dict[str, item]), height + 1
        assert node.kind == OBJECT
        return self._struct(node)

    @staticmethod
    def _scalar(node: Node) -> Any:
        found = _SCALARS.get(node.types)
        if found is None:
            raise _Untypable(f"a scalar of types {node.types}")
        if node.enum is None:
            return found
        if node.types != ("string",) or not node.enum or not all(type(v) is str for v in node.enum):
            raise _Untypable("an enum of other values than strings")
        return _Literal[tuple(node.enum)]

    def root(self, node: Node) -> tuple[Any, int]:
        """A kind's type: as :meth:`type_of`, but its own metadata's managedFields (a list of entries) have
        FieldsV1 of any content, their depth measured apart (:func:`doc_fine`), and count no height here."""
        meta = schemas.definition_node(_OBJECT_META)
        if node.props.get("metadata") is not meta:
            return self.type_of(node)
        if self.own_meta is None:
            entry = self._struct(schemas.definition_node(_MANAGED_FIELDS_ENTRY), {"fieldsV1": (_AnyObject, 0)})[0]
            self.own_meta = self._struct(meta, {"managedFields": (_List[entry | None], 0)})
        return self._struct(node, {"metadata": self.own_meta})

    def _struct(self, node: Node, overrides: dict[str, tuple[Any, int]] | None = None) -> tuple[Any, int]:
        if node.types != ("object",):
            raise _Untypable(f"an object of types {node.types}")
        fields: list[tuple[str, Any, Any]] = []
        height = 0
        for i, (key, sub) in enumerate(node.props.items()):
            if overrides and key in overrides:
                value, sub_height = overrides[key]
            elif key == "managedFields" and self.bounded and node is schemas.definition_node(_OBJECT_META):
                sub = schemas.definition_node(_MANAGED_FIELDS_ENTRY)  # free-form in the walk: typed here, a subset
                entry, sub_height = self.type_of(sub)
                value, sub_height = _List[entry | None], sub_height + 1
            else:
                value, sub_height = self.type_of(sub)
            height = max(height, sub_height)
            default = msgspec.NODEFAULT if key in node.required else None
            fields.append((f"f{i}", value | None, msgspec.field(default=default, name=key)))
        struct = msgspec.defstruct(f"S{next(self.names)}", fields, forbid_unknown_fields=True, kw_only=True,
                                   gc=False)
        return struct, height + 1


_BUILDER = _Builder(bounded=True)  # doc_fine's
_FINE_BUILDER = _Builder(bounded=False)  # node.fine's
_BUILDER.peer, _FINE_BUILDER.peer = _FINE_BUILDER, _BUILDER
_TYPES: dict[int, tuple[Node, Any]] = {}  # id(kind node) -> (the node, its type or None)


def _type(node: Node) -> Any:
    found = _TYPES.get(id(node))
    if found is not None:
        return found[1]
    try:
        root, height = _BUILDER.root(node)
        typed = root if height <= MAX_DEPTH else None
    except _Untypable:
        typed = None
    _TYPES[id(node)] = (node, typed)
    return typed


def doc_fine(node: Node, doc: Any) -> bool:
    """True when ``doc`` (JSON data as decoded: dicts, lists, str, int, float, bool, None) is fine for the kind
    ``node`` (as ``node.fine``) and nests within MAX_DEPTH; False when that could not be told this way."""
    typed = _type(node)
    if typed is None or not _converts(typed, doc):
        return False
    meta = doc.get("metadata")  # a dict or None: the conversion took it
    # managedFields nest at level 3 (the document, metadata, the list); a measure costs less than a typed FieldsV1
    return meta is None or not too_deep_at(meta.get("managedFields"), 3)


def install_typed_check(node: Node) -> None:
    """Make ``node.fine`` try the conversion to the node's type first, the walk only for what it refuses.

    For decoded objects that :func:`doc_fine` did not see (a patch's or an apply's result, a webhook's patch, a
    body it could not tell): the type accepts a subset of what the walk accepts, so every answer is the walk's.
    The type (and the walk behind it) are built on the first check; a node without a type (a recursive
    definition) keeps the walk alone.
    """
    def first(value: Any) -> bool:
        node.compiled = None
        walk = schemas.compiled(node)
        try:
            typed = _FINE_BUILDER.type_of(node)[0]
        except _Untypable:
            return walk(value)

        def check(value: Any) -> bool:
            try:  # _converts, inline: every write's schema check passes here
                msgspec.convert(value, typed)
            except msgspec.ValidationError:
                return walk(value)
            return True

        node.compiled = check
        return check(value)

    node.compiled = first


@functools.cache
def typed_kind_node(group: str, version: str, kind: str) -> Node | None:
    """:func:`schemas.kind_node` with :func:`install_typed_check` applied (once): the node validation checks with."""
    node = schemas.kind_node(group, version, kind)
    if node is not None:
        install_typed_check(node)
    return node


def _converts(typed: Any, value: Any) -> bool:
    try:
        msgspec.convert(value, typed)
    except msgspec.ValidationError:
        return False
    return True

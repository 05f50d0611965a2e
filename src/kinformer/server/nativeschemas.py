"""The fast path of a built-in kind's schema check: the compiled schema as msgspec types, checked in C.

:meth:`kinformer.server.schemas.Node.fine` answers "no unknown field, the right JSON types, every required
field, values inside their enums" by walking the object in Python. For a kind's root node this module builds
the same schema as msgspec types once, on first use (a ``Struct`` per object definition with
``forbid_unknown_fields``, every field ``T | None`` since ``null`` is accepted anywhere, required fields
without a default, ``Literal`` for string enums, ``list``/``dict`` for arrays and maps, ``Any`` for free-form
fields), and ``msgspec.convert`` then checks a decoded body in C, about twice as fast as the walk.

Invariant: whatever ``msgspec.convert`` accepts, the walk accepts. Each node maps to a type that is at most as
lenient as the node (an integral float such as ``3.0``, which the walk takes for an integer, is refused here),
and a node with no such type (a recursive definition: JSONSchemaProps) leaves the kind on the walk alone. A
body msgspec refuses is walked, so every answer, and every cause the reporting walks give, is the walk's.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from .schemas import ANY, ARRAY, MAP, OBJECT, SCALAR, Node, compiled

__all__ = ["install_native_check"]

_SCALARS: dict[tuple[str, ...], Any] = {
    ("string",): str, ("integer",): int, ("boolean",): bool, ("number",): int | float,
    ("integer", "string"): int | str, ("string", "number"): str | int | float}

_types: dict[int, Any] = {}  # id(node) -> its msgspec type (nodes live as long as the process)
_names = iter(range(1, 1 << 62))


class _Unsupported(Exception):
    """A node msgspec cannot express as strictly as the walk checks it."""


def install_native_check(node: Node) -> None:
    """Make ``node.fine`` try msgspec first; the types (and the walk behind them) are built on the first check.

    A node msgspec cannot express keeps the walk alone from then on.
    """
    convert, refused = msgspec.convert, msgspec.ValidationError

    def first(value: Any) -> bool:
        node.compiled = None
        walk = compiled(node)
        try:
            target = _type(node, set())
        except _Unsupported:
            return walk(value)

        def check(value: Any) -> bool:
            try:
                convert(value, target)
            except refused:
                return walk(value)
            return True

        node.compiled = check
        return check(value)

    node.compiled = first


def _type(node: Node, active: set[int]) -> Any:
    found = _types.get(id(node))
    if found is not None:
        return found
    if id(node) in active:
        raise _Unsupported("a recursive definition")
    active.add(id(node))
    try:
        made = _types[id(node)] = _enum(node, _shape(node, active))
    finally:
        active.discard(id(node))
    return made


def _shape(node: Node, active: set[int]) -> Any:
    kind, types = node.kind, node.types
    if kind == OBJECT and types == ("object",):
        fields = []
        for i, (key, sub) in enumerate(node.props.items()):
            field = msgspec.field(name=key) if key in node.required else msgspec.field(default=None, name=key)
            fields.append((f"f{i}", _type(sub, active) | None, field))
        return msgspec.defstruct(f"Schema{next(_names)}", fields, kw_only=True, forbid_unknown_fields=True,
                                 gc=False)
    if kind == ARRAY and types == ("array",):
        return list if node.item is None else list[_type(node.item, active) | None]  # type: ignore[misc]
    if kind == MAP and types == ("object",):
        return dict if node.item is None else dict[str, _type(node.item, active) | None]  # type: ignore[misc]
    if kind == ANY and types in ((), ("object",)):
        return Any if not types else dict
    if kind == SCALAR and types in _SCALARS:
        return _SCALARS[types]
    raise _Unsupported(f"a node of kind {kind} and types {types}")


def _enum(node: Node, shape: Any) -> Any:
    enum = node.enum
    if enum is None:
        return shape
    if node.kind == SCALAR and node.types == ("string",) and enum and all(type(v) is str for v in enum):
        return Literal[tuple(enum)]
    raise _Unsupported("an enum that is not of strings")

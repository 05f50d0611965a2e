"""Markers for ``Annotated`` fields: what controller-gen's ``+kubebuilder:validation`` markers say, as values.

``replicas: Annotated[int, ki.Minimum(0), ki.Doc("How many.")]``. Each marker is a frozen value whose
:meth:`apply` writes its keywords into the OpenAPI schema of the annotated type; markers never read each other,
so their order does not matter (except :class:`Rule`, which appends, keeping the order given).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from kinformer.authoring.records import to_json
from kinformer.kinds.apiextensions_v1 import JSONSchemaProps, ValidationRule

__all__ = [
    "Default",
    "Doc",
    "Format",
    "ListType",
    "MapType",
    "MaxItems",
    "MaxLength",
    "Maximum",
    "MinItems",
    "MinLength",
    "Minimum",
    "Pattern",
    "PreserveUnknownFields",
    "Rule",
    "SchemaMarker",
]


class SchemaMarker:
    """Base of every marker: :meth:`apply` adds its keywords to ``schema`` in place."""

    def apply(self, schema: JSONSchemaProps) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Minimum(SchemaMarker):
    """The smallest value allowed (``exclusive``: the value itself is not)."""

    value: int | float
    exclusive: bool = False

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["minimum"] = self.value
        if self.exclusive:
            schema["exclusiveMinimum"] = True


@dataclass(frozen=True)
class Maximum(SchemaMarker):
    """The largest value allowed (``exclusive``: the value itself is not)."""

    value: int | float
    exclusive: bool = False

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["maximum"] = self.value
        if self.exclusive:
            schema["exclusiveMaximum"] = True


CountKeyword = Literal["maxLength", "minLength", "maxItems", "minItems"]


@dataclass(frozen=True)
class _Count(SchemaMarker):
    value: int
    keyword: CountKeyword = field(init=False, default="maxLength")

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or self.value < 0:
            raise ValueError(f"{type(self).__name__} needs a non-negative int, got {self.value!r}")

    def apply(self, schema: JSONSchemaProps) -> None:
        schema[self.keyword] = self.value


@dataclass(frozen=True)
class MaxLength(_Count):
    """The longest string allowed, in characters."""

    keyword: CountKeyword = field(init=False, default="maxLength")


@dataclass(frozen=True)
class MinLength(_Count):
    """The shortest string allowed, in characters."""

    keyword: CountKeyword = field(init=False, default="minLength")


@dataclass(frozen=True)
class MaxItems(_Count):
    """The most items a list may hold."""

    keyword: CountKeyword = field(init=False, default="maxItems")


@dataclass(frozen=True)
class MinItems(_Count):
    """The fewest items a list may hold."""

    keyword: CountKeyword = field(init=False, default="minItems")


@dataclass(frozen=True)
class Pattern(SchemaMarker):
    """A regular expression (ECMA 262 as kube reads it) the string must match somewhere."""

    regex: str

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["pattern"] = self.regex


@dataclass(frozen=True)
class Format(SchemaMarker):
    """An OpenAPI string format (``date-time``, ``uri``, ``int-or-string`` ...)."""

    name: str

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["format"] = self.name


@dataclass(frozen=True)
class Default(SchemaMarker):
    """The value the server fills in when the field is absent (for types that cannot carry a default, such as
    TypedDicts; a dataclass, Struct or pydantic field default says the same)."""

    value: object

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["default"] = to_json(self.value)


@dataclass(frozen=True)
class Doc(SchemaMarker):
    """The field's description (what ``kubectl explain`` shows); wins over an attribute docstring."""

    text: str

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["description"] = self.text


@dataclass(frozen=True)
class Rule(SchemaMarker):
    """A CEL validation rule, ``x-kubernetes-validations``: ``self`` is the annotated value.

    kube-apiserver evaluates these; kinformer's embedded server stores and serves them but does not evaluate
    them (its schema checks cover types, enums, bounds, lengths, counts and patterns).
    """

    rule: str
    message: str | None = None
    reason: str | None = None
    field_path: str | None = None

    def apply(self, schema: JSONSchemaProps) -> None:
        entry: ValidationRule = {"rule": self.rule}
        if self.message is not None:
            entry["message"] = self.message
        if self.reason is not None:
            entry["reason"] = self.reason
        if self.field_path is not None:
            entry["fieldPath"] = self.field_path
        schema.setdefault("x-kubernetes-validations", []).append(entry)


@dataclass(frozen=True)
class ListType(SchemaMarker):
    """How server-side apply merges the list: ``atomic``, ``set`` or ``map`` (``keys`` name the map keys)."""

    kind: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("atomic", "set", "map"):
            raise ValueError(f"ListType kind must be atomic, set or map, got {self.kind!r}")
        if (self.kind == "map") != bool(self.keys):
            raise ValueError("ListType('map') needs keys, and only it takes them")

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["x-kubernetes-list-type"] = self.kind
        if self.keys:
            schema["x-kubernetes-list-map-keys"] = list(self.keys)


@dataclass(frozen=True)
class MapType(SchemaMarker):
    """How server-side apply merges the object or map: ``granular`` (per key) or ``atomic`` (whole)."""

    kind: Literal["granular", "atomic"]

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["x-kubernetes-map-type"] = self.kind


@dataclass(frozen=True)
class PreserveUnknownFields(SchemaMarker):
    """Keep fields the schema does not name (they are pruned otherwise)."""

    def apply(self, schema: JSONSchemaProps) -> None:
        schema["x-kubernetes-preserve-unknown-fields"] = True

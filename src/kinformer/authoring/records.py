"""The fields of a record type: dataclasses, TypedDicts, msgspec Structs and pydantic models, read alike.

A record's field is its wire name, its type (with ``Annotated`` extras kept), whether the wire form must carry
it, its default as JSON (``MISSING`` when it has none) and its description (an attribute docstring: the string
literal on the line after the field, as Sphinx and editors read it). pydantic is optional: a model is recognised
only when pydantic is already imported by the caller's code.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import itertools
import sys
import textwrap
import typing
from dataclasses import dataclass
from typing import Any, is_typeddict

import msgspec

__all__ = ["MISSING", "Field", "is_record", "record_doc", "record_fields", "to_json"]

MISSING: Any = object()


@dataclass(frozen=True)
class Field:
    name: str  # the name on the wire
    type: Any
    required: bool
    default: Any = MISSING  # JSON-ready, or MISSING
    doc: str | None = None


def _pydantic_model(tp: object) -> bool:
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(tp, type) and issubclass(tp, pydantic.BaseModel)


def is_record(tp: object) -> bool:
    """True for the record types :func:`record_fields` reads."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or is_typeddict(tp)
                                     or issubclass(tp, msgspec.Struct) or _pydantic_model(tp))


def record_doc(tp: type) -> str | None:
    """The class docstring, unless it is the signature dataclasses writes when there is none."""
    doc = tp.__dict__.get("__doc__")
    if not doc or (dataclasses.is_dataclass(tp) and doc.startswith(tp.__name__ + "(")):
        return None
    return inspect.cleandoc(doc)


def to_json(value: object) -> object:
    """``value`` as the JSON a default is written with (enums by value, records as objects)."""
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    return msgspec.to_builtins(value, enc_hook=_enc_hook)


def _enc_hook(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if _pydantic_model(type(value)):
        return value.model_dump(mode="json", by_alias=True)
    raise TypeError(f"cannot write a default of type {type(value).__name__} as JSON")


def _attribute_docs(tp: type) -> dict[str, str]:
    """Attribute docstrings of ``tp``'s class body (empty when its source is not available)."""
    try:
        source = textwrap.dedent(inspect.getsource(tp))
    except (OSError, TypeError):
        return {}
    body = next((n.body for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)), [])
    docs: dict[str, str] = {}
    for stmt, after in itertools.pairwise(body):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(after.value.value)
    return docs


def record_fields(tp: type) -> list[Field]:
    """The fields of record type ``tp`` in declaration order (``TypeError`` for any other type)."""
    hints = typing.get_type_hints(tp, include_extras=True)
    docs = _attribute_docs(tp)
    if dataclasses.is_dataclass(tp):
        fields = [_dataclass_field(f, hints[f.name]) for f in dataclasses.fields(tp)]
    elif is_typeddict(tp):
        required: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
        fields = [Field(name, _strip_required(hint), _qualifier(hint, name in required))
                  for name, hint in hints.items()]
    elif isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        fields = [_struct_field(f, hints[f.name]) for f in msgspec.structs.fields(tp)]
    elif _pydantic_model(tp):
        fields = [_pydantic_field(name, info, hints.get(name, info.annotation))
                  for name, info in tp.model_fields.items()]  # type: ignore[attr-defined]
    else:
        raise TypeError(f"{tp!r} is not a dataclass, TypedDict, msgspec Struct or pydantic model")
    return [dataclasses.replace(f, doc=docs.get(f.name)) if f.name in docs else f for f in fields]


def _qualifier(hint: Any, default: bool) -> bool:
    """Whether a TypedDict key is required: its ``Required``/``NotRequired`` marker, else ``default`` (Python 3.11
    cannot read the marker from a string annotation, so ``__required_keys__`` alone may be wrong)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _qualifier(typing.get_args(hint)[0], default)
    return {typing.Required: True, typing.NotRequired: False}.get(origin, default)


def _strip_required(hint: Any) -> Any:
    """``Required[X]`` / ``NotRequired[X]`` -> ``X`` (TypedDict's markers; the keys already tell)."""
    if typing.get_origin(hint) in (typing.Required, typing.NotRequired):
        return typing.get_args(hint)[0]
    if typing.get_origin(hint) is typing.Annotated:
        inner, *extras = typing.get_args(hint)
        return typing.Annotated[(_strip_required(inner), *extras)] if extras else inner
    return hint


def _factory_default(factory: Any) -> Any:
    return MISSING if factory in (MISSING, dataclasses.MISSING, msgspec.NODEFAULT) else to_json(factory())


def _dataclass_field(f: dataclasses.Field[Any], hint: Any) -> Field:
    if f.default is not dataclasses.MISSING:
        default = None if f.default is None else to_json(f.default)
    else:
        default = _factory_default(f.default_factory)
    required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    return Field(f.name, hint, required, MISSING if default is None else default)


def _struct_field(f: msgspec.structs.FieldInfo, hint: Any) -> Field:
    if f.default is not msgspec.NODEFAULT:
        default = None if f.default is None else to_json(f.default)
    else:
        default = _factory_default(f.default_factory)
    return Field(f.encode_name, hint, f.required, MISSING if default is None else default)


def _pydantic_field(name: str, info: Any, hint: Any) -> Field:
    wire = info.alias or name
    if info.is_required():
        return Field(wire, hint, True, doc=info.description)
    default = info.get_default(call_default_factory=True)
    return Field(wire, hint, False, MISSING if default is None else to_json(default), info.description)

"""The generic printer (Name / Created At) and the printers of custom resources from their CRD columns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from ..endpoints.table_cells import (
    as_int,
    as_list,
    field,
    human_duration,
    name_of,
    parse_time,
    rfc3339,
)
from ..machinery.jsonpath import JSONPathError, compile_jsonpath
from .table import AGE_DOC, NAME, Column, Printer

# -- default (kube's generic convertor, also used for CustomResourceDefinitions)


DEFAULT = Printer((NAME, Column("Created At", "date", "", AGE_DOC)),
                  lambda obj, now: [name_of(obj), rfc3339(field(obj, "metadata", "creationTimestamp"))])


# ------------------------------------------------------------------------------------------ custom resources


def _go_text(value: Any) -> str:
    """A JSON value printed as kubectl's JSONPath printer does (strings verbatim)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def _typed_cell(col_type: str, value: Any, now: float) -> Any:
    """A non-string column's cell: the value when it has the column's JSON type, else ``None``."""
    if col_type == "integer":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return int(value)
        return None
    if col_type == "number":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        return None
    if col_type == "boolean":
        return value if isinstance(value, bool) else None
    if col_type == "date":
        if not isinstance(value, str):
            return None
        ts = parse_time(value)
        return "<invalid>" if ts is None else human_duration(now - ts)
    return None


def custom_resource_printer(columns: Sequence[Mapping[str, Any]] | None) -> Printer:
    """The printer of a CRD version from its ``additionalPrinterColumns``, as apiextensions serves it.

    NAME always comes first; without printer columns the only other column is an AGE (type ``date``)
    of ``.metadata.creationTimestamp``. A column whose jsonPath cannot be parsed prints empty cells.
    """
    if not columns:
        columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": AGE_DOC}]
    defs: list[Column] = [NAME]
    paths: list[tuple[str, Callable[[Any], list[Any]] | None]] = []
    for col in columns:
        json_path = str(col.get("jsonPath") or "")
        col_type = str(col.get("type") or "string")
        desc = str(col.get("description") or f"Custom resource definition column (in JSONPath format): {json_path}")
        defs.append(Column(str(col.get("name") or ""), col_type, str(col.get("format") or ""), desc,
                           as_int(col.get("priority"))))
        try:
            paths.append((col_type, compile_jsonpath(json_path)))
        except (JSONPathError, ValueError):
            paths.append((col_type, None))

    def row(obj: Mapping[str, Any], now: float) -> list[Any]:
        cells: list[Any] = [name_of(obj)]
        for col_type, evaluate in paths:
            found = evaluate(obj) if evaluate is not None else []
            if not found:
                cells.append(None)
            elif col_type == "string":
                cells.append(_go_text(found[0]))
            else:
                cells.append(_typed_cell(col_type, found[0], now))
        return cells

    return Printer(tuple(defs), row)


def crd_printer_columns(crd: Mapping[str, Any], version: str) -> list[Mapping[str, Any]]:
    """The ``additionalPrinterColumns`` of ``version`` in an apiextensions.k8s.io/v1 CRD object."""
    for ver in as_list(field(crd, "spec", "versions")):
        if isinstance(ver, Mapping) and ver.get("name") == version:
            return [c for c in as_list(ver.get("additionalPrinterColumns")) if isinstance(c, Mapping)]
    return []

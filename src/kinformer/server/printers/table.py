"""The ``meta.k8s.io`` Table machinery: column definitions, printers, ``Accept`` negotiation and rows.

Pure functions only (no I/O, no aiohttp). Invariants:

* A printer always yields exactly one cell per column, wide (priority > 0) columns included:
  the server prints "wide" and the client hides the priority columns it does not want.
* Column definitions are deterministic per printer, so a client can tell the header of a watch
  event from the one of the list before it by comparing them.
* Ages are computed from the ``now`` passed in (wall-clock seconds), never from the system clock.
* Cells are JSON values: strings, ints, floats, bools or ``None`` (printed empty).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..endpoints.accept import accept_clauses
from ..schema import apidefs

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("Metadata", "Object", "None")


class Doc:
    """A column description that kube takes from a type's SwaggerDoc, e.g. ``Doc("api.core.v1.PodSpec", "nodeName")``.

    The text is the field's description in the release's API definitions (the same Go comment), read on
    first use so that building the printers loads nothing.
    """

    __slots__ = ("definition", "field")

    def __init__(self, definition: str, field: str) -> None:
        self.definition = definition
        self.field = field

    def __str__(self) -> str:
        return _doc_text(self.definition, self.field)


@functools.cache
def _doc_text(definition: str, field: str) -> str:
    found = apidefs.definition("io.k8s." + definition) or {}
    prop = (found.get("properties") or {}).get(field) or {}
    # SwaggerDoc is the Go comment alone: OpenAPI's generated enum listing is not part of it.
    return str(prop.get("description") or "").split("\n\nPossible enum values:", 1)[0]


META = "apimachinery.pkg.apis.meta.v1.ObjectMeta"
NAME_DOC = Doc(META, "name")
AGE_DOC = Doc(META, "creationTimestamp")


@dataclass(frozen=True, slots=True)
class Column:
    """One ``TableColumnDefinition``: ``type`` is string | integer | number | boolean | date."""

    name: str
    type: str = "string"
    format: str = ""
    description: str | Doc = ""
    priority: int = 0

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format, "description": str(self.description),
                "priority": self.priority}


RowFunc = Callable[[Mapping[str, Any], float], list[Any]]
ConditionsFunc = Callable[[Mapping[str, Any]], list[dict[str, Any]] | None]
OrderFunc = Callable[[Sequence[Mapping[str, Any]]], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Printer:
    """Columns plus the function that renders one object into one cell per column."""

    columns: tuple[Column, ...]
    row: RowFunc
    conditions: ConditionsFunc | None = None
    order: OrderFunc | None = None

    def definitions(self) -> list[dict[str, Any]]:
        return [c.definition() for c in self.columns]


# ------------------------------------------------------------------------------------------ negotiation


def negotiate_table(accept: str) -> str | None:
    """The ``meta.k8s.io`` version of Table the ``Accept`` header prefers, or ``None`` for plain JSON.

    Clauses are tried by descending ``q`` (ties keep their order): the first JSON Table clause of a
    known version wins; a clause without ``as=`` (plain JSON, ``*/*``, anything else) means "no table";
    clauses asking for other ``as=`` kinds or unknown Table versions are skipped.
    """
    if "Table" not in accept:
        return None
    for media, params in accept_clauses(accept):
        kind = params.get("as")
        if kind is None:
            return None
        if (kind == "Table" and media in ("application/json", "application/*", "*/*")
                and params.get("g") == TABLE_GROUP and params.get("v") in TABLE_VERSIONS):
            return params["v"]
    return None


def table_content_type(version: str) -> str:
    """The ``Content-Type`` of a Table response of ``meta.k8s.io/<version>``."""
    return f"application/json;as=Table;v={version};g={TABLE_GROUP}"


# ------------------------------------------------------------------------------------------ tables


def to_table(printer: Printer, doc: Mapping[str, Any], *, now: float, version: str = "v1",
             include_object: str = "Metadata", headers: bool = True) -> dict[str, Any]:
    """The Table of a served list (``items``) or of one served object.

    The table's ``metadata`` carries the list's resourceVersion / continue / remainingItemCount, or
    the single object's resourceVersion. ``headers=False`` leaves ``columnDefinitions`` empty (watch
    events after the first one).
    """
    if include_object not in INCLUDE_OBJECT_VALUES:
        raise ValueError(f'unrecognized includeObject value: "{include_object}"')
    items = doc.get("items")
    is_list = isinstance(items, list) and str(doc.get("kind", "")).endswith("List")
    meta: dict[str, Any] = {}
    if is_list:
        lmeta = doc.get("metadata") or {}
        for key in ("resourceVersion", "continue", "remainingItemCount"):
            if lmeta.get(key) not in (None, ""):
                meta[key] = lmeta[key]
        objs: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
        if printer.order is not None:
            objs = printer.order(objs)
    else:
        rv = (doc.get("metadata") or {}).get("resourceVersion")
        if rv:
            meta["resourceVersion"] = rv
        objs = (doc,)
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": meta,
        "columnDefinitions": printer.definitions() if headers else [],
        "rows": [table_row(printer, obj, now=now, version=version, include_object=include_object) for obj in objs],
    }


def table_row(printer: Printer, obj: Mapping[str, Any], *, now: float, version: str = "v1",
              include_object: str = "Metadata") -> dict[str, Any]:
    """One ``TableRow``: cells, optional conditions and the object as ``include_object`` asks."""
    row: dict[str, Any] = {"cells": printer.row(obj, now)}
    if printer.conditions is not None:
        conds = printer.conditions(obj)
        if conds:
            row["conditions"] = conds
    if include_object == "Object":
        row["object"] = obj
    elif include_object == "None":
        row["object"] = None
    else:
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": f"{TABLE_GROUP}/{version}",
                         "metadata": obj.get("metadata") or {}}
    return row


# ------------------------------------------------------------------------------------------ column sets


def col(name: str, type_: str = "string", *, priority: int = 0, description: str | Doc = "",
        fmt: str = "") -> Column:
    return Column(name, type_, fmt, description, priority)


NAME = Column("Name", "string", "name", NAME_DOC)
AGE = Column("Age", "string", "", AGE_DOC)
CONTAINERS = col("Containers", priority=1, description="Names of each container in the template.")
IMAGES = col("Images", priority=1, description="Images referenced by each container in the template.")


def selector_column(definition: str) -> Column:
    """The wide Selector column, described by the ``selector`` field of ``definition``."""
    return col("Selector", priority=1, description=Doc(definition, "selector"))

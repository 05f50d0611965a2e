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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..accept import accept_clauses

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT_VALUES = ("Metadata", "Object", "None")

NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
             "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
             "intended for creation idempotence and configuration definition. Cannot be updated.")
AGE_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
            "guaranteed to be set in happens-before order across separate operations. Clients may not set this "
            "value. It is represented in RFC3339 form and is in UTC.")


@dataclass(frozen=True, slots=True)
class Column:
    """One ``TableColumnDefinition``: ``type`` is string | integer | number | boolean | date."""

    name: str
    type: str = "string"
    format: str = ""
    description: str = ""
    priority: int = 0

    def definition(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "format": self.format, "description": self.description,
                "priority": self.priority}


RowFunc = Callable[[Mapping[str, Any], float], list[Any]]
ConditionsFunc = Callable[[Mapping[str, Any]], list[dict[str, Any]] | None]


@dataclass(frozen=True, slots=True)
class Printer:
    """Columns plus the function that renders one object into one cell per column."""

    columns: tuple[Column, ...]
    row: RowFunc
    conditions: ConditionsFunc | None = None

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


def col(name: str, type_: str = "string", *, priority: int = 0, description: str = "", fmt: str = "") -> Column:
    return Column(name, type_, fmt, description, priority)


NAME = Column("Name", "string", "name", NAME_DOC)
AGE = Column("Age", "string", "", AGE_DOC)
CONTAINERS = col("Containers", priority=1, description="Names of each container in the template.")
IMAGES = col("Images", priority=1, description="Images referenced by each container in the template.")
SELECTOR = col("Selector", priority=1, description="A label query over the objects this resource manages.")

"""Helpers of the printer tests: a fixed clock, object metadata and a printer's cells for one object."""

from __future__ import annotations

from typing import Any

from kinformer.server.endpoints.tables import builtin_printer

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
CREATED = "2023-11-14T22:08:20Z"  # NOW - 5 min


def meta(name: str = "x", **extra: Any) -> dict[str, Any]:
    """ObjectMeta of an object created five minutes before NOW."""
    return {"name": name, "namespace": "default", "creationTimestamp": CREATED, "resourceVersion": "7", **extra}


def cells(group: str, plural: str, obj: dict[str, Any]) -> list[Any]:
    """The row of ``obj`` printed by the resource's printer (one cell per column, checked)."""
    printer = builtin_printer(group, plural)
    row = printer.row(obj, NOW)
    assert len(row) == len(printer.columns)
    return row


def named(group: str, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Cells keyed by column name."""
    printer = builtin_printer(group, plural)
    return dict(zip((c.name for c in printer.columns), printer.row(obj, NOW), strict=True))


def headers(group: str, plural: str, *, wide: bool = False) -> list[str]:
    """The column names kubectl shows (upper-cased by kubectl itself), without the wide ones unless asked."""
    return [c.name for c in builtin_printer(group, plural).columns if wide or c.priority == 0]

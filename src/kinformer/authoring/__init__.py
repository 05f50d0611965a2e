"""Authoring operators: CRDs from Python types (:func:`crd`), a Manager's RBAC (:mod:`.rbac`).

Layer 4: may import the controller, client and cache packages; the ``kinformer`` command drives these from
:mod:`kinformer.cli`.
"""

from __future__ import annotations

from kinformer.authoring.crd import PrinterColumn, Scale, Version, crd, default_plural
from kinformer.authoring.markers import (
    Default,
    Doc,
    Format,
    ListType,
    MapType,
    Maximum,
    MaxItems,
    MaxLength,
    Minimum,
    MinItems,
    MinLength,
    Pattern,
    PreserveUnknownFields,
    Rule,
    SchemaMarker,
)
from kinformer.authoring.schema import schema_of

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
    "PrinterColumn",
    "Rule",
    "Scale",
    "SchemaMarker",
    "Version",
    "crd",
    "default_plural",
    "schema_of",
]

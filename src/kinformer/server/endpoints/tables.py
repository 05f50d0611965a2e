"""Server-side printing: ``meta.k8s.io`` ``Table`` responses, as ``kubectl get`` asks for them.

The request handlers negotiate a Table with :func:`negotiate_table`, pick a :class:`Printer` with
:func:`builtin_printer` or :func:`custom_resource_printer` (from a CRD version's
``additionalPrinterColumns``) and convert a served object or list with :func:`to_table`. The
machinery lives in :mod:`kinformer.server.printers.table`, kube's printers of the built-in kinds in
the other modules of :mod:`kinformer.server.printers`; this module is their public face.
"""

from __future__ import annotations

from ..machinery.jsonpath import JSONPathError, compile_jsonpath
from ..printers import builtin_printer, default_printer, scale_printer
from ..printers.custom import crd_printer_columns, custom_resource_printer
from ..printers.table import (
    INCLUDE_OBJECT_VALUES,
    TABLE_GROUP,
    TABLE_VERSIONS,
    Column,
    Printer,
    negotiate_table,
    table_content_type,
    table_row,
    to_table,
)
from .table_cells import age, human_duration

__all__ = [
    "INCLUDE_OBJECT_VALUES",
    "TABLE_GROUP",
    "TABLE_VERSIONS",
    "Column",
    "JSONPathError",
    "Printer",
    "age",
    "builtin_printer",
    "compile_jsonpath",
    "crd_printer_columns",
    "custom_resource_printer",
    "default_printer",
    "human_duration",
    "negotiate_table",
    "scale_printer",
    "table_content_type",
    "table_row",
    "to_table",
]

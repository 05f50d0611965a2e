"""Table watches: a watch stream whose events carry one-row ``meta.k8s.io`` Tables (``kubectl get -w``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from ...clock import Clock
from . import tables


@dataclass(frozen=True, slots=True)
class TableRequest:
    """A negotiated Table answer: ``meta.k8s.io`` version, ``includeObject`` mode and the printer to use."""

    version: str
    include_object: str
    printer: tables.Printer


# The request storage key that turns a watch into a Table watch (typed where aiohttp has RequestKey).
TABLE_WATCH_KEY: Any = (web.RequestKey("kinformer.table_watch", TableRequest) if hasattr(web, "RequestKey")
                        else "kinformer.table_watch")


class TableWatchResponse(web.StreamResponse):
    """A watch stream that rewrites each event's object into a one-row Table as it is written.

    Every write carries whole event lines (the watch writers never split one). Column definitions
    go with the first object event only; later events leave them empty, as kube does to save
    bandwidth (kubectl reuses the last header). BOOKMARK objects become row-less Tables carrying the
    resourceVersion; ERROR events pass unchanged.
    """

    def __init__(self, table: TableRequest, clock: Clock, *, headers: Mapping[str, str]) -> None:
        super().__init__(status=200, headers=headers)
        self._table = table
        self._clock = clock
        self._headers_sent = False

    async def write(self, data: bytes | bytearray | memoryview) -> None:
        converted = self._convert(bytes(data))
        if converted:
            await super().write(converted)

    def _convert(self, data: bytes) -> bytes:
        table = self._table
        out: list[bytes] = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            ev = orjson.loads(line)
            typ, obj = ev.get("type"), ev.get("object")
            if typ in ("ADDED", "MODIFIED", "DELETED") and isinstance(obj, dict):
                ev["object"] = tables.to_table(table.printer, obj, now=self._clock.wall(), version=table.version,
                                               include_object=table.include_object, headers=not self._headers_sent)
                self._headers_sent = True
            elif typ == "BOOKMARK" and isinstance(obj, dict):
                rv = (obj.get("metadata") or {}).get("resourceVersion", "")
                ev["object"] = {"kind": "Table", "apiVersion": f"{tables.TABLE_GROUP}/{table.version}",
                                "metadata": {"resourceVersion": rv}, "columnDefinitions": [], "rows": []}
            out.append(orjson.dumps(ev))
        return b"\n".join(out) + b"\n" if out else b""

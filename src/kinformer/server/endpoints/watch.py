"""Watch streaming: cache-backed watches (initial events, ring replay, live events, bookmarks) and watches
from storage history for a resourceVersion older than the cache window."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
from aiohttp import web

from ...aio import first_completed
from ...selectors import FieldSelector, parse_field_selector
from ..machinery import status as st
from ..registry.objects import parse_rv
from ..registry.resources import ResourceInfo
from ..schema.conversion import CONVERT_WATCH_KEY, ConvertingWatchResponse
from ..storage.base import Compacted, WatcherTooSlow
from ..storage.watchcache import CachedEvent, Watcher, decode
from .partial_metadata import PARTIAL_WATCH_KEY, PartialMetadataWatchResponse, PartialRequest
from .query import Filter, make_filter, parse_int64, truthy
from .reads import ReadHandlers
from .responses import at_revision, reencode
from .routing import Target
from .table_watch import TABLE_WATCH_KEY, TableRequest, TableWatchResponse

log = logging.getLogger(__name__)

DEFAULT_WATCH_TIMEOUT = 1800.0
#: Events are written to a watch in batches of at most this many bytes of objects (or one event), so what a
#: stalled client's connection holds is bounded too (the watcher's own buffer is bounded by the watch cache).
WRITE_BATCH_BYTES = 1024 * 1024
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class WatchHandlers(ReadHandlers):
    """watch of the resource API."""

    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        info = t.info
        flt = make_filter(info, q)
        if t.name:
            name_flt = parse_field_selector(f"metadata.name={t.name}")
            flt = Filter(flt.labels, name_flt if flt.fields is None else
                         FieldSelector(flt.fields.requirements + name_flt.requirements), flt.shard)
        rv_text = q.get("resourceVersion", "")
        bookmarks = truthy(q.get("allowWatchBookmarks"))
        initial = q.get("sendInitialEvents")
        send_initial = truthy(initial) if initial is not None else None
        timeout_text = q.get("timeoutSeconds", "")
        timeout = DEFAULT_WATCH_TIMEOUT
        if timeout_text:
            seconds = parse_int64(timeout_text, "timeoutSeconds")
            if seconds < 0:
                raise st.bad_request(f'invalid timeoutSeconds: "{timeout_text}": must be a non-negative integer')
            timeout = float(seconds) or DEFAULT_WATCH_TIMEOUT
        if send_initial and not bookmarks:
            raise st.invalid(info, "", [{"reason": "FieldValueForbidden", "field": "allowWatchBookmarks",
                                         "message": "Forbidden: allowWatchBookmarks required when "
                                                    "sendInitialEvents is true"}])
        prefix = info.storage_prefix
        ns = t.namespace
        start_lines: list[bytes] = []
        if send_initial or (send_initial is None and rv_text in ("", "0")):
            if rv_text == "":
                await self._sync()
            elif rv_text != "0":
                await self._wait_rv(parse_rv(rv_text))
            w, objs, rev = self.cache.subscribe_snapshot(prefix, ns, not flt.empty)
            av = info.api_version
            for co in objs:
                if flt.empty or flt(co.obj):
                    start_lines.append(b'{"type":"ADDED","object":' + reencode(co, av) + b"}\n")
            if send_initial:
                start_lines.append(self._bookmark(info, rev, initial_end=True))
            return await self._stream(request, t, w, start_lines, [], flt, bookmarks, timeout)
        rv = parse_rv(rv_text) if rv_text not in ("", "0") else self.cache.revision
        if rv > self.cache.revision:
            await self._wait_rv(rv)
        sub = self.cache.subscribe(prefix, rv, ns, not flt.empty)
        if sub is None:
            return await self._stream_storage(request, t, rv, flt, bookmarks, timeout)
        w, replay = sub
        return await self._stream(request, t, w, start_lines, replay, flt, bookmarks, timeout)

    @staticmethod
    def _bookmark(info: ResourceInfo, rev: int, *, initial_end: bool = False) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rev)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = {"kind": info.kind, "apiVersion": info.api_version, "metadata": meta}
        return b'{"type":"BOOKMARK","object":' + orjson.dumps(obj) + b"}\n"

    @staticmethod
    def _render(ev: CachedEvent, flt: Filter, av: str) -> bytes | None:
        if flt.empty:
            if ev.cur.api_version == av:
                return ev.line
            return b'{"type":"' + ev.type.encode() + b'","object":' + reencode(ev.cur, av) + b"}\n"
        cur_ok = flt(ev.cur.obj)
        if ev.type == "ADDED":
            typ = "ADDED" if cur_ok else None
        elif ev.type == "DELETED":
            typ = "DELETED" if cur_ok else None
        else:
            prev_ok = ev.prev is not None and flt(ev.prev.obj)
            typ = ("MODIFIED" if prev_ok else "ADDED") if cur_ok else ("DELETED" if prev_ok else None)
        if typ is None:
            return None
        if typ == ev.type and ev.cur.api_version == av:
            return ev.line
        if typ == "DELETED" and ev.type == "MODIFIED":
            # Leaving the selector: kube sends the last version the watcher saw match, at this event's RV.
            assert ev.prev is not None
            return b'{"type":"DELETED","object":' + at_revision(ev.prev.obj, ev.rev, av) + b"}\n"
        return b'{"type":"' + typ.encode() + b'","object":' + reencode(ev.cur, av) + b"}\n"

    async def _open_stream(self, request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": "application/json", "Cache-Control": "no-cache, private"}
        table: TableRequest | None = request.get(TABLE_WATCH_KEY)
        partial: PartialRequest | None = request.get(PARTIAL_WATCH_KEY)
        converting = request.get(CONVERT_WATCH_KEY)
        if table is not None:
            resp: web.StreamResponse = TableWatchResponse(table, self.clock, headers=headers)
        elif partial is not None:
            resp = PartialMetadataWatchResponse(partial, headers=headers)
        elif converting is not None:
            resp = ConvertingWatchResponse(*converting, headers=headers)
        else:
            resp = web.StreamResponse(status=200, headers=headers)
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        return resp

    def _timers(self, request: web.Request, w: Watcher, timeout: float, bookmarks: bool,
                state: dict[str, bool]) -> list[asyncio.Task[None]]:
        """Tasks that flag the watch's end (deadline, server shutdown, client gone) and bookmark ticks on ``state``.

        Each one wakes the writer; the client-gone check runs once a second so an idle watch whose client
        disconnected does not linger until its timeout.
        """
        clock = self.clock

        async def deadline() -> None:
            if bookmarks and timeout > 4:
                await clock.sleep(timeout - 2)
                state["bookmark"] = True
                w.wake.set()
                await clock.sleep(2)
            else:
                await clock.sleep(timeout)
            state["done"] = True
            w.wake.set()

        async def ticker() -> None:
            while True:
                await clock.sleep(self.bookmark_interval)
                state["bookmark"] = True
                w.wake.set()

        async def closing() -> None:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.closing.wait(), 1.0)
                transport = request.transport
                if self.closing.is_set() or transport is None or transport.is_closing():
                    break
            state["done"] = True
            w.wake.set()

        tasks = [asyncio.create_task(deadline()), asyncio.create_task(closing())]
        if bookmarks:
            tasks.append(asyncio.create_task(ticker()))
        return tasks

    async def _stream(self, request: web.Request, t: Target, w: Watcher, start_lines: list[bytes],
                      replay: list[CachedEvent], flt: Filter, bookmarks: bool, timeout: float) -> web.StreamResponse:
        """Write a cache-backed watch: initial lines, ring replay, then live events until timeout or close."""
        info = t.info
        av = info.api_version
        state = {"done": False, "bookmark": False}
        tasks: list[asyncio.Task[None]] = []
        resp: web.StreamResponse | None = None
        try:
            resp = await self._open_stream(request)
            for i in range(0, len(start_lines), 512):
                await resp.write(b"".join(start_lines[i:i + 512]))
            lines = [line for line in (self._render(ev, flt, av) for ev in replay) if line is not None]
            if lines:
                await resp.write(b"".join(lines))
            tasks = self._timers(request, w, timeout, bookmarks, state)
            render = self._render
            while True:
                w.wake.clear()
                if state["done"]:  # nothing more is queued; what is (a bounded buffer) is still written
                    self.cache.unsubscribe(info.storage_prefix, w)
                lines = [line for line in (render(ev, flt, av) for ev in w.take(WRITE_BATCH_BYTES))
                         if line is not None]
                if state["bookmark"] and not w.closed and not w.buf:  # a bookmark follows every event before it
                    state["bookmark"] = False
                    if bookmarks:
                        lines.append(self._bookmark(info, self.cache.revision))
                if lines:
                    await resp.write(b"".join(lines))
                if w.closed and not w.buf:
                    break
                if not w.buf:
                    await w.wake.wait()
        except ConnectionResetError:
            pass
        finally:
            self.cache.unsubscribe(info.storage_prefix, w)
            for task in tasks:
                task.cancel()
        if resp is not None:
            with contextlib.suppress(ConnectionResetError, RuntimeError):
                await resp.write_eof()
        return resp if resp is not None else web.Response(status=200)

    async def _stream_storage(self, request: web.Request, t: Target, rv: int, flt: Filter, bookmarks: bool,
                              timeout: float) -> web.StreamResponse:
        """A watch from an RV older than the cache window, served from storage history (or 410 ERROR)."""
        info = t.info
        av = info.api_version
        prefix = info.storage_prefix + (f"{t.namespace}/" if t.namespace else "")
        resp = await self._open_stream(request)
        w = Watcher("", 1)  # only used as a wake-up target by the timers
        state = {"done": False, "bookmark": False}
        tasks = self._timers(request, w, timeout, bookmarks, state)
        # (revision, line) per storage event; an empty line only advances the revision (filtered out).
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(maxsize=10_000)

        async def pump() -> None:
            last = rv
            try:
                async for ev in self.storage.watch(prefix, rv + 1):
                    cur = decode(ev.kv.key, ev.kv.value, ev.kv.mod_revision)
                    prev = decode(ev.prev_kv.key, ev.prev_kv.value, ev.prev_kv.mod_revision) if ev.prev_kv else None
                    typ = "DELETED" if ev.type == "DELETE" else ("MODIFIED" if prev is not None else "ADDED")
                    last = ev.revision
                    await queue.put((last, self._render(CachedEvent(typ, cur, prev), flt, av) or b""))
            except Compacted as e:
                oldest = max(e.compacted, await self.storage.compacted_revision())
                await queue.put((last, self._error_line(rv, oldest)))
            except WatcherTooSlow:
                log.info("storage-history watch of %s fell behind at %d", prefix, last)
            await queue.put(None)

        pump_task = asyncio.create_task(pump())
        last_rv = rv
        try:
            while not state["done"]:
                w.wake.clear()
                if state["bookmark"]:
                    state["bookmark"] = False
                    if bookmarks:
                        await resp.write(self._bookmark(info, last_rv))
                index, ended = await first_completed(queue.get(), w.wake.wait())
                if index != 0:
                    continue
                item = ended.result()
                if item is None:
                    break
                last_rv, line = item
                if line:
                    await resp.write(line)
        except ConnectionResetError:
            pass
        finally:
            pump_task.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(pump_task, *tasks, return_exceptions=True)
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await resp.write_eof()
        return resp

    @staticmethod
    def _error_line(rv: int, oldest: int) -> bytes:
        err = st.expired(f"too old resource version: {rv} ({oldest})").status()
        return b'{"type":"ERROR","object":' + orjson.dumps(err) + b"}\n"

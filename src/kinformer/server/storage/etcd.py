"""etcd v3 storage, spoken over etcd's JSON gateway (``/v3/...``) with aiohttp.

Why the JSON gateway rather than a Python etcd client: the widely used client, ``etcd3``
(python-etcd3), last released in 2020, is synchronous, and pulls in ``grpcio`` plus an old protobuf
runtime; its forks and the asyncio variants (``aetcd``, ``etcd3-async-client``, ...) are small,
single-maintainer projects that also need ``grpcio``. etcd 3.4 serves every RPC we need as JSON over
HTTP/1.1 (``kv/range``, ``kv/put``, ``kv/deleterange``, ``kv/txn``, ``kv/compaction``,
``maintenance/status``, and ``watch`` as a stream of newline-delimited JSON messages), and aiohttp is
already a dependency, so speaking the gateway costs no new dependency and stays asyncio-native.

Layout and semantics (kube-apiserver's): one etcd key per object (``prefix + key``); the object's
revision is the key's ``mod_revision``, so this backend's revisions are etcd's revisions (an empty etcd
is at revision 1, so the first write is revision 2). Writes are single transactions:

* create: ``create_revision == 0`` then put, else :class:`KeyExists`;
* update/delete: ``mod_revision == expected`` (or, unconditionally, ``create_revision > 0``) then
  put/delete with ``prev_kv``, else a range of the key decides :class:`KeyNotFound` or
  :class:`RevisionMismatch` (carrying the current value).

Reads are linearizable ranges at a revision. Watches open etcd watches with ``prev_kv`` and
``progress_notify``; a stream that ends or breaks is reopened, on the next endpoint when the current one
fails, from the next revision not yet delivered, so the caller sees no gap and no duplicate. Since the
watch stream is read only as fast as the caller consumes it (TCP back-pressure; etcd itself parks a slow
watcher and catches it up later), this backend never raises :class:`WatcherTooSlow`. A watch whose next
revision has been compacted raises :class:`Compacted` (before yielding anything if it is the start).

Compaction is ``kv/compaction`` (non-physical). The compaction point is what this client last compacted
to, raised by whatever etcd tells us: a compacted read makes us ask etcd for the exact point (a watch
from revision 1 is cancelled with ``compact_revision``). Several endpoints may be given: on connection
failures requests fail over to the next one. A write whose outcome is unknown (the connection broke
after it was sent, or etcd timed out) raises :class:`StorageError` and is never retried, because it may
have been applied.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import aiohttp
import orjson

from .base import (
    Compacted,
    Event,
    FutureRevision,
    KeyExists,
    KeyNotFound,
    KeyValue,
    ListResult,
    RevisionMismatch,
    Storage,
    StorageError,
)

__all__ = ["EtcdError", "EtcdStorage"]

log = logging.getLogger(__name__)

_COMPACTED_MSG = "required revision has been compacted"
_FUTURE_MSG = "required revision is a future revision"
_NO_LEADER_MSG = "no leader"
_PROBE_KEY = base64.b64encode(b"\x00").decode()  # a key nobody writes: cheap header-only ranges and probes
_ALL = _PROBE_KEY  # range_end "\0" means "every key from `key` on"


class EtcdError(StorageError):
    """etcd answered with an error (its gRPC ``code`` and message)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd error {code}: {message}")
        self.code = code
        self.message = message


class _Unavailable(Exception):
    """An endpoint could not serve the request; another endpoint may (internal).

    ``retry_safe``: the request certainly was not applied (so even a write may be sent elsewhere).
    """

    def __init__(self, message: str, retry_safe: bool) -> None:
        super().__init__(message)
        self.retry_safe = retry_safe


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _prefix_end(key: bytes) -> bytes | None:
    """The smallest byte string greater than every key starting with ``key`` (None: no upper bound)."""
    while key:
        last = key[-1]
        if last < 0xFF:
            return key[:-1] + bytes((last + 1,))
        key = key[:-1]
    return None


def _normalize_endpoint(endpoint: str) -> str:
    endpoint = endpoint.strip().rstrip("/")
    if not endpoint:
        raise ValueError("empty etcd endpoint")
    if "://" not in endpoint:
        endpoint = "http://" + endpoint
    if not endpoint.startswith("http://"):
        raise ValueError(f"unsupported etcd endpoint {endpoint!r}: only http:// is supported")
    return endpoint


class EtcdStorage(Storage):
    """MVCC storage in an etcd v3 cluster (see the module docstring for the semantics).

    ``endpoints``: ``host:port`` or ``http://host:port`` client URLs of the cluster's members; requests go
    to one of them and fail over to the next on connection failures. ``prefix`` is prepended to every
    key in etcd (and stripped from keys returned), so several stores can share a cluster; it does not
    isolate revisions, which are cluster-wide. ``request_timeout`` bounds each unary request;
    ``reconnect_timeout`` bounds how long a watch keeps trying to reopen before raising
    :class:`StorageError`.
    """

    def __init__(
        self,
        endpoints: list[str],
        prefix: str = "",
        *,
        request_timeout: float = 10.0,
        reconnect_timeout: float = 30.0,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self.endpoints = [_normalize_endpoint(e) for e in endpoints]
        self.prefix = prefix
        self._pfx = prefix.encode()
        self._request_timeout = request_timeout
        self._reconnect_timeout = reconnect_timeout
        self._ep = 0  # index of the endpoint requests go to first
        self._session: aiohttp.ClientSession | None = None
        self._closed = False
        self._compacted = 0
        self._observed = 0  # highest revision seen in any response header
        self._watches: set[aiohttp.ClientResponse] = set()

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the HTTP session and check that some endpoint answers (StorageError if none does)."""
        self._closed = False
        self._ensure_session()
        await self._call("/v3/maintenance/status", {}, idempotent=True)

    async def close(self) -> None:
        """End every watch (they return normally) and release connections; writes then fail."""
        self._closed = True
        for resp in list(self._watches):
            resp.close()
        self._watches.clear()
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def __aenter__(self) -> EtcdStorage:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._closed:
            raise StorageError("storage is closed")
        session = self._session
        if session is None:
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            session = self._session = aiohttp.ClientSession(connector=connector)
        return session

    # -- transport -----------------------------------------------------------------------------------

    async def _call(self, path: str, body: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        """POST ``body`` to ``path`` on the current endpoint, failing over to the others.

        Every request is retried on another endpoint when the connection could not be made. Idempotent
        requests are also retried when the connection broke or etcd is unavailable; writes then raise
        :class:`StorageError` instead, since they may have been applied.
        """
        session = self._ensure_session()
        payload = orjson.dumps(body)
        deadline = time.monotonic() + self._request_timeout
        attempt = 0
        n = len(self.endpoints)
        while True:
            ep = self._ep
            try:
                return await self._post(session, self.endpoints[ep], path, payload, deadline)
            except _Unavailable as exc:
                safe = idempotent or exc.retry_safe
                if self._ep == ep:
                    self._ep = (ep + 1) % n
                if self._closed:
                    raise StorageError("storage is closed") from exc
                if not safe:
                    raise StorageError(f"etcd write outcome unknown: {exc}") from exc
                attempt += 1
                if time.monotonic() >= deadline:
                    raise StorageError(f"no etcd endpoint answered {path}: {exc}") from exc
                if attempt % n == 0:  # every endpoint failed once: back off a little
                    await asyncio.sleep(min(0.05 * (2 ** (attempt // n)), 1.0))

    async def _post(
        self, session: aiohttp.ClientSession, endpoint: str, path: str, payload: bytes, deadline: float
    ) -> dict[str, Any]:
        timeout = aiohttp.ClientTimeout(total=max(deadline - time.monotonic(), 0.05))
        try:
            async with session.post(
                endpoint + path, data=payload, headers={"Content-Type": "application/json"}, timeout=timeout
            ) as resp:
                raw = await resp.read()
                status = resp.status
        except aiohttp.ClientConnectorError as exc:  # never sent
            raise _Unavailable(f"{endpoint}: {exc!r}", True) from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _Unavailable(f"{endpoint}: {exc!r}", False) from exc
        except RuntimeError:  # the session was closed under us
            if self._closed:
                raise StorageError("storage is closed") from None
            raise
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise _Unavailable(f"{endpoint}: HTTP {status}: {raw[:200]!r}", False) from None
        if status == 200 and "error" not in data:
            header = data.get("header")
            if header is not None:
                rev = int(header.get("revision", 0))
                if rev > self._observed:
                    self._observed = rev
            return data
        message = str(data.get("message") or data.get("error") or raw[:200])
        code = int(data.get("code", 0))
        if _NO_LEADER_MSG in message or status == 429 or code == 8:
            raise _Unavailable(f"{endpoint}: {message}", True)  # rejected before proposal: safe to retry
        if status >= 500 or code in (4, 14):  # DeadlineExceeded, Unavailable: possibly applied
            raise _Unavailable(f"{endpoint}: {message}", False)
        raise EtcdError(code, message)

    # -- keys ----------------------------------------------------------------------------------------

    def _key(self, key: str) -> str:
        return _b64(self._pfx + key.encode())

    def _span(self, prefix: str, start_after: str = "") -> tuple[bytes, bytes]:
        """The etcd ``[key, range_end)`` of keys under ``prefix`` strictly after ``start_after``."""
        full = self._pfx + prefix.encode()
        start = full or b"\x00"
        end = _prefix_end(full) or b"\x00"
        if start_after and start_after >= prefix:
            start = max(start, self._pfx + start_after.encode() + b"\x00")
        return start, end

    def _kv(self, d: dict[str, Any], _a2b: Any = binascii.a2b_base64) -> KeyValue:
        value = d.get("value")
        return KeyValue(
            _a2b(d["key"])[len(self._pfx) :].decode(),
            _a2b(value) if value is not None else b"",
            int(d["mod_revision"]),
            int(d["create_revision"]),
        )

    # -- reads ---------------------------------------------------------------------------------------

    async def current_revision(self) -> int:
        data = await self._call("/v3/kv/range", {"key": _PROBE_KEY, "count_only": True}, idempotent=True)
        return int(data["header"]["revision"])

    async def compacted_revision(self) -> int:
        """The compaction point: our own record, checked against etcd (another client may have compacted)."""
        try:
            await self._range({"key": _PROBE_KEY, "count_only": True}, max(self._compacted, 1))
        except FutureRevision:
            pass  # nothing written yet
        except Compacted:
            pass  # _range has learnt the point
        return self._compacted

    async def _range(self, body: dict[str, Any], revision: int) -> dict[str, Any]:
        """A linearizable range at ``revision`` (0 = latest) with etcd errors mapped to ours."""
        if revision < 0:
            raise ValueError(f"revision must not be negative: {revision}")
        if revision:
            if revision < self._compacted:
                raise Compacted(revision, self._compacted)
            body["revision"] = revision
        try:
            return await self._call("/v3/kv/range", body, idempotent=True)
        except EtcdError as exc:
            if _COMPACTED_MSG in exc.message:
                raise Compacted(revision, await self._learn_compaction(revision + 1)) from None
            if _FUTURE_MSG in exc.message:
                raise FutureRevision(revision, await self.current_revision()) from None
            raise

    async def get(self, key: str, revision: int = 0) -> KeyValue | None:
        data = await self._range({"key": self._key(key)}, revision)
        kvs = data.get("kvs")
        return self._kv(kvs[0]) if kvs else None

    async def list(self, prefix: str, revision: int = 0, start_after: str = "", limit: int = 0) -> ListResult:
        start, end = self._span(prefix, start_after)
        body: dict[str, Any] = {"key": _b64(start), "range_end": _b64(end)}
        if limit:
            body["limit"] = limit
        data = await self._range(body, revision)
        kv = self._kv
        kvs = [kv(d) for d in data.get("kvs", ())]
        return ListResult(kvs, revision or int(data["header"]["revision"]), bool(data.get("more")))

    async def count(self, prefix: str, revision: int = 0, start_after: str = "") -> int:
        start, end = self._span(prefix, start_after)
        data = await self._range({"key": _b64(start), "range_end": _b64(end), "count_only": True}, revision)
        return int(data.get("count", 0))

    # -- writes --------------------------------------------------------------------------------------

    async def _txn(self, body: dict[str, Any]) -> dict[str, Any]:
        if self._closed:
            raise StorageError("storage is closed")
        return await self._call("/v3/kv/txn", body, idempotent=False)

    async def create(self, key: str, value: bytes) -> KeyValue:
        k = self._key(key)
        data = await self._txn(
            {
                "compare": [{"target": "CREATE", "key": k, "create_revision": 0, "result": "EQUAL"}],
                "success": [{"request_put": {"key": k, "value": _b64(value)}}],
            }
        )
        if not data.get("succeeded"):
            raise KeyExists(key)
        rev = int(data["header"]["revision"])
        return KeyValue(key, value, rev, rev)

    @staticmethod
    def _guard(k: str, expected_revision: int) -> dict[str, Any]:
        if expected_revision:
            return {"target": "MOD", "key": k, "mod_revision": expected_revision, "result": "EQUAL"}
        return {"target": "CREATE", "key": k, "create_revision": 0, "result": "GREATER"}  # key exists

    def _conflict(self, key: str, data: dict[str, Any]) -> StorageError:
        kvs = data["responses"][0]["response_range"].get("kvs")
        return RevisionMismatch(self._kv(kvs[0])) if kvs else KeyNotFound(key)

    async def update(self, key: str, value: bytes, expected_revision: int) -> KeyValue:
        k = self._key(key)
        data = await self._txn(
            {
                "compare": [self._guard(k, expected_revision)],
                "success": [{"request_put": {"key": k, "value": _b64(value), "prev_kv": True}}],
                "failure": [{"request_range": {"key": k}}],
            }
        )
        if not data.get("succeeded"):
            raise self._conflict(key, data)
        prev = data["responses"][0]["response_put"]["prev_kv"]
        return KeyValue(key, value, int(data["header"]["revision"]), int(prev["create_revision"]))

    async def delete(self, key: str, expected_revision: int = 0) -> KeyValue:
        k = self._key(key)
        data = await self._txn(
            {
                "compare": [self._guard(k, expected_revision)],
                "success": [{"request_delete_range": {"key": k, "prev_kv": True}}],
                "failure": [{"request_range": {"key": k}}],
            }
        )
        if not data.get("succeeded"):
            raise self._conflict(key, data)
        prev = self._kv(data["responses"][0]["response_delete_range"]["prev_kvs"][0])
        return KeyValue(key, prev.value, int(data["header"]["revision"]), prev.create_revision)

    # -- compaction ----------------------------------------------------------------------------------

    async def compact(self, revision: int) -> None:
        """Compact to ``revision``; at or below the known compaction point it is a no-op."""
        if revision <= self._compacted:
            return
        try:
            await self._call("/v3/kv/compaction", {"revision": revision, "physical": False}, idempotent=True)
        except EtcdError as exc:
            if _FUTURE_MSG in exc.message:
                raise FutureRevision(revision, await self.current_revision()) from None
            if _COMPACTED_MSG not in exc.message:
                raise
            await self._learn_compaction(revision)  # someone compacted further already
            return
        self._compacted = max(self._compacted, revision)

    async def _learn_compaction(self, at_least: int) -> int:
        """Ask etcd for its compaction point, known to be ``>= at_least`` (>= 2); record and return it.

        A watch from revision 1 is cancelled with the compaction point; if that somehow does not
        arrive in time, ``at_least`` is recorded.
        """
        point = at_least
        if at_least < 2:  # a watch from 1 is only cancelled for a point above 1
            self._compacted = max(self._compacted, point)
            return self._compacted
        with contextlib.suppress(StorageError, TimeoutError):
            async with asyncio.timeout(self._request_timeout):
                async with contextlib.aclosing(self._watch_stream(_PROBE_KEY, None, 1)) as stream:
                    async for msg in stream:
                        compact = msg.get("compact_revision")
                        if compact:
                            point = max(point, int(compact))
                            break
                        if msg.get("canceled"):
                            break
        self._compacted = max(self._compacted, point)
        return self._compacted

    # -- watch ---------------------------------------------------------------------------------------

    async def _watch_stream(self, key: str, end: str | None, start: int) -> AsyncGenerator[dict[str, Any], None]:
        """One etcd watch stream's ``result`` messages, opened on the first endpoint that accepts it.

        Ends when the stream ends or breaks (the caller reopens it); raises :class:`StorageError` if no
        endpoint accepts it within ``reconnect_timeout``.
        """
        create: dict[str, Any] = {"key": key, "start_revision": start, "prev_kv": True, "progress_notify": True}
        if end is not None:
            create["range_end"] = end
        payload = orjson.dumps({"create_request": create})
        resp = await self._open_watch(payload)
        self._watches.add(resp)
        try:
            buf = b""
            content = resp.content
            while True:
                chunk = await content.readany()
                if not chunk:
                    return
                buf += chunk
                if b"\n" not in chunk:
                    continue
                lines = buf.split(b"\n")
                buf = lines.pop()
                for line in lines:
                    if not line.strip():
                        continue
                    msg = orjson.loads(line)
                    result = msg.get("result")
                    if result is None:  # {"error": ...}: the stream is over
                        log.warning("etcd watch stream error: %s", msg.get("error"))
                        return
                    yield result
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.debug("etcd watch stream broke: %r", exc)
        finally:
            self._watches.discard(resp)
            resp.close()

    async def _open_watch(self, payload: bytes) -> aiohttp.ClientResponse:
        deadline = time.monotonic() + self._reconnect_timeout
        n = len(self.endpoints)
        attempt = 0
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self._request_timeout)
        while True:
            session = self._ensure_session()
            ep = self._ep
            try:
                resp = await session.post(
                    self.endpoints[ep] + "/v3/watch",
                    data=payload,
                    headers={"Content-Type": "application/json"},
                    timeout=timeout,
                )
                if resp.status == 200:
                    return resp
                resp.close()
                problem = f"HTTP {resp.status}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                problem = repr(exc)
            except RuntimeError:  # the session was closed under us
                if self._closed:
                    raise StorageError("storage is closed") from None
                raise
            if self._ep == ep:
                self._ep = (ep + 1) % n
            attempt += 1
            if time.monotonic() >= deadline:
                raise StorageError(f"no etcd endpoint accepted a watch: {problem}")
            if attempt % n == 0:
                await asyncio.sleep(min(0.05 * (2 ** (attempt // n)), 1.0))

    def _event(self, d: dict[str, Any]) -> Event:
        prev_d = d.get("prev_kv")
        prev = self._kv(prev_d) if prev_d is not None else None
        kv_d = d["kv"]
        if d.get("type") == "DELETE":
            key = binascii.a2b_base64(kv_d["key"])[len(self._pfx) :].decode()
            rev = int(kv_d["mod_revision"])
            if prev is None:  # prev_kv is unavailable when its revision was compacted
                return Event("DELETE", KeyValue(key, b"", rev, 0), None)
            return Event("DELETE", KeyValue(key, prev.value, rev, prev.create_revision), prev)
        return Event("PUT", self._kv(kv_d), prev)

    async def watch(self, prefix: str, start_revision: int) -> AsyncIterator[Event]:
        """Events under ``prefix`` from ``start_revision`` on (``<= 0``: after what this client has seen).

        "Seen" covers every response this client got (start() sees the current revision), so a watch
        from 0 includes every write this client makes after it starts iterating; if that point was
        compacted meanwhile, it continues after the compaction point instead of raising.

        A start revision in the future is allowed (the watch waits). The etcd watch is opened one
        revision early, so that etcd itself reports a compacted start; events before the next revision
        due are dropped, which also makes every reopen gap- and duplicate-free.
        """
        if self._closed:
            raise StorageError("storage is closed")
        if 0 < start_revision <= self._compacted:
            raise Compacted(start_revision, self._compacted)
        live_only = start_revision <= 0
        if live_only:  # after every revision this client has seen (start() has seen the current one)
            nxt = max(self._observed or await self.current_revision(), self._compacted) + 1
        else:
            nxt = start_revision
        start, end = self._span(prefix)
        key, range_end = _b64(start), _b64(end)
        event = self._event
        failures = 0
        failing_since = 0.0
        first = True  # the first stream of a watch: its start is still ours to choose
        while not self._closed:
            delivered = False
            try:
                async with contextlib.aclosing(self._watch_stream(key, range_end, max(nxt - 1, 1))) as stream:
                    async for result in stream:
                        delivered = True
                        events = result.get("events")
                        if events:
                            first = False
                            for d in events:
                                ev = event(d)
                                if ev.kv.mod_revision >= nxt:
                                    nxt = ev.kv.mod_revision + 1
                                    yield ev
                            continue
                        if result.get("canceled"):
                            compact = int(result.get("compact_revision", 0))
                            if compact:
                                self._compacted = max(self._compacted, compact)
                                if live_only and first:  # the start was ours to choose: go on after the point
                                    nxt = max(nxt, compact + 1)
                                    break
                                raise Compacted(nxt, compact)
                            log.debug("etcd cancelled a watch: %s", result.get("cancel_reason"))
                            break
                        if not result.get("created"):  # progress notification: nothing due up to its revision
                            rev = int(result["header"].get("revision", 0))
                            if rev >= nxt:
                                nxt = rev + 1
            except StorageError:
                if self._closed:
                    return
                raise
            if self._closed:
                return
            first = first and not delivered
            if delivered:
                failures = 0
                continue
            # the stream ended without a message: try the next endpoint, after a pause
            failures += 1
            if failures == 1:
                failing_since = time.monotonic()
            elif time.monotonic() - failing_since > self._reconnect_timeout:
                raise StorageError(f"etcd watch streams keep ending without a message ({failures} attempts)")
            self._ep = (self._ep + 1) % len(self.endpoints)
            await asyncio.sleep(min(0.05 * 2**failures, 1.0))

"""A fault-injecting TCP proxy on loopback, for tests and the demo.

Put it between a client and an API server to prove that the client recovers: it can drop every
connection mid-stream, stall or delay traffic, refuse new connections, and answer the next
requests with an HTTP error (429/500/410/...) carrying a Kubernetes ``Status`` body.

Invariant: bytes are forwarded unchanged and in order on each connection unless a fault is armed;
a dropped connection is closed on both sides at once (the client sees a broken stream, not a
clean end).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from dataclasses import dataclass

log = logging.getLogger(__name__)

_REASONS = {400: "BadRequest", 404: "NotFound", 409: "Conflict", 410: "Expired", 429: "TooManyRequests",
            500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
_PHRASES = {400: "Bad Request", 404: "Not Found", 409: "Conflict", 410: "Gone", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable", 504: "Gateway Timeout"}


@dataclass
class _Injection:
    status: int
    retry_after: float | None
    remaining: int


class FaultProxy:
    """``async with FaultProxy(host, port) as proxy: proxy.url`` forwards to ``host:port``."""

    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.host, self.port = host, port
        self.delay = 0.0
        self.refuse = False
        self.faults: Counter[str] = Counter()
        self._stalled = asyncio.Event()
        self._stalled.set()  # set = flowing
        self._conns: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._injection: _Injection | None = None
        self._server: asyncio.base_events.Server | None = None

    @classmethod
    def for_url(cls, url: str, **kw: object) -> FaultProxy:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 80, **kw)  # type: ignore[arg-type]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.drop_connections(count=False)
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> FaultProxy:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- faults -----------------------------------------------------------------------------------

    @property
    def connections(self) -> int:
        return len(self._conns)

    def drop_connections(self, *, count: bool = True) -> int:
        """Abort every open connection (both sides). Returns how many were dropped."""
        dropped = len(self._conns)
        for client_w, upstream_w in list(self._conns):
            for w in (client_w, upstream_w):
                with contextlib.suppress(Exception):
                    w.transport.abort()
        self._conns.clear()
        if count and dropped:
            self.faults["drop"] += 1
        return dropped

    def stall(self) -> None:
        """Stop forwarding bytes (connections stay open) until :meth:`resume`."""
        self.faults["stall"] += 1
        self._stalled.clear()

    def resume(self) -> None:
        self._stalled.set()

    def inject(self, status: int, *, times: int = 1, retry_after: float | None = None) -> None:
        """Answer the next ``times`` new connections' first request with ``status`` and a Status body.

        Open keep-alive connections are dropped so that the next requests arrive on new ones.
        """
        self._injection = _Injection(status, retry_after, times)
        self.drop_connections(count=False)

    def retarget(self, host: str, port: int) -> None:
        """Forward new connections to ``host:port`` (e.g. a restarted server); open ones are dropped."""
        self.target = (host, port)
        self.drop_connections(count=False)

    def heal(self) -> None:
        """Disarm every fault: resume forwarding, no delay, accept connections, cancel a pending injection."""
        self._injection = None
        self.delay = 0.0
        self.refuse = False
        self._stalled.set()

    # -- forwarding -------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refuse:
            self.faults["refuse"] += 1
            writer.transport.abort()
            return
        if self._injection is not None and self._injection.remaining > 0:
            await self._answer_injected(reader, writer, self._injection)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, up_writer)
        self._conns.add(pair)
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._conns.discard(pair)
            for w in pair:
                with contextlib.suppress(Exception):
                    w.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self._stalled.wait()
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except (ConnectionError, OSError, RuntimeError):
            pass

    async def _answer_injected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                               inj: _Injection) -> None:
        inj.remaining -= 1
        if inj.remaining <= 0:
            self._injection = None
        self.faults[f"http_{inj.status}"] += 1
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        reason = _REASONS.get(inj.status, "InternalError")
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": f"injected fault: {inj.status}", "reason": reason,
                           "code": inj.status}).encode()
        head = [f"HTTP/1.1 {inj.status} {_PHRASES.get(inj.status, 'Error')}", "Content-Type: application/json",
                f"Content-Length: {len(body)}", "Connection: close"]
        if inj.retry_after is not None:
            head.append(f"Retry-After: {max(0, round(inj.retry_after))}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        with contextlib.suppress(Exception):
            await writer.drain()
            writer.close()

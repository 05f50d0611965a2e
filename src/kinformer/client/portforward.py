"""Port forwarding to a pod over the WebSocket protocol of the ``pods/portforward`` subresource.

Each local TCP connection accepted on the listener opens one WebSocket (subprotocol ``v4.channel.k8s.io``,
query ``ports=<port>``) on which channel 0 carries the data both ways and channel 1 the server's error text; the
server first sends the port (uint16, little endian) on each channel, which is not data. A connection ends when
either side closes; an error the server reports is logged and ends that connection only.

Ownership and limits: the listener and every connection's task belong to the :class:`PortForward`, which stops
and awaits them all on :meth:`PortForward.close` (or leaving ``async with``); at most ``max_connections``
(default 64) connections are forwarded at once, further ones are closed at once and logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

import aiohttp

from kinformer.errors import APIError

if TYPE_CHECKING:
    from kinformer.client.client import Client

__all__ = ["PROTOCOL", "PortForward"]

log = logging.getLogger(__name__)

PROTOCOL = "v4.channel.k8s.io"
_DATA, _ERROR = 0, 1
_PREFIX = 2  # the port number the server sends first on each channel
_CHUNK = 32 * 1024


class PortForward:
    """A local listener forwarding to one port of a pod (from :meth:`kinformer.Client.port_forward`).

    Use from one event loop; :attr:`local_port` is known once started (``async with`` or :meth:`start`).
    """

    def __init__(self, client: Client, name: str, port: int, namespace: str | None = None, *, local_port: int = 0,
                 local_host: str = "127.0.0.1", max_connections: int = 64) -> None:
        if not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535, got {port}")
        self.client, self.name, self.port, self.namespace = client, name, port, namespace
        self.local_host, self.local_port = local_host, local_port
        self.max_connections = max_connections
        self.errors: list[str] = []  # the server's error reports, latest last (at most 100 kept)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen on ``local_host:local_port``."""
        self._server = await asyncio.start_server(self._accept, self.local_host, self.local_port)
        self.local_port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and end every forwarded connection (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    async def __aenter__(self) -> PortForward:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is None or self._server is None or len(self._tasks) >= self.max_connections:
            log.warning("port-forward %s:%d: refusing a connection (closed, or %d already forwarded)", self.name,
                        self.port, len(self._tasks))
            writer.close()
            return
        self._tasks.add(task)
        try:
            await self._forward(reader, writer)
        except (aiohttp.ClientError, OSError) as exc:
            self._report(f"connection failed: {exc}")
        except APIError as exc:  # the upgrade refused (no such pod...): this connection ends, not the listener
            self._report(str(exc))
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _report(self, message: str) -> None:
        log.warning("port-forward %s:%d: %s", self.name, self.port, message)
        self.errors = [*self.errors[-99:], message]

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ws = await self.client.pod_websocket(self.name, self.namespace, "portforward", [("ports", str(self.port))],
                                             (PROTOCOL,))
        try:
            upstream = asyncio.create_task(self._upstream(reader, ws))
            try:
                await self._downstream(ws, writer)
            finally:
                upstream.cancel()
                await asyncio.gather(upstream, return_exceptions=True)
        finally:
            await ws.close()

    @staticmethod
    async def _upstream(reader: asyncio.StreamReader, ws: aiohttp.ClientWebSocketResponse) -> None:
        while data := await reader.read(_CHUNK):
            await ws.send_bytes(bytes((_DATA,)) + data)
        await ws.close()  # the local side is done: so is this connection

    async def _downstream(self, ws: aiohttp.ClientWebSocketResponse, writer: asyncio.StreamWriter) -> None:
        skip = {_DATA: _PREFIX, _ERROR: _PREFIX}
        error = bytearray()
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel not in skip:
                continue
            cut = min(skip[channel], len(data))
            skip[channel] -= cut
            data = data[cut:]
            if channel == _DATA and data:
                writer.write(data)
                await writer.drain()
            elif channel == _ERROR and data and len(error) < 4096:
                error += data
        if error:
            self._report(error.decode("utf-8", errors="replace"))

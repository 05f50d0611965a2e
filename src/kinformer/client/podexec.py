"""Exec and attach: a pod's container streams over the WebSocket subprotocols kubectl speaks.

The client offers ``v5.channel.k8s.io`` then ``v4.channel.k8s.io``; the server picks one. Every binary message
starts with a channel byte: 0 stdin (client to server), 1 stdout, 2 stderr, 3 the error channel (a ``Status``:
``Success``, or ``Failure`` whose cause ``ExitCode`` carries the exit code), 4 terminal resize (``{"Width": w,
"Height": h}``). v5 adds channel 255: ``[255, n]`` closes stream ``n`` — how stdin reaches end-of-file; over v4
there is no such message, so :meth:`ExecSession.close_stdin` raises there.

Invariants: output is yielded in the order it arrived, by stream; the exit code is known once the stream ended
(None until then, and when the server closed without a Status); a session is closed (its connection released)
on leaving ``async with``. A message on an unknown channel is ignored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson

__all__ = ["PROTOCOLS", "ExecResult", "ExecSession"]

#: The subprotocols offered, preferred first.
PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
_STREAMS = {STDOUT: "stdout", STDERR: "stderr"}


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What :meth:`ExecSession.communicate` collected."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    status: dict[str, Any]


def exit_code_of(status: dict[str, Any]) -> int | None:
    """The exit code a error-channel Status reports (0 for Success; None when it names none)."""
    if status.get("status") == "Success":
        return 0
    for cause in (status.get("details") or {}).get("causes") or ():
        if cause.get("reason") == "ExitCode":
            try:
                return int(cause.get("message", ""))
            except ValueError:
                return None
    return None


class ExecSession:
    """One exec or attach session (from :meth:`kinformer.Client.exec` / :meth:`~kinformer.Client.attach`).

    ``async for stream, data in session`` yields ``("stdout" | "stderr", bytes)`` until the container's process
    ends; then :attr:`exit_code` and :attr:`status` (the error channel's Status) are set. Use from one task.
    """

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self.protocol: str = ws.protocol or ""
        self.status: dict[str, Any] = {}
        self.exit_code: int | None = None

    async def write(self, data: bytes) -> None:
        """Send ``data`` to the process's stdin (the session must have been opened with ``stdin=True``)."""
        await self._ws.send_bytes(bytes((STDIN,)) + data)

    async def close_stdin(self) -> None:
        """End the process's stdin (v5.channel.k8s.io only: RuntimeError when the server speaks v4)."""
        if self.protocol != PROTOCOLS[0]:
            raise RuntimeError(f"the server speaks {self.protocol or 'an unnamed protocol'}, which cannot close "
                               "stdin alone (v5.channel.k8s.io can)")
        await self._ws.send_bytes(bytes((CLOSE, STDIN)))

    async def resize(self, width: int, height: int) -> None:
        """Tell a TTY session its terminal's size."""
        await self._ws.send_bytes(bytes((RESIZE,)) + orjson.dumps({"Width": width, "Height": height}))

    def __aiter__(self) -> AsyncIterator[tuple[str, bytes]]:
        return self._output()

    async def _output(self) -> AsyncIterator[tuple[str, bytes]]:
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            stream = _STREAMS.get(channel)
            if stream is not None:
                if data:
                    yield stream, bytes(data)
            elif channel == ERROR and data:
                self.status = orjson.loads(data)
                self.exit_code = exit_code_of(self.status)

    async def communicate(self, stdin: bytes | None = None) -> ExecResult:
        """Send ``stdin`` (then close it; v5 only), collect all output until the process ends."""
        if stdin is not None:
            await self.write(stdin)
            await self.close_stdin()
        out: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        async for stream, data in self:
            out[stream] += data
        return ExecResult(bytes(out["stdout"]), bytes(out["stderr"]), self.exit_code, self.status)

    async def close(self) -> None:
        await self._ws.close()

    async def __aenter__(self) -> ExecSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

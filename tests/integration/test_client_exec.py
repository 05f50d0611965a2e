"""Exec and attach over the WebSocket channel protocols, against a small test kubelet on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from aiohttp import WSMsgType, web

from kinformer import errors
from kinformer.client import Client

SUCCESS = {"metadata": {}, "status": "Success"}


def failure(code: int) -> dict[str, Any]:
    return {"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: exit status {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def kubelet(protocols: tuple[str, ...], queries: list[list[tuple[str, str]]]) -> web.Application:
    """Pods whose containers run: ``echo WORDS``, ``cat`` (stdin to stdout until stdin closes), ``fail N``."""

    async def stream(request: web.Request) -> web.StreamResponse:
        if request.match_info["name"] == "missing":
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound",
                                      "message": 'pods "missing" not found'}, status=404)
        queries.append(list(request.query.items()))
        ws = web.WebSocketResponse(protocols=protocols)
        await ws.prepare(request)
        command = request.query.getall("command", ["attached"])
        status = SUCCESS
        if command[0] == "cat":
            async for message in ws:
                if message.type != WSMsgType.BINARY:
                    break
                if message.data[:2] == bytes((255, 0)):  # stdin closed
                    break
                if message.data[0] == 0:
                    await ws.send_bytes(b"\x01" + message.data[1:])
        elif command[0] == "fail":
            await ws.send_bytes(b"\x02bye\n")
            status = failure(int(command[1]))
        else:
            await ws.send_bytes(b"\x01" + " ".join(command[1:] or command).encode() + b"\n")
        await ws.send_bytes(b"\x03" + orjson.dumps(status))
        await ws.close()
        return ws

    app = web.Application()
    for sub in ("exec", "attach"):
        app.router.add_get(f"/api/v1/namespaces/{{ns}}/pods/{{name}}/{sub}", stream)
    return app


async def test_exec_collects_output_and_the_exit_code(serve: Callable[..., Any]) -> None:
    queries: list[list[tuple[str, str]]] = []
    async with Client(await serve(kubelet(("v5.channel.k8s.io", "v4.channel.k8s.io"), queries))) as client:
        async with await client.exec("web", ["echo", "hello", "world"], "default", container="app") as session:
            assert session.protocol == "v5.channel.k8s.io"
            result = await session.communicate()
        assert (result.stdout, result.stderr, result.exit_code) == (b"hello world\n", b"", 0)
        async with await client.exec("web", ["fail", "3"], "default") as session:
            result = await session.communicate()
        assert (result.stdout, result.stderr, result.exit_code) == (b"", b"bye\n", 3)
        assert result.status["reason"] == "NonZeroExitCode"
    assert queries[0] == [("command", "echo"), ("command", "hello"), ("command", "world"), ("container", "app"),
                          ("stdout", "true"), ("stderr", "true")]


async def test_stdin_reaches_the_process_and_closing_it_ends_the_command(serve: Callable[..., Any]) -> None:
    async with Client(await serve(kubelet(("v5.channel.k8s.io",), []))) as client:
        async with await client.exec("web", ["cat"], "default", stdin=True) as session:
            await session.write(b"line 1\n")
            stream, data = await anext(aiter(session))
            assert (stream, data) == ("stdout", b"line 1\n")
            result = await session.communicate(b"line 2\n")
    assert (result.stdout, result.exit_code) == (b"line 2\n", 0)


async def test_a_v4_server_is_spoken_to_in_v4_where_stdin_cannot_be_closed_alone(serve: Callable[..., Any]) -> None:
    async with Client(await serve(kubelet(("v4.channel.k8s.io",), []))) as client:
        async with await client.attach("web", "default") as session:
            assert session.protocol == "v4.channel.k8s.io"
            with pytest.raises(RuntimeError, match="cannot close stdin"):
                await session.close_stdin()
            result = await session.communicate()
    assert (result.stdout, result.exit_code) == (b"attached\n", 0)


async def test_a_refused_upgrade_is_a_typed_error(serve: Callable[..., Any]) -> None:
    async with Client(await serve(kubelet(("v5.channel.k8s.io",), []))) as client:
        with pytest.raises(errors.NotFound):
            await client.exec("missing", ["true"], "default")
        with pytest.raises(ValueError, match="needs a command"):
            await client.exec("web", [], "default")


def forwarding_kubelet(ports_seen: list[str]) -> web.Application:
    """Port 7 echoes what it receives; any other port reports an error, as a kubelet whose pod has no listener."""

    async def portforward(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("v4.channel.k8s.io",))
        await ws.prepare(request)
        port = int(request.query["ports"])
        ports_seen.append(ws.ws_protocol or "")
        prefix = port.to_bytes(2, "little")
        await ws.send_bytes(b"\x00" + prefix)
        await ws.send_bytes(b"\x01" + prefix)
        if port != 7:
            await ws.send_bytes(b"\x01" + f"error forwarding port {port} to pod web: connection refused".encode())
            await ws.close()
            return ws
        async for message in ws:
            if message.type == WSMsgType.BINARY and message.data[:1] == b"\x00":
                await ws.send_bytes(b"\x00" + message.data[1:])
        return ws

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/pods/{name}/portforward", portforward)
    return app


async def test_port_forward_relays_each_local_connection_over_its_own_websocket(serve: Callable[..., Any]) -> None:
    protocols: list[str] = []
    async with Client(await serve(forwarding_kubelet(protocols))) as client:
        async with client.port_forward("web", 7, "default") as forward:
            first = await asyncio.open_connection("127.0.0.1", forward.local_port)
            second = await asyncio.open_connection("127.0.0.1", forward.local_port)
            for i, (reader, writer) in enumerate((first, second)):
                writer.write(f"ping {i}".encode())
                await writer.drain()
                assert await reader.readexactly(6) == f"ping {i}".encode()  # the port prefix is not data
            for _, writer in (first, second):
                writer.close()
        assert protocols == ["v4.channel.k8s.io"] * 2
        async with client.port_forward("web", 8080, "default") as refused:
            reader, writer = await asyncio.open_connection("127.0.0.1", refused.local_port)
            assert await reader.read() == b""  # the server's error ends the local connection
            writer.close()
        assert refused.errors == ["error forwarding port 8080 to pod web: connection refused"]
    with pytest.raises(ValueError, match="port"):
        client.port_forward("web", 0)


async def test_port_forward_refuses_connections_beyond_its_bound(serve: Callable[..., Any]) -> None:
    async with Client(await serve(forwarding_kubelet([]))) as client, \
            client.port_forward("web", 7, "default", max_connections=1) as forward:
        reader, writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
        writer.write(b"held")
        assert await reader.readexactly(4) == b"held"  # forwarded and still open
        extra_reader, extra_writer = await asyncio.open_connection("127.0.0.1", forward.local_port)
        assert await extra_reader.read() == b""  # closed at once
        for w in (writer, extra_writer):
            w.close()

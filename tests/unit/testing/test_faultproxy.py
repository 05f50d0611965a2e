"""The fault proxy forwards bytes, drops connections, and injects HTTP errors with Status bodies."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from kinformer.testing import FaultProxy


async def _backend() -> tuple[web.AppRunner, int]:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for i in range(1000):
            await resp.write(b'{"n": %d}\n' % i)
            await asyncio.sleep(0.01)
        return resp

    app = web.Application()
    app.router.add_get("/hello", hello)
    app.router.add_get("/stream", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]


async def test_forward_drop_and_inject() -> None:
    runner, port = await _backend()
    try:
        async with FaultProxy("127.0.0.1", port) as proxy, aiohttp.ClientSession() as session:
            async with session.get(proxy.url + "/hello") as resp:
                assert resp.status == 200 and (await resp.json()) == {"ok": True}

            async with session.get(proxy.url + "/stream") as resp:
                first = await resp.content.readline()
                assert first == b'{"n": 0}\n'
                assert proxy.drop_connections() >= 1
                try:
                    async with asyncio.timeout(5):
                        while await resp.content.readline():
                            pass
                    broken = False
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                    broken = True
                assert broken, "a dropped connection must look broken, not cleanly ended"

            proxy.inject(429, times=2, retry_after=1)
            for _ in range(2):
                async with session.get(proxy.url + "/hello") as resp:
                    assert resp.status == 429
                    assert resp.headers["Retry-After"] == "1"
                    body = await resp.json()
                    assert body["kind"] == "Status" and body["code"] == 429 and body["reason"] == "TooManyRequests"
            async with session.get(proxy.url + "/hello") as resp:
                assert resp.status == 200
            assert proxy.faults["http_429"] == 2 and proxy.faults["drop"] == 1
    finally:
        await runner.cleanup()

"""Fixtures shared by the integration tests that talk HTTP to an embedded API server.

``server`` is a started :class:`kinformer.server.APIServer` (in-memory storage, no background compaction);
a module that needs other settings overrides it with its own ``server`` fixture. ``http`` is an aiohttp
session whose base URL is that server, closed after the test. ``serve`` starts stub aiohttp apps on 127.0.0.1
(``await serve(app, ssl_context=None)`` returns the URL), cleaned up after the test.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from kinformer.server import APIServer


@pytest.fixture
async def server() -> AsyncIterator[APIServer]:
    # Tests count a namespace's objects: no default ServiceAccount / kube-root-ca.crt (test_cluster_objects has them).
    async with APIServer(compaction_interval=0, namespace_defaults=False) as s:
        yield s


@pytest.fixture
async def http(server: APIServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as c:
        yield c


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Any]]:
    runners: list[web.AppRunner] = []

    async def start(app: web.Application, ssl_context: ssl.SSLContext | None = None) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"

    yield start
    for runner in runners:
        await runner.cleanup()

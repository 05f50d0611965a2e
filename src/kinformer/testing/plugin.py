"""pytest fixtures that run controllers against a real, embedded API server (kinformer's envtest).

Enable in ``conftest.py``::

    pytest_plugins = ["kinformer.testing.plugin"]

Fixtures (each test gets its own server, so tests never see each other's objects):

* ``kube_server`` — a started :class:`kinformer.server.APIServer` with in-memory storage on 127.0.0.1;
* ``kube_client`` — a :class:`kinformer.Client` connected to it (closed after the test);
* ``kube_factory`` — a :class:`kinformer.SharedInformerFactory` over that client (shut down after the test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio


@pytest_asyncio.fixture
async def kube_server() -> AsyncIterator[Any]:
    from kinformer.server import APIServer

    async with APIServer(storage="memory") as server:
        yield server


@pytest_asyncio.fixture
async def kube_client(kube_server: Any) -> AsyncIterator[Any]:
    from kinformer.client import Client

    client = Client(kube_server.url)
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture
async def kube_factory(kube_client: Any) -> AsyncIterator[Any]:
    from kinformer.cache.factory import SharedInformerFactory

    factory = SharedInformerFactory(kube_client)
    try:
        yield factory
    finally:
        await factory.shutdown()

"""pytest fixtures that run controllers against a real, embedded API server (kinformer's envtest).

Installed with kinformer, the plugin is active in every pytest run (a ``pytest11`` entry point); it needs
pytest-asyncio (``pip install 'kinformer[testing]'``) and async tests marked ``@pytest.mark.asyncio``, or
``asyncio_mode = "auto"`` in the pytest configuration. Without pytest-asyncio the fixtures fail with that
advice instead of breaking pytest's start-up.

Fixtures (each test gets its own server, so tests never see each other's objects):

* ``kube_server`` — a started :class:`kinformer.server.APIServer` with in-memory storage on 127.0.0.1;
* ``kube_client`` — a :class:`kinformer.Client` connected to it (closed after the test);
* ``kube_factory`` — a :class:`kinformer.SharedInformerFactory` over that client (shut down after the test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

try:
    from pytest_asyncio import fixture as _async_fixture
except ImportError:  # pragma: no cover - exercised only where pytest-asyncio is absent
    def _async_fixture(fn: Callable[..., Any]) -> Any:
        def needs_pytest_asyncio() -> None:
            pytest.fail("kinformer's fixtures need pytest-asyncio: pip install 'kinformer[testing]'")

        needs_pytest_asyncio.__name__ = fn.__name__
        return pytest.fixture(needs_pytest_asyncio, name=fn.__name__)


@_async_fixture
async def kube_server() -> AsyncIterator[Any]:
    from kinformer.server import APIServer

    async with APIServer(storage="memory") as server:
        yield server


@_async_fixture
async def kube_client(kube_server: Any) -> AsyncIterator[Any]:
    from kinformer.client import Client

    client = Client(kube_server.url)
    try:
        yield client
    finally:
        await client.close()


@_async_fixture
async def kube_factory(kube_client: Any) -> AsyncIterator[Any]:
    from kinformer.cache.factory import SharedInformerFactory

    factory = SharedInformerFactory(kube_client)
    try:
        yield factory
    finally:
        await factory.shutdown()

"""Fixtures shared by the integration tests that talk HTTP to an embedded API server.

``server`` is a started :class:`kinformer.server.APIServer` (in-memory storage, no background compaction);
a module that needs other settings overrides it with its own ``server`` fixture. ``http`` is an aiohttp
session whose base URL is that server, closed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

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

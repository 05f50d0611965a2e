"""``APIServer(log_requests=True)`` (``kinformer serve -v``): one line per finished request."""

from __future__ import annotations

import logging

import aiohttp
import pytest

from kinformer.server import APIServer
from kinformer.server.filters.requestlog import REQUEST_LOG


async def test_each_request_is_logged_with_method_path_user_code_and_time(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=REQUEST_LOG.name)
    async with APIServer(log_requests=True, namespace_defaults=False) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        async with http.get("/api/v1/namespaces/default/configmaps", params={"limit": "1"}) as r:
            assert r.status == 200
        async with http.get("/api/v1/namespaces/default/configmaps/missing") as r:
            assert r.status == 404
    lines = [rec.getMessage() for rec in caplog.records if rec.name == REQUEST_LOG.name]
    assert len(lines) == 2, lines
    method, path, user, code, ms = lines[0].split()
    assert (method, path, code) == ("GET", "/api/v1/namespaces/default/configmaps?limit=1", "200")
    assert user.startswith("user=") and user != "user=-" and ms.endswith("ms") and float(ms[:-2]) >= 0
    assert lines[1].split()[3] == "404"


async def test_no_request_log_by_default(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=REQUEST_LOG.name)
    async with APIServer(namespace_defaults=False) as server, aiohttp.ClientSession(base_url=server.url) as http:
        async with http.get("/api/v1/namespaces") as r:
            assert r.status == 200
    assert not [rec for rec in caplog.records if rec.name == REQUEST_LOG.name]

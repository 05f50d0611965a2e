"""Cluster objects a client expects: default/kubernetes, default ServiceAccounts, kube-root-ca.crt, ClusterIPs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kinformer.clock import FakeClock
from kinformer.server import APIServer
from kinformer.server.controllers.bootstrap import KUBERNETES_SERVICE_INTERVAL
from testlib import call

NS = "/api/v1/namespaces"


@pytest.fixture
async def full() -> AsyncIterator[tuple[APIServer, aiohttp.ClientSession]]:
    async with APIServer(compaction_interval=0) as s, aiohttp.ClientSession(base_url=s.url) as http:
        yield s, http


async def eventually(http: aiohttp.ClientSession, path: str, timeout: float = 5.0) -> dict[str, Any]:
    """GET ``path`` until it exists (the server's controllers create it asynchronously)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        code, obj = await call(http, "GET", path)
        if code == 200:
            return obj
        assert asyncio.get_running_loop().time() < deadline, f"{path} never appeared: {obj}"
        await asyncio.sleep(0.02)


async def test_default_kubernetes_service_points_at_the_server(full):
    server, http = full
    code, svc = await call(http, "GET", f"{NS}/default/services/kubernetes")
    assert code == 200 and svc["spec"]["clusterIP"] == "10.96.0.1" and svc["spec"]["clusterIPs"] == ["10.96.0.1"]
    assert svc["spec"]["ports"] == [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": server.port}]
    assert svc["metadata"]["labels"] == {"component": "apiserver", "provider": "kubernetes"}
    code, ep = await call(http, "GET", f"{NS}/default/endpoints/kubernetes")
    assert code == 200 and ep["subsets"] == [{"addresses": [{"ip": "127.0.0.1"}],
                                              "ports": [{"name": "https", "port": server.port, "protocol": "TCP"}]}]


async def test_deleted_default_kubernetes_service_comes_back_at_the_next_pass():
    """kube's bootstrap controller re-creates default/kubernetes (and its endpoints) every 10 s: here a pass of
    the server's clock brings back the Service, Endpoints and EndpointSlice, pointing at the server."""
    clock = FakeClock()
    async with APIServer(compaction_interval=0, clock=clock) as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        paths = [f"{NS}/default/services/kubernetes", f"{NS}/default/endpoints/kubernetes",
                 "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"]
        before = [(await call(http, "GET", path))[1] for path in paths]
        for path in paths:
            assert (await call(http, "DELETE", path))[0] == 200, path
        clock.step(KUBERNETES_SERVICE_INTERVAL - 1)
        await server.bootstrap.wait_idle()
        assert (await call(http, "GET", paths[0]))[0] == 404  # not before the interval
        clock.step(1)
        back = [await eventually(http, path) for path in paths]
        assert back[0]["spec"]["clusterIP"] == "10.96.0.1" and back[0]["spec"]["ports"] == before[0]["spec"]["ports"]
        assert back[0]["metadata"]["uid"] != before[0]["metadata"]["uid"]
        assert back[1]["subsets"] == before[1]["subsets"]
        assert back[2]["endpoints"] == before[2]["endpoints"] and back[2]["ports"] == before[2]["ports"]


async def test_every_namespace_gets_a_default_service_account_and_the_root_ca(full):
    _, http = full
    for ns in ("default", "kube-system"):
        await eventually(http, f"{NS}/{ns}/serviceaccounts/default")
    assert (await call(http, "POST", NS, {"metadata": {"name": "team"}}))[0] == 201
    sa = await eventually(http, f"{NS}/team/serviceaccounts/default")
    assert "generation" not in sa["metadata"]
    cm = await eventually(http, f"{NS}/team/configmaps/kube-root-ca.crt")
    assert cm["data"]["ca.crt"].startswith("-----BEGIN CERTIFICATE-----")
    # deleted ones come back, as kube's controllers re-create them
    assert (await call(http, "DELETE", f"{NS}/team/serviceaccounts/default"))[0] == 200
    await eventually(http, f"{NS}/team/serviceaccounts/default")


async def test_root_ca_is_the_tls_ca_and_is_restored(tmp_path):
    async with APIServer(compaction_interval=0, tls=True, data_dir=str(tmp_path)) as server:
        ca = Path(server.ca_cert).read_text()  # noqa: ASYNC240 - a small local file, read once
        connector = aiohttp.TCPConnector(ssl=False)
        async with aiohttp.ClientSession(base_url=server.url, connector=connector) as http:
            cm = await eventually(http, f"{NS}/default/configmaps/kube-root-ca.crt")
            assert cm["data"] == {"ca.crt": ca}
            cm["data"] = {"ca.crt": "tampered"}
            assert (await call(http, "PUT", f"{NS}/default/configmaps/kube-root-ca.crt", cm))[0] == 200
            deadline = asyncio.get_running_loop().time() + 5
            while (await call(http, "GET", f"{NS}/default/configmaps/kube-root-ca.crt"))[1]["data"] != {"ca.crt": ca}:
                assert asyncio.get_running_loop().time() < deadline
                await asyncio.sleep(0.02)


async def test_cluster_ips_are_allocated_and_released(full):
    _, http = full
    svc = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}
    code, created = await call(http, "POST", f"{NS}/default/services", svc)
    assert code == 201, created
    ip = created["spec"]["clusterIP"]
    assert ip.startswith("10.") and created["spec"]["ipFamilies"] == ["IPv4"] and created["status"] == {
        "loadBalancer": {}}
    taken = {"metadata": {"name": "copy"}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}
    code, err = await call(http, "POST", f"{NS}/default/services", taken)
    assert code == 422 and err["details"]["causes"][0]["field"] == "spec.clusterIPs"
    code, deleted = await call(http, "DELETE", f"{NS}/default/services/web")
    assert code == 200 and deleted["kind"] == "Service"
    deadline = asyncio.get_running_loop().time() + 5
    while (code := (await call(http, "POST", f"{NS}/default/services", taken))[0]) != 201:
        assert code == 422 and asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.02)
    # a PUT without clusterIP keeps the allocated one (kube carries allocated values over)
    code, got = await call(http, "GET", f"{NS}/default/services/copy")
    del got["spec"]["clusterIP"], got["spec"]["clusterIPs"]
    code, put = await call(http, "PUT", f"{NS}/default/services/copy", got)
    assert code == 200 and put["spec"]["clusterIP"] == ip
    put["spec"]["clusterIP"] = put["spec"]["clusterIPs"][0] = "10.96.0.77"
    code, err = await call(http, "PUT", f"{NS}/default/services/copy", put)
    assert code == 422 and err["reason"] == "Invalid" and "spec.clusterIP" in err["message"]


async def test_node_ports_come_from_the_configured_range():
    async with APIServer(compaction_interval=0, namespace_defaults=False, service_node_port_range="31000-31001",
                         service_cluster_ip_range="10.0.0.0/24") as server, \
            aiohttp.ClientSession(base_url=server.url) as http:
        code, svc = await call(http, "GET", f"{NS}/default/services/kubernetes")
        assert svc["spec"]["clusterIP"] == "10.0.0.1"
        ports = []
        for name in ("a", "b"):
            body = {"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
            code, created = await call(http, "POST", f"{NS}/default/services", body)
            assert code == 201, created
            ports.append(created["spec"]["ports"][0]["nodePort"])
        assert sorted(ports) == [31000, 31001]
        body = {"metadata": {"name": "c"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
        code, err = await call(http, "POST", f"{NS}/default/services", body)
        assert code == 422 and "range is full" in err["message"]

"""The endpoint controller (kube's pkg/controller/endpoint and test/e2e/network/service.go "should serve a basic
endpoint from pods"); the test plays the kubelet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _hsvc_helpers import NS, cluster_client, pod, run_pod, set_ready, wait_object

import kinformer as ki
from kinformer.cluster.controllers.endpoints import MAX_CAPACITY, OVER_CAPACITY, TRIGGER_TIME, truncate
from kinformer.cluster.controllers.endpointutil import TriggerTimeTracker


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with cluster_client("endpoint") as c:
        yield c


def service(name: str = "web", selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"name": "http", "port": 80, "targetPort": 8080}])
    return {"metadata": {"name": name, "namespace": NS, "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"} if selector is None else selector, **spec}}


def addresses(ep: Any, kind: str = "addresses") -> list[str]:
    return [a["ip"] for s in ep.get("subsets") or () for a in s.get(kind) or ()]


async def test_should_serve_a_basic_endpoint_from_pods(client: ki.Client) -> None:
    await client.create("services", service())
    ep = await wait_object(client, "endpoints", "web", lambda e: e is not None)
    assert ep.get("subsets") in (None, [])
    assert ep["metadata"]["labels"] == {"tier": "front"}
    await client.create("pods", pod("web-1", {"app": "web"}))
    await client.create("pods", pod("other", {"app": "db"}))
    await run_pod(client, "web-1", "10.0.0.1")
    await run_pod(client, "other", "10.0.0.9")
    ep = await wait_object(client, "endpoints", "web", lambda e: addresses(e) == ["10.0.0.1"])
    (subset,) = ep["subsets"]
    assert subset["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    address = subset["addresses"][0]
    assert address["nodeName"] == "node-1"
    assert address["targetRef"]["kind"] == "Pod" and address["targetRef"]["name"] == "web-1"
    assert ep["metadata"]["annotations"][TRIGGER_TIME]
    await client.delete("pods", "web-1", namespace=NS, grace_period_seconds=0)
    await wait_object(client, "endpoints", "web", lambda e: addresses(e) == [])


async def test_a_pod_not_ready_is_listed_under_not_ready_addresses_until_it_is(client: ki.Client) -> None:
    await client.create("services", service())
    await client.create("pods", pod("web-1", {"app": "web"}))
    await run_pod(client, "web-1", "10.0.0.1", ready=False)
    await wait_object(client, "endpoints", "web", lambda e: e and addresses(e, "notReadyAddresses") == ["10.0.0.1"])
    await set_ready(client, "web-1", True)
    ep = await wait_object(client, "endpoints", "web", lambda e: addresses(e) == ["10.0.0.1"])
    assert addresses(ep, "notReadyAddresses") == []


async def test_publish_not_ready_addresses_lists_every_pod_as_ready(client: ki.Client) -> None:
    await client.create("services", service(publishNotReadyAddresses=True))
    await client.create("pods", pod("web-1", {"app": "web"}))
    await run_pod(client, "web-1", "10.0.0.1", ready=False)
    await wait_object(client, "endpoints", "web", lambda e: e and addresses(e) == ["10.0.0.1"])


async def test_named_target_ports_resolve_per_pod_into_subsets(client: ki.Client) -> None:
    await client.create("services", service(ports=[{"name": "http", "port": 80, "targetPort": "web"}]))
    await client.create("pods", pod("a", {"app": "web"}, ports=[{"name": "web", "containerPort": 8080}]))
    await client.create("pods", pod("b", {"app": "web"}, ports=[{"name": "web", "containerPort": 9090}]))
    await client.create("pods", pod("c", {"app": "web"}, ports=[{"name": "other", "containerPort": 7070}]))
    for name, ip in (("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")):
        await run_pod(client, name, ip)
    ep = await wait_object(client, "endpoints", "web", lambda e: e and sorted(addresses(e)) == ["10.0.0.1", "10.0.0.2"])
    assert sorted((s["ports"][0]["port"], addresses({"subsets": [s]})) for s in ep["subsets"]) == \
        [(8080, ["10.0.0.1"]), (9090, ["10.0.0.2"])]


async def test_hostname_is_set_when_the_subdomain_is_the_service(client: ki.Client) -> None:
    await client.create("services", service(clusterIP="None", ports=[]))
    await client.create("pods", pod("a", {"app": "web"}, hostname="a", subdomain="web"))
    await client.create("pods", pod("b", {"app": "web"}, hostname="b", subdomain="elsewhere"))
    await run_pod(client, "a", "10.0.0.1")
    await run_pod(client, "b", "10.0.0.2")
    ep = await wait_object(client, "endpoints", "web", lambda e: e and len(addresses(e)) == 2)
    (subset,) = ep["subsets"]
    assert "ports" not in subset
    assert [a.get("hostname") for a in subset["addresses"]] == ["a", None]
    assert ep["metadata"]["labels"]["service.kubernetes.io/headless"] == ""


async def test_endpoints_go_with_their_service_and_selectorless_services_are_left_alone(client: ki.Client) -> None:
    await client.create("services", service())
    await wait_object(client, "endpoints", "web", lambda e: e is not None)
    await client.delete("services", "web", namespace=NS)
    await wait_object(client, "endpoints", "web", lambda e: e is None)
    await client.create("services", service("manual", selector={}))
    manual = {"metadata": {"name": "manual", "namespace": NS},
              "subsets": [{"addresses": [{"ip": "192.168.0.1"}], "ports": [{"port": 80}]}]}
    await client.create("endpoints", manual)
    await client.create("services", service("probe"))  # processed after "manual": the controller had its turn
    await wait_object(client, "endpoints", "probe", lambda e: e is not None)
    assert addresses(await client.get("endpoints", "manual", namespace=NS)) == ["192.168.0.1"]


def test_more_than_max_capacity_addresses_are_truncated_ready_first() -> None:
    def addrs(n: int, start: int = 0) -> list[dict[str, Any]]:
        return [{"ip": f"10.{(i // 250) % 250}.{i % 250}.1", "targetRef": {"uid": str(i)}}
                for i in range(start, start + n)]

    subsets = [{"addresses": addrs(600), "notReadyAddresses": addrs(300, 600)},
               {"addresses": addrs(200, 900), "notReadyAddresses": addrs(100, 1100)}]
    assert truncate(subsets)
    assert [len(s["addresses"]) for s in subsets] == [600, 200]
    assert sum(len(s.get("notReadyAddresses") or ()) for s in subsets) == MAX_CAPACITY - 800
    many = [{"addresses": addrs(MAX_CAPACITY + 10), "notReadyAddresses": addrs(5)}]
    assert truncate(many)
    assert len(many[0]["addresses"]) == MAX_CAPACITY and "notReadyAddresses" not in many[0]
    assert not truncate([{"addresses": addrs(MAX_CAPACITY)}])
    assert OVER_CAPACITY == "endpoints.kubernetes.io/over-capacity"


def test_the_trigger_time_is_the_earliest_change_since_the_previous_sync() -> None:
    tracker = TriggerTimeTracker()
    svc = {"metadata": {"name": "web", "namespace": NS, "creationTimestamp": "2026-01-01T00:00:05Z"}}

    def ready_pod(name: str, since: str) -> dict[str, Any]:
        return {"metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}]}}

    a, b = ready_pod("a", "2026-01-01T00:00:07Z"), ready_pod("b", "2026-01-01T00:00:09Z")
    assert tracker.compute(svc, [a, b]) == "2026-01-01T00:00:05Z"
    assert tracker.compute(svc, [a, b]) is None
    assert tracker.compute(svc, [a, ready_pod("b", "2026-01-01T00:01:00Z"), ready_pod("c", "2026-01-01T00:00:30Z")]) \
        == "2026-01-01T00:00:30Z"
    tracker.forget(NS, "web")
    assert tracker.compute(svc, []) == "2026-01-01T00:00:05Z"


async def test_a_pod_relabelled_out_of_the_selector_leaves_the_endpoints(client: ki.Client) -> None:
    """The pods watch is handed only pods some service selects, but an update whose old pod was selected
    still arrives: the pod leaving the selector is seen."""
    await client.create("services", service())
    await client.create("pods", pod("web-1", {"app": "web"}))
    await run_pod(client, "web-1", "10.0.0.1")
    await wait_object(client, "endpoints", "web", lambda e: addresses(e) == ["10.0.0.1"])
    await client.patch("pods", "web-1", {"metadata": {"labels": {"app": "db"}}}, "merge", namespace=NS)
    await wait_object(client, "endpoints", "web", lambda e: addresses(e) == [])

"""The endpointslice controller, named after kube's e2e (test/e2e/network/endpointslice.go); the test plays the
kubelet (pod IPs and readiness)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _hsvc_helpers import NS, cluster_client, pod, run_pod, set_ready, wait_list

import kinformer as ki
from kinformer.cluster.controllers.endpointslice import MANAGED_BY, SERVICE_NAME

SLICES = "endpointslices.discovery.k8s.io"


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with cluster_client("endpointslice", max_endpoints_per_slice=3) as c:
        yield c


def service(name: str = "web", **spec: Any) -> dict[str, Any]:
    spec.setdefault("ports", [{"name": "http", "port": 80, "targetPort": 8080}])
    spec.setdefault("selector", {"app": "web"})
    return {"metadata": {"name": name, "namespace": NS, "labels": {"tier": "front"}}, "spec": spec}


async def wait_slices(client: ki.Client, check: Any, name: str = "web") -> list[dict[str, Any]]:
    """Wait until ``check(slices of service name)`` holds."""
    return await wait_list(client, SLICES, check, label_selector=f"{SERVICE_NAME}={name}")


def endpoints(slices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["targetRef"]["name"]: e for s in slices for e in s.get("endpoints") or ()}


async def test_should_have_endpoints_and_endpointslices_pointing_to_api_server_or_a_placeholder(
        client: ki.Client) -> None:
    await client.create("services", service())
    (placeholder,) = await wait_slices(client, lambda s: len(s) == 1)
    assert placeholder["endpoints"] in (None, []) and placeholder["ports"] in (None, [])
    assert placeholder["addressType"] == "IPv4"
    meta = placeholder["metadata"]
    assert meta["name"].startswith("web-")
    assert meta["labels"] == {"tier": "front", SERVICE_NAME: "web", MANAGED_BY: "endpointslice-controller.k8s.io"}
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"], owner["blockOwnerDeletion"]) == ("Service", "web",
                                                                                              True, True)


async def test_should_create_endpoints_for_unready_pods_and_follow_readiness(client: ki.Client) -> None:
    await client.create("nodes", {"metadata": {"name": "node-1", "labels": {"topology.kubernetes.io/zone": "z1"}}})
    await client.create("services", service())
    await client.create("pods", pod("web-1", {"app": "web"}))
    await run_pod(client, "web-1", "10.0.0.1", ready=False)
    slices = await wait_slices(client, lambda s: "web-1" in endpoints(s))
    (slice_,) = slices
    endpoint = endpoints(slices)["web-1"]
    assert endpoint["addresses"] == ["10.0.0.1"]
    assert endpoint["conditions"] == {"ready": False, "serving": False, "terminating": False}
    assert (endpoint["nodeName"], endpoint["zone"]) == ("node-1", "z1")
    assert slice_["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    await set_ready(client, "web-1", True)
    await wait_slices(client, lambda s: endpoints(s).get("web-1", {}).get("conditions", {}).get("ready") is True)


async def test_should_create_endpointslices_for_pods_matching_a_service_up_to_max_per_slice(
        client: ki.Client) -> None:
    await client.create("services", service())
    for i in range(7):
        await client.create("pods", pod(f"web-{i}", {"app": "web"}))
        await run_pod(client, f"web-{i}", f"10.0.0.{i + 1}")
    slices = await wait_slices(client, lambda s: len(endpoints(s)) == 7)
    assert sorted(len(s["endpoints"]) for s in slices) == [1, 3, 3]
    for i in range(7):
        await client.delete("pods", f"web-{i}", namespace=NS, grace_period_seconds=0)
    (placeholder,) = await wait_slices(client, lambda s: len(s) == 1 and not endpoints(s))
    assert placeholder["endpoints"] in (None, [])


async def test_a_terminating_pod_stays_with_ready_false_and_terminating_true(client: ki.Client) -> None:
    await client.create("services", service())
    await client.create("pods", {**pod("web-1", {"app": "web"}),
                                 "metadata": {"name": "web-1", "namespace": NS, "labels": {"app": "web"},
                                              "finalizers": ["example.com/hold"]}})
    await run_pod(client, "web-1", "10.0.0.1")
    await wait_slices(client, lambda s: endpoints(s).get("web-1", {}).get("conditions", {}).get("ready") is True)
    await client.delete("pods", "web-1", namespace=NS)
    await wait_slices(client, lambda s: endpoints(s).get("web-1", {}).get("conditions") ==
                      {"ready": False, "serving": True, "terminating": True})
    await client.patch("pods", "web-1", {"metadata": {"finalizers": None}}, namespace=NS)


async def test_slices_are_grouped_by_resolved_named_ports(client: ki.Client) -> None:
    await client.create("services", service(ports=[{"name": "http", "port": 80, "targetPort": "web"}]))
    await client.create("pods", pod("a", {"app": "web"}, ports=[{"name": "web", "containerPort": 8080}]))
    await client.create("pods", pod("b", {"app": "web"}, ports=[{"name": "web", "containerPort": 9090}]))
    await run_pod(client, "a", "10.0.0.1")
    await run_pod(client, "b", "10.0.0.2")
    slices = await wait_slices(client, lambda s: len(endpoints(s)) == 2)
    assert sorted((s["ports"][0]["port"], [e["targetRef"]["name"] for e in s["endpoints"]]) for s in slices) == \
        [(8080, ["a"]), (9090, ["b"])]


async def test_slices_are_deleted_with_the_service_or_its_selector(client: ki.Client) -> None:
    await client.create("services", service())
    await client.create("services", service("other"))
    await wait_slices(client, lambda s: len(s) == 1)
    await wait_slices(client, lambda s: len(s) == 1, name="other")
    await client.patch("services", "web", {"spec": {"selector": None}}, namespace=NS)
    await client.delete("services", "other", namespace=NS)
    await wait_slices(client, lambda s: not s)
    await wait_slices(client, lambda s: not s, name="other")


async def test_a_pod_relabelled_out_of_the_selector_leaves_the_slices(client: ki.Client) -> None:
    """The pods watch is handed only pods some service selects; the update that takes a pod out still arrives."""
    await client.create("services", service())
    await client.create("pods", pod("web-1", {"app": "web"}))
    await run_pod(client, "web-1", "10.0.0.1")
    await wait_slices(client, lambda s: "web-1" in endpoints(s))
    await client.patch("pods", "web-1", {"metadata": {"labels": {"app": "db"}}}, "merge", namespace=NS)
    await wait_slices(client, lambda s: len(s) == 1 and not endpoints(s))

"""The endpoint, endpointslice, disruption and resourcequota controllers together, with the server's eviction and
quota admission: a Service's backends, its budget and its namespace's quota follow the same pods. The test plays
the scheduler and the kubelet (binding, pod IP, readiness)."""

from __future__ import annotations

from typing import Any

import pytest

import kinformer as ki
from unit.cluster._hsvc_helpers import NS, cluster_client, evict, pod, run_pod, set_ready, wait_list, wait_object

SLICES = "endpointslices.discovery.k8s.io"
PDBS = "poddisruptionbudgets.policy"


def ready_ips(endpoints: dict[str, Any] | None) -> list[str]:
    subsets = (endpoints or {}).get("subsets") or []
    return sorted(a["ip"] for s in subsets for a in s.get("addresses") or ())


def slice_ready(slices: list[dict[str, Any]]) -> dict[str, bool]:
    return {e["targetRef"]["name"]: e["conditions"]["ready"] for s in slices for e in s.get("endpoints") or ()}


@pytest.mark.slow
async def test_a_service_its_budget_and_its_quota_follow_readiness_and_evictions() -> None:
    async with cluster_client("endpoint", "endpointslice", "disruption", "resourcequota",
                              resource_quota_sync_period=5.0) as client:
        await client.create("resourcequotas", {"metadata": {"name": "pods", "namespace": NS},
                                               "spec": {"hard": {"pods": "3"}}})
        await wait_object(client, "resourcequotas", "pods", lambda q: q and "used" in (q.get("status") or {}))
        await client.create("services", {"metadata": {"name": "web", "namespace": NS},
                                         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
        await client.create(PDBS, {"metadata": {"name": "web", "namespace": NS},
                                   "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
        for i in range(3):
            await client.create("pods", pod(f"web-{i}", {"app": "web"}))
            await run_pod(client, f"web-{i}", f"10.1.0.{i + 1}", ready=i < 2)
        with pytest.raises(ki.Forbidden, match="exceeded quota: pods"):
            await client.create("pods", pod("web-3", {"app": "web"}))

        await wait_object(client, "endpoints", "web", lambda e: ready_ips(e) == ["10.1.0.1", "10.1.0.2"])
        await wait_list(client, SLICES, lambda s: slice_ready(s) == {"web-0": True, "web-1": True, "web-2": False},
                        label_selector="kubernetes.io/service-name=web")
        await wait_object(client, PDBS, "web", lambda p: (p.get("status") or {}).get("disruptionsAllowed") == 0
                          and p["status"].get("currentHealthy") == 2)

        await set_ready(client, "web-2", True)
        await wait_object(client, PDBS, "web", lambda p: p["status"].get("disruptionsAllowed") == 1)
        await evict(client, "web-0")
        await wait_object(client, "pods", "web-0", lambda p: p is None)
        await wait_object(client, "endpoints", "web", lambda e: ready_ips(e) == ["10.1.0.2", "10.1.0.3"])
        await wait_list(client, SLICES, lambda s: slice_ready(s) == {"web-1": True, "web-2": True},
                        label_selector="kubernetes.io/service-name=web")
        await wait_object(client, PDBS, "web", lambda p: p["status"].get("disruptionsAllowed") == 0
                          and p["status"].get("expectedPods") == 2)
        await wait_object(client, "resourcequotas", "pods", lambda q: q["status"]["used"] == {"pods": "2"})
        await client.create("pods", pod("web-3", {"app": "web"}))

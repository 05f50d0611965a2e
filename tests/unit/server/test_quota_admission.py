"""The server's ResourceQuota admission (kube's plugin/resourcequota): refusals worded as kube's, charges of
``status.used`` that concurrent creates cannot overrun. No controller runs here: each test writes the quota's
status as the resourcequota controller would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import kinformer as ki
from kinformer.server import APIServer

NS = "default"


def pod(name: str, *, cpu: str | None = None, memory_limit: str | None = None,
        deadline: int | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if cpu:
        resources["requests"] = {"cpu": cpu}
    if memory_limit:
        resources["limits"] = {"memory": memory_limit}
    spec: dict[str, Any] = {"containers": [{"name": "web", "image": "nginx", "resources": resources}]}
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"metadata": {"name": name, "namespace": NS}, "spec": spec}


async def make_quota(client: ki.Client, name: str, hard: dict[str, str], used: dict[str, str] | None = None,
                     **spec: Any) -> dict[str, Any]:
    """A quota whose status is as the controller would count an empty namespace (or ``used``)."""
    await client.create("resourcequotas", {"metadata": {"name": name, "namespace": NS},
                                           "spec": {"hard": hard, **spec}})
    status = {"hard": hard, "used": used if used is not None else dict.fromkeys(hard, "0")}
    return dict(await client.patch_status("resourcequotas", name, {"status": status}, namespace=NS))


async def used(client: ki.Client, name: str) -> dict[str, str]:
    return dict((await client.get("resourcequotas", name, namespace=NS))["status"]["used"])


@pytest.fixture
async def client():
    async with APIServer(storage="memory") as server, ki.Client(server.url) as c:
        yield c


async def test_exceeded_quota_is_refused_with_kubes_message(client: ki.Client) -> None:
    await make_quota(client, "q", {"pods": "2"})
    await client.create("pods", pod("a"))
    await client.create("pods", pod("b"))
    assert await used(client, "q") == {"pods": "2"}
    with pytest.raises(ki.Forbidden) as refused:
        await client.create("pods", pod("c"))
    assert refused.value.message == ('pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, '
                                     "limited: pods=2")


async def test_compute_resources_are_summed_and_printed_in_their_units(client: ki.Client) -> None:
    await make_quota(client, "compute", {"requests.cpu": "1", "limits.memory": "1Gi"})
    await client.create("pods", pod("a", cpu="600m", memory_limit="512Mi"))
    assert await used(client, "compute") == {"limits.memory": "512Mi", "requests.cpu": "600m"}
    with pytest.raises(ki.Forbidden, match=r"exceeded quota: compute, requested: requests.cpu=500m, "
                                           r"used: requests.cpu=600m, limited: requests.cpu=1$"):
        await client.create("pods", pod("b", cpu="500m", memory_limit="256Mi"))


async def test_a_tracked_limit_a_container_does_not_name_is_refused(client: ki.Client) -> None:
    await make_quota(client, "q", {"limits.cpu": "2", "pods": "5"})
    with pytest.raises(ki.Forbidden) as refused:
        await client.create("pods", pod("web"))
    assert refused.value.message == 'pods "web" is forbidden: failed quota: q: must specify limits.cpu for: web'


async def test_a_quota_not_yet_counted_refuses_what_it_would_limit(client: ki.Client) -> None:
    await make_quota(client, "q", {"pods": "2", "configmaps": "2"}, used={"configmaps": "0"})
    with pytest.raises(ki.Forbidden, match="status unknown for quota: q, resources: pods"):
        await client.create("pods", pod("a"))


async def test_a_quota_without_status_hard_limits_nothing(client: ki.Client) -> None:
    await client.create("resourcequotas", {"metadata": {"name": "q", "namespace": NS}, "spec": {"hard": {"pods": "0"}}})
    await client.create("pods", pod("a"))


async def test_a_dry_run_is_judged_but_not_charged(client: ki.Client) -> None:
    await make_quota(client, "q", {"pods": "1"})
    await client.create("pods", pod("a"), dry_run=True)
    assert await used(client, "q") == {"pods": "0"}
    await make_quota(client, "full", {"configmaps": "1"}, used={"configmaps": "1"})
    with pytest.raises(ki.Forbidden, match="exceeded quota: full"):
        await client.create("configmaps", {"metadata": {"name": "c", "namespace": NS}}, dry_run=True)


async def test_concurrent_creates_cannot_exceed_the_quota(client: ki.Client) -> None:
    await make_quota(client, "q", {"configmaps": "3", "count/configmaps": "5"})
    results = await asyncio.gather(*(client.create("configmaps", {"metadata": {"name": f"c{i}", "namespace": NS}})
                                     for i in range(12)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, ki.Forbidden)]
    assert len(refused) == 9, results
    assert await used(client, "q") == {"configmaps": "3", "count/configmaps": "3"}


async def test_terminating_scope_counts_only_pods_with_a_deadline(client: ki.Client) -> None:
    await make_quota(client, "terminating", {"pods": "1"}, scopes=["Terminating"])
    await make_quota(client, "not-terminating", {"pods": "1"}, scopes=["NotTerminating"])
    await client.create("pods", pod("long"))
    await client.create("pods", pod("short", deadline=3600))
    assert await used(client, "terminating") == {"pods": "1"}
    assert await used(client, "not-terminating") == {"pods": "1"}
    with pytest.raises(ki.Forbidden, match="exceeded quota: terminating"):
        await client.create("pods", pod("short2", deadline=60))


async def test_best_effort_scope_skips_pods_with_requests(client: ki.Client) -> None:
    await make_quota(client, "besteffort", {"pods": "1"}, scopes=["BestEffort"])
    await client.create("pods", pod("burstable-1", cpu="100m"))
    await client.create("pods", pod("burstable-2", cpu="100m"))
    await client.create("pods", pod("besteffort"))
    assert await used(client, "besteffort") == {"pods": "1"}


async def test_service_node_ports_and_load_balancers_are_charged_on_create_and_update(client: ki.Client) -> None:
    await make_quota(client, "svc", {"services": "5", "services.nodeports": "2", "services.loadbalancers": "1"})
    ports = [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]
    await client.create("services", {"metadata": {"name": "np", "namespace": NS},
                                     "spec": {"type": "NodePort", "ports": ports}})
    assert await used(client, "svc") == {"services": "1", "services.nodeports": "2", "services.loadbalancers": "0"}
    await client.create("services", {"metadata": {"name": "plain", "namespace": NS}, "spec": {"ports": ports[:1]}})
    with pytest.raises(ki.Forbidden, match=r"requested: services\.nodeports=1, used: services\.nodeports=2"):
        await client.patch("services", "plain", {"spec": {"type": "NodePort"}}, namespace=NS)


async def test_count_of_any_resource_by_group(client: ki.Client) -> None:
    await make_quota(client, "q", {"count/deployments.apps": "1"})
    deploy = {"metadata": {"name": "d1", "namespace": NS},
              "spec": {"selector": {"matchLabels": {"app": "d"}},
                       "template": {"metadata": {"labels": {"app": "d"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    await client.create("deployments.apps", deploy)
    with pytest.raises(ki.Forbidden) as refused:
        await client.create("deployments.apps", {**deploy, "metadata": {"name": "d2", "namespace": NS}})
    assert refused.value.message.startswith('deployments.apps "d2" is forbidden: exceeded quota: q, '
                                            "requested: count/deployments.apps=1")

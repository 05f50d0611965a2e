"""The resourcequota controller with the server's admission, named after kube's e2e
(test/e2e/apimachinery/resource_quota.go). The test plays the kubelet where a pod must finish."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from _hsvc_helpers import NS, cluster_client

import kinformer as ki


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with cluster_client("resourcequota", resource_quota_sync_period=1.0) as c:
        yield c


def pod(name: str, requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "pause", "image": "pause", "resources": resources}], **spec}}


async def create_quota(client: ki.Client, name: str, hard: dict[str, str], **spec: Any) -> None:
    await client.create("resourcequotas", {"metadata": {"name": name, "namespace": NS},
                                           "spec": {"hard": hard, **spec}})


async def wait_used(client: ki.Client, name: str, check: Callable[[dict[str, str]], bool] | dict[str, str],
                    ) -> dict[str, str]:
    """Wait until the quota's status.used satisfies ``check`` (or equals it, for a dict)."""
    test = check if callable(check) else (lambda used: used == check)
    q = await ki.wait_for(client, "resourcequotas", name,
                          lambda o: o is not None and test(dict((o.get("status") or {}).get("used") or {})),
                          namespace=NS, timeout=20)
    return dict(q["status"]["used"])


async def test_should_create_a_resourcequota_and_ensure_its_status_is_promptly_calculated(client: ki.Client) -> None:
    hard = {"pods": "5", "services": "10", "secrets": "10", "configmaps": "10", "resourcequotas": "1"}
    await create_quota(client, "test-quota", hard)
    used = await wait_used(client, "test-quota", lambda u: set(u) == set(hard))
    assert used == {"pods": "0", "services": "1", "secrets": "0", "configmaps": "1", "resourcequotas": "1"}
    q = await client.get("resourcequotas", "test-quota", namespace=NS)
    assert q["status"]["hard"] == hard


async def test_should_create_a_resourcequota_and_capture_the_life_of_a_pod(client: ki.Client) -> None:
    hard = {"pods": "2", "requests.cpu": "1", "requests.memory": "500Mi", "limits.cpu": "2", "cpu": "1"}
    await create_quota(client, "test-quota", hard)
    await wait_used(client, "test-quota", lambda u: set(u) == set(hard))
    requests, limits = {"cpu": "500m", "memory": "252Mi"}, {"cpu": "1", "memory": "400Mi"}
    await client.create("pods", pod("test-pod", requests, limits))
    await wait_used(client, "test-quota", {"pods": "1", "requests.cpu": "500m", "requests.memory": "252Mi",
                                           "limits.cpu": "1", "cpu": "500m"})
    with pytest.raises(ki.Forbidden, match=r'pods "fail-pod" is forbidden: exceeded quota: test-quota, '
                                           r"requested: cpu=600m,requests.cpu=600m, used: cpu=500m,"
                                           r"requests.cpu=500m, limited: cpu=1,requests.cpu=1"):
        await client.create("pods", pod("fail-pod", {"cpu": "600m", "memory": "100Mi"}, limits))
    await client.delete("pods", "test-pod", namespace=NS, grace_period_seconds=0)
    await wait_used(client, "test-quota", {"pods": "0", "requests.cpu": "0", "requests.memory": "0",
                                           "limits.cpu": "0", "cpu": "0"})


async def test_a_finished_pod_releases_its_usage(client: ki.Client) -> None:
    await create_quota(client, "q", {"pods": "1"})
    await wait_used(client, "q", {"pods": "0"})
    await client.create("pods", pod("job-pod"))
    await wait_used(client, "q", {"pods": "1"})
    await client.patch_status("pods", "job-pod", {"status": {"phase": "Succeeded"}}, namespace=NS)  # the kubelet
    await wait_used(client, "q", {"pods": "0"})
    await client.create("pods", pod("next-pod"))


async def test_should_create_a_resourcequota_and_capture_the_life_of_a_service(client: ki.Client) -> None:
    hard = {"services": "10", "services.nodeports": "2", "services.loadbalancers": "1"}
    await create_quota(client, "test-quota", hard)
    await wait_used(client, "test-quota", lambda u: set(u) == set(hard))
    ports = [{"port": 80}]
    await client.create("services", {"metadata": {"name": "np", "namespace": NS},
                                     "spec": {"type": "NodePort", "ports": ports}})
    await client.create("services", {"metadata": {"name": "lb", "namespace": NS},
                                     "spec": {"type": "LoadBalancer", "ports": ports}})
    await wait_used(client, "test-quota", {"services": "3", "services.nodeports": "2", "services.loadbalancers": "1"})
    with pytest.raises(ki.Forbidden, match=r"exceeded quota: test-quota, requested: services\.loadbalancers=1,"):
        await client.create("services", {"metadata": {"name": "lb2", "namespace": NS},
                                         "spec": {"type": "LoadBalancer", "ports": ports}})
    await client.delete("services", "np", namespace=NS)
    await client.delete("services", "lb", namespace=NS)
    await wait_used(client, "test-quota", {"services": "1", "services.nodeports": "0", "services.loadbalancers": "0"})


@pytest.mark.parametrize("resource", ["configmaps", "secrets"])
async def test_should_create_a_resourcequota_and_capture_the_life_of_a_configmap_or_secret(
        client: ki.Client, resource: str) -> None:
    await create_quota(client, "test-quota", {resource: "10"})
    base = int((await wait_used(client, "test-quota", lambda u: resource in u))[resource])
    await client.create(resource, {"metadata": {"name": "thing", "namespace": NS}})
    await wait_used(client, "test-quota", {resource: str(base + 1)})
    await client.delete(resource, "thing", namespace=NS)
    await wait_used(client, "test-quota", {resource: str(base)})


async def test_should_create_a_resourcequota_and_capture_the_life_of_a_persistent_volume_claim(
        client: ki.Client) -> None:
    hard = {"persistentvolumeclaims": "5", "requests.storage": "5Gi",
            "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1"}
    await create_quota(client, "test-quota", hard)
    await wait_used(client, "test-quota", lambda u: set(u) == set(hard))
    await client.create("persistentvolumeclaims", {
        "metadata": {"name": "claim", "namespace": NS},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gold",
                 "resources": {"requests": {"storage": "1Gi"}}}})
    await wait_used(client, "test-quota", {"persistentvolumeclaims": "1", "requests.storage": "1Gi",
                                           "gold.storageclass.storage.k8s.io/persistentvolumeclaims": "1"})


async def test_should_create_a_resourcequota_and_capture_the_life_of_a_replica_set(client: ki.Client) -> None:
    await create_quota(client, "test-quota", {"count/replicasets.apps": "5"})
    await wait_used(client, "test-quota", {"count/replicasets.apps": "0"})
    await client.create("replicasets.apps", {
        "metadata": {"name": "rs", "namespace": NS},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    await wait_used(client, "test-quota", {"count/replicasets.apps": "1"})
    await client.delete("replicasets.apps", "rs", namespace=NS)
    await wait_used(client, "test-quota", {"count/replicasets.apps": "0"})


async def test_should_verify_resourcequota_with_terminating_scopes(client: ki.Client) -> None:
    hard = {"pods": "1", "requests.memory": "500Mi"}
    await create_quota(client, "quota-terminating", hard, scopes=["Terminating"])
    await create_quota(client, "quota-not-terminating", hard, scopes=["NotTerminating"])
    await wait_used(client, "quota-terminating", {"pods": "0", "requests.memory": "0"})
    await wait_used(client, "quota-not-terminating", {"pods": "0", "requests.memory": "0"})
    mem = {"memory": "200Mi"}
    await client.create("pods", pod("long", mem, mem))
    await wait_used(client, "quota-not-terminating", {"pods": "1", "requests.memory": "200Mi"})
    await wait_used(client, "quota-terminating", {"pods": "0", "requests.memory": "0"})
    await client.create("pods", pod("short", mem, mem, activeDeadlineSeconds=3600))
    await wait_used(client, "quota-terminating", {"pods": "1", "requests.memory": "200Mi"})
    with pytest.raises(ki.Forbidden, match="exceeded quota: quota-terminating"):
        await client.create("pods", pod("short-2", mem, mem, activeDeadlineSeconds=3600))
    await client.delete("pods", "short", namespace=NS, grace_period_seconds=0)
    await wait_used(client, "quota-terminating", {"pods": "0", "requests.memory": "0"})


async def test_should_verify_resourcequota_with_best_effort_scope(client: ki.Client) -> None:
    await create_quota(client, "quota-besteffort", {"pods": "5"}, scopes=["BestEffort"])
    await create_quota(client, "quota-not-besteffort", {"pods": "5"}, scopes=["NotBestEffort"])
    await client.create("pods", pod("besteffort"))
    await client.create("pods", pod("burstable", {"cpu": "100m"}))
    await wait_used(client, "quota-besteffort", {"pods": "1"})
    await wait_used(client, "quota-not-besteffort", {"pods": "1"})


async def test_should_verify_resourcequota_with_a_priority_class_scope_selector(client: ki.Client) -> None:
    selector = {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["pclass1"]}]}
    await create_quota(client, "quota-priorityclass", {"pods": "1"}, scopeSelector=selector)
    await client.create("priorityclasses.scheduling.k8s.io",
                        {"metadata": {"name": "pclass1"}, "value": 100})
    await wait_used(client, "quota-priorityclass", {"pods": "0"})
    await client.create("pods", pod("other"))
    await client.create("pods", pod("prio", priorityClassName="pclass1"))
    await wait_used(client, "quota-priorityclass", {"pods": "1"})
    with pytest.raises(ki.Forbidden, match="exceeded quota: quota-priorityclass"):
        await client.create("pods", pod("prio-2", priorityClassName="pclass1"))


async def test_should_be_able_to_update_and_delete_resourcequota(client: ki.Client) -> None:
    await create_quota(client, "test-quota", {"pods": "1", "secrets": "2"})
    await wait_used(client, "test-quota", lambda u: set(u) == {"pods", "secrets"})
    await client.patch("resourcequotas", "test-quota", {"spec": {"hard": {"pods": "2", "secrets": None}}},
                       namespace=NS)
    q = await ki.wait_for(client, "resourcequotas", "test-quota",
                          lambda o: (o.get("status") or {}).get("hard") == {"pods": "2"}, namespace=NS, timeout=20)
    assert q["status"]["used"] == {"pods": "0"}


async def test_a_resource_no_informer_watches_is_recounted_every_sync_period(client: ki.Client) -> None:
    await create_quota(client, "leases", {"count/leases.coordination.k8s.io": "2"})
    await wait_used(client, "leases", {"count/leases.coordination.k8s.io": "0"})
    await client.create("leases.coordination.k8s.io", {"metadata": {"name": "l1", "namespace": NS}, "spec": {}})
    await wait_used(client, "leases", {"count/leases.coordination.k8s.io": "1"})  # charged by admission
    await client.delete("leases.coordination.k8s.io", "l1", namespace=NS)
    await wait_used(client, "leases", {"count/leases.coordination.k8s.io": "0"})  # the periodic recount (1 s)


async def test_a_count_of_a_resource_the_server_does_not_serve_has_no_usage(client: ki.Client) -> None:
    await create_quota(client, "q", {"count/widgets.example.com": "1", "pods": "1"})
    q = await ki.wait_for(client, "resourcequotas", "q", lambda o: "used" in (o.get("status") or {}),
                          namespace=NS, timeout=20)
    assert q["status"]["used"] == {"pods": "0"}
    assert q["status"]["hard"] == {"count/widgets.example.com": "1", "pods": "1"}


def test_a_pod_update_is_weighed_only_in_a_namespace_with_a_quota() -> None:
    """kube's replenishment returns early when the namespace has no quota: a pod's status change costs the
    quota controller nothing there (its cost is not computed), and is still weighed where a quota exists."""
    from kinformer.clock import REAL_CLOCK
    from kinformer.cluster.controllers.resourcequota import CostChanged

    quota_namespaces = {"with-quota"}
    weighed: list[str] = []

    def has_quota(namespace: str) -> bool:
        weighed.append(namespace)
        return namespace in quota_namespaces

    changed = CostChanged("pods", "", REAL_CLOCK, has_quota)

    def pod(namespace: str, phase: str) -> dict[str, Any]:
        return {"metadata": {"name": "p", "namespace": namespace},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": phase}}

    assert changed.update(pod("no-quota", "Running"), pod("no-quota", "Succeeded")) is False
    assert changed.update(pod("with-quota", "Running"), pod("with-quota", "Succeeded")) is True
    assert changed.update(pod("with-quota", "Pending"), pod("with-quota", "Running")) is False
    assert weighed == ["no-quota", "with-quota", "with-quota"]

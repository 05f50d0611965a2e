"""Storage object in-use protection: finalizers at create; a claim outlives the scheduled pods using it."""

from __future__ import annotations

from kinformer.server.admission.storageprotection import PV_FINALIZER, PVC_FINALIZER, claim_in_use
from testlib import call, wait_until

NS = "/api/v1/namespaces/default"
CLAIM = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}


def pod(name: str, claim: str) -> dict:
    return {"metadata": {"name": name}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}


async def _gone(http, path: str) -> bool:
    return (await call(http, "GET", path))[0] == 404


async def test_a_claim_is_protected_while_a_scheduled_pod_uses_it(http):
    code, created = await call(http, "POST", f"{NS}/persistentvolumeclaims", CLAIM)
    assert code == 201 and created["metadata"]["finalizers"] == [PVC_FINALIZER]
    assert (await call(http, "POST", f"{NS}/pods", pod("user", "data")))[0] == 201
    binding = {"metadata": {"name": "user"}, "target": {"kind": "Node", "name": "node-1"}}
    assert (await call(http, "POST", f"{NS}/pods/user/binding", binding))[0] == 201
    code, deleted = await call(http, "DELETE", f"{NS}/persistentvolumeclaims/data")
    assert code == 200 and deleted["metadata"]["deletionTimestamp"]
    code, terminating = await call(http, "GET", f"{NS}/persistentvolumeclaims/data")
    assert code == 200 and terminating["metadata"]["finalizers"] == [PVC_FINALIZER]
    assert (await call(http, "DELETE", f"{NS}/pods/user"))[0] == 200
    await wait_until(lambda: _gone(http, f"{NS}/persistentvolumeclaims/data"), what="the claim released")


async def test_an_unused_claim_and_an_unbound_volume_go_once_deleted(http):
    assert (await call(http, "POST", f"{NS}/persistentvolumeclaims", CLAIM))[0] == 201
    assert (await call(http, "POST", f"{NS}/pods", pod("pending", "data")))[0] == 201  # never scheduled
    volume = {"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                                    "hostPath": {"path": "/tmp/pv1"}}}
    code, created = await call(http, "POST", "/api/v1/persistentvolumes", volume)
    assert code == 201 and created["metadata"]["finalizers"] == [PV_FINALIZER]
    assert (await call(http, "DELETE", f"{NS}/persistentvolumeclaims/data"))[0] == 200
    assert (await call(http, "DELETE", "/api/v1/persistentvolumes/pv1"))[0] == 200
    await wait_until(lambda: _gone(http, f"{NS}/persistentvolumeclaims/data"), what="the claim gone")
    await wait_until(lambda: _gone(http, "/api/v1/persistentvolumes/pv1"), what="the volume gone")


def test_which_pods_hold_a_claim() -> None:
    scheduled = {"metadata": {"name": "web"}, "spec": {"nodeName": "n", "volumes": [
        {"name": "cache", "ephemeral": {"volumeClaimTemplate": {}}}, {"name": "d", "persistentVolumeClaim": {
            "claimName": "data"}}]}}
    assert claim_in_use("data", [scheduled]) and claim_in_use("web-cache", [scheduled])
    assert not claim_in_use("other", [scheduled])
    assert not claim_in_use("data", [{**scheduled, "spec": {**scheduled["spec"], "nodeName": ""}}])
    ended = {**scheduled, "status": {"phase": "Succeeded"}}
    assert claim_in_use("data", [ended]) and not claim_in_use("web-cache", [ended])

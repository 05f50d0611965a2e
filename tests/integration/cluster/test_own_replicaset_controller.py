"""A choice of which controllers run: a user's own ReplicaSet controller beside the built-in deployment controller,
the scheduler and simulated nodes (``APIServer(controllers=["deployment", "scheduler"], nodes=1)``).

The test's controller is a small kinformer Manager reconciler: it keeps ``spec.replicas`` pods named
``<replicaset>-<i>`` from the template and reports their counts in the ReplicaSet's status. The Deployment
becomes Available through it (the built-in replicaset controller never runs: every pod carries the mark the
test's controller puts on it)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import pytest

import kinformer as ki
from cluster_helpers import is_ready, wait_for_object
from kinformer.server import APIServer

pytestmark = pytest.mark.timeout(120)
NS = "default"
MADE_BY = "example.com/made-by"
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


class OwnReplicaSets(ki.ObjectReconciler):
    """A user's ReplicaSet controller: pods ``<rs>-0`` .. ``<rs>-<replicas-1>`` from the template, and the status
    counts the deployment controller reads (replicas, readyReplicas, availableReplicas, observedGeneration)."""

    async def reconcile(self, rs: Any) -> ki.Result:
        meta = rs["metadata"]
        if meta.get("deletionTimestamp"):
            return ki.Result()
        replicas = rs["spec"].get("replicas", 1)
        for i in range(replicas):
            with contextlib.suppress(ki.AlreadyExists):
                await self.client.create("pods", self._pod(rs, i), namespace=meta["namespace"])
        pods = [p for p in (await self.client.list("pods", namespace=meta["namespace"])).items
                if any(ref.get("controller") and ref["uid"] == meta["uid"]
                       for ref in p["metadata"].get("ownerReferences") or ())]
        ready = sum(is_ready(p) for p in pods)
        await self.client.patch_status("replicasets", meta["name"], {"status": {
            "replicas": len(pods), "fullyLabeledReplicas": len(pods), "readyReplicas": ready,
            "availableReplicas": ready, "observedGeneration": meta["generation"]}}, namespace=meta["namespace"])
        return ki.Result()

    @staticmethod
    def _pod(rs: Mapping[str, Any], i: int) -> dict[str, Any]:
        template = rs["spec"]["template"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{rs['metadata']['name']}-{i}", "namespace": rs["metadata"]["namespace"],
                            "labels": dict(template["metadata"]["labels"]),
                            "annotations": {MADE_BY: "own-replicaset-controller"}},
               "spec": dict(template["spec"])}
        ki.set_controller_reference(rs, pod)
        return pod


def _available(deploy: Any) -> bool:
    status = deploy.get("status") or {}
    return status.get("availableReplicas") == 3 and any(
        c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions") or ())


async def test_deployment_becomes_available_through_a_users_own_replicaset_controller() -> None:
    async with APIServer(controllers=["deployment", "scheduler"], nodes=1) as server, \
            ki.Client(server.url) as client:
        manager = ki.Manager(client)
        manager.controller(OwnReplicaSets(), name="own-replicaset").for_("replicasets").owns("pods")
        run = asyncio.create_task(manager.run())
        try:
            await client.create("deployments", DEPLOYMENT, namespace=NS)
            deploy = await wait_for_object(client, "deployments", "web", _available, namespace=NS, timeout=60)
            assert deploy["status"]["updatedReplicas"] == 3
            pods = (await client.list("pods", NS, label_selector="app=web")).items
            assert len(pods) == 3
            assert all(p["metadata"]["annotations"].get(MADE_BY) for p in pods), "the built-in replicaset ran"
            assert all(p["spec"]["nodeName"] == "node-1" and is_ready(p) for p in pods)
        finally:
            manager.stop()
            await run

"""The demo's sample-controller: the Foo CRD, the Foo and Deployment-status reconcilers, injected faults."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kinformer.meta import object_key

GROUP, VERSION = "samplecontroller.k8s.io", "v1alpha1"
FOOS = f"{GROUP}/{VERSION}/foos"
DEPLOYMENTS = "apps/v1/deployments"
NAMESPACES = ("demo-a", "demo-b")

FOO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    # a *.k8s.io group needs kube's API-review annotation; "unapproved, ..." says this one had none
    "metadata": {"name": f"foos.{GROUP}",
                 "annotations": {"api-approved.kubernetes.io": "unapproved, the kinformer demo's sample API"}},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "deploymentName": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 0}}},
                    "status": {"type": "object", "properties": {
                        "availableReplicas": {"type": "integer"}}},
                }}},
        }],
    },
}


@dataclass
class Faults:
    """Which faults fired, for the live view and the summary."""

    counts: Counter[str] = field(default_factory=Counter)
    fail_first: dict[str, int] = field(default_factory=dict)  # key -> failures still to inject

    def should_fail(self, key: str) -> bool:
        left = self.fail_first.get(key, 0)
        if left > 0:
            self.fail_first[key] = left - 1
            self.counts["reconcile failures"] += 1
            return True
        return False


class FooReconciler:
    """sample-controller's syncHandler: Foo -> owned Deployment, status copied back."""

    def __init__(self, client: Any, foos: Any, deployments: Any, faults: Faults) -> None:
        self.client, self.foos, self.deployments, self.faults = client, foos, deployments, faults

    async def reconcile(self, request: Any) -> Any:
        from kinformer.controller import Result, TerminalError
        from kinformer.errors import AlreadyExists

        foo = self.foos.indexer.get_by_key(request.key)
        if foo is None:
            return Result()  # deleted: the server's garbage collector removes its Deployment
        spec = foo.get("spec") or {}
        name = spec.get("deploymentName")
        if not name:
            raise TerminalError(f"{request}: spec.deploymentName must be set")
        if self.faults.should_fail(request.key):
            raise RuntimeError(f"injected failure reconciling {request}")
        replicas = int(spec.get("replicas") or 0)
        dep = self.deployments.indexer.get_by_key(object_key(request.namespace, name))
        if dep is None:
            with contextlib.suppress(AlreadyExists):
                await self.client.create(DEPLOYMENTS, new_deployment(foo, name, replicas), namespace=request.namespace)
            return Result()
        if not owned_by(dep, foo):
            raise TerminalError(f'Resource "{name}" already exists and is not managed by Foo')
        if (dep.get("spec") or {}).get("replicas") != replicas:
            await self.client.patch(DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace=request.namespace)
        available = ((dep.get("status") or {}).get("availableReplicas")) or 0
        if ((foo.get("status") or {}).get("availableReplicas")) != available:
            await self.client.patch_status(FOOS, request.name, {"status": {"availableReplicas": available}},
                                           namespace=request.namespace)
        return Result()


class DeploymentStatusReconciler:
    """Stands in for kube-controller-manager and kubelets: reports a Deployment's replicas as available."""

    def __init__(self, client: Any, deployments: Any) -> None:
        self.client, self.deployments = client, deployments

    async def reconcile(self, request: Any) -> None:
        dep = self.deployments.indexer.get_by_key(request.key)
        if dep is None:
            return
        replicas = (dep.get("spec") or {}).get("replicas") or 0
        status = dep.get("status") or {}
        if status.get("availableReplicas") != replicas or status.get("replicas") != replicas:
            await self.client.patch_status(DEPLOYMENTS, request.name, {"status": {
                "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                "updatedReplicas": replicas, "observedGeneration": dep["metadata"].get("generation")}},
                namespace=request.namespace)


def new_deployment(foo: Any, name: str, replicas: int) -> dict[str, Any]:
    meta = foo["metadata"]
    labels = {"app": "nginx", "controller": meta["name"]}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels, "ownerReferences": [{
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Foo", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}},
    }


def owned_by(dep: Any, foo: Any) -> bool:
    uid = foo["metadata"].get("uid")
    return any(ref.get("uid") == uid and ref.get("controller") for ref in dep["metadata"].get("ownerReferences") or ())

"""Owner references: one controller per object, scope rules, and the garbage collector following them."""

from __future__ import annotations

import pytest

import kinformer as ki
from kinformer.controller.ownership import AlreadyOwnedError, set_owner_reference
from testlib import configmap, wait_until

NS = "default"


async def test_controller_reference_and_owner_conflict(kube_client) -> None:
    owner = await kube_client.create("configmaps", configmap("owner"), namespace=NS)
    other = await kube_client.create("configmaps", configmap("other"), namespace=NS)
    secret = {"metadata": {"name": "s", "namespace": NS}}
    ki.set_controller_reference(owner, secret)
    ki.set_controller_reference(owner, secret)  # the same owner again: updated in place, not duplicated
    assert secret["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    with pytest.raises(AlreadyOwnedError, match=r"already controlled by ConfigMap 'owner'.*'other'"):
        ki.set_controller_reference(other, secret)
    set_owner_reference(other, secret)  # a plain (non-controller) owner may be added
    assert [r["name"] for r in secret["metadata"]["ownerReferences"]] == ["owner", "other"]
    created = await kube_client.create("secrets", secret, namespace=NS)
    assert len(created["metadata"]["ownerReferences"]) == 2
    # the garbage collector deletes the secret once its owners are gone
    await kube_client.delete("configmaps", "owner", namespace=NS)
    await kube_client.delete("configmaps", "other", namespace=NS)

    async def collected() -> bool:
        try:
            await kube_client.get("secrets", "s", namespace=NS)
        except ki.NotFound:
            return True
        return False

    await wait_until(collected, what="owned secret garbage-collected")


async def test_scope_rules_and_incomplete_owners(kube_client) -> None:
    owner = await kube_client.create("configmaps", configmap("owner"), namespace=NS)
    with pytest.raises(ValueError, match="cross-namespace"):
        ki.set_controller_reference(owner, {"metadata": {"name": "x", "namespace": "kube-system"}})
    with pytest.raises(ValueError, match="cluster-scoped"):
        ki.set_controller_reference(owner, {"metadata": {"name": "x"}})
    with pytest.raises(ValueError, match="uid"):
        ki.set_controller_reference(configmap("skeleton"), {"metadata": {"name": "x", "namespace": NS}})
    with pytest.raises(TypeError, match="mutable"):
        ki.set_controller_reference(owner, owner)
    # a cluster-scoped owner may own a namespaced object
    node_ns = await kube_client.get("namespaces", NS)
    obj = {"metadata": {"name": "x", "namespace": NS}}
    ki.set_controller_reference(node_ns, obj)
    assert obj["metadata"]["ownerReferences"][0]["kind"] == "Namespace"

"""create_or_update / create_or_patch against the embedded server: outcomes, conflicts, status, Secrets."""

from __future__ import annotations

import base64

import pytest

import kinformer as ki
from kinformer.controller.mutate import merge_patch_diff
from testlib import configmap

NS = "default"


def _set_v(value: str):
    def mutate(cm: dict) -> None:
        cm.setdefault("data", {})["v"] = value
        cm["metadata"].setdefault("labels", {})["app"] = "web"
    return mutate


@pytest.mark.parametrize("helper", [ki.create_or_update, ki.create_or_patch])
async def test_created_unchanged_updated(kube_client, helper) -> None:
    desired = {"metadata": {"name": "cm", "namespace": NS}}
    op, obj = await helper(kube_client, "configmaps", desired, _set_v("1"))
    assert op == "created" and obj["data"] == {"v": "1"} and obj["kind"] == "ConfigMap"
    rv = obj["metadata"]["resourceVersion"]
    op, obj = await helper(kube_client, "configmaps", desired, _set_v("1"))
    assert op == "unchanged" and obj["metadata"]["resourceVersion"] == rv
    # fields mutate does not touch are kept
    await kube_client.patch("configmaps", "cm", {"data": {"other": "x"}}, namespace=NS)
    op, obj = await helper(kube_client, "configmaps", desired, _set_v("2"))
    assert op == "updated" and obj["data"] == {"v": "2", "other": "x"}


def _racing_mutate(client) -> tuple[list[int], object]:
    """A mutate that, on its first call, lets someone else write between our read and our write."""
    calls = [0]

    async def mutate(cm: dict) -> None:
        calls[0] += 1
        if calls[0] == 1:
            await client.patch("configmaps", "cm", {"data": {"theirs": "1"}}, namespace=NS)
        cm["data"]["v"] = f"mine{calls[0]}"

    return calls, mutate


async def test_update_retries_on_conflict(kube_client) -> None:
    await kube_client.create("configmaps", configmap("cm", v="0"), namespace=NS)
    calls, mutate = _racing_mutate(kube_client)
    op, obj = await ki.create_or_update(kube_client, "configmaps", configmap("cm"), mutate)
    assert op == "updated" and calls == [2] and obj["data"] == {"v": "mine2", "theirs": "1"}


async def test_patch_with_optimistic_lock_retries_and_without_merges(kube_client) -> None:
    await kube_client.create("configmaps", configmap("cm", v="0"), namespace=NS)
    calls, mutate = _racing_mutate(kube_client)
    op, obj = await ki.create_or_patch(kube_client, "configmaps", configmap("cm"), mutate, optimistic_lock=True)
    assert op == "updated" and calls == [2] and obj["data"] == {"v": "mine2", "theirs": "1"}
    await kube_client.patch("configmaps", "cm", {"data": {"theirs": None}}, namespace=NS)
    calls, mutate = _racing_mutate(kube_client)
    op, obj = await ki.create_or_patch(kube_client, "configmaps", configmap("cm"), mutate)
    assert op == "updated" and calls == [1] and obj["data"] == {"v": "mine1", "theirs": "1"}


async def test_create_races_become_updates(kube_client) -> None:
    async def mutate(cm: dict) -> None:
        if "resourceVersion" not in cm["metadata"]:  # the create path: someone creates it first
            await kube_client.create("configmaps", configmap("cm", v="theirs"), namespace=NS)
        cm["data"] = {"v": "mine"}

    op, obj = await ki.create_or_update(kube_client, "configmaps", {"metadata": {"name": "cm", "namespace": NS}},
                                        mutate)
    assert op == "updated" and obj["data"] == {"v": "mine"}


async def test_patch_status_goes_through_the_subresource(kube_client) -> None:
    desired = {"metadata": {"name": "default"}}

    def mutate(ns: dict) -> None:
        ki.set_condition(ns.setdefault("status", {}), type="Example", status="True", reason="Tested")

    op, obj = await ki.create_or_patch(kube_client, "namespaces", desired, mutate)
    assert op == "updated"
    assert any(c["type"] == "Example" for c in obj["status"]["conditions"])
    op, _ = await ki.create_or_patch(kube_client, "namespaces", desired, mutate)
    assert op == "unchanged"


async def test_secret_string_data_compares_as_data(kube_client) -> None:
    def mutate(secret: dict) -> None:
        secret["stringData"] = {"k": "v"}

    desired = {"metadata": {"name": "s", "namespace": NS}}
    op, obj = await ki.create_or_update(kube_client, "secrets", desired, mutate)
    assert op == "created" and obj["data"] == {"k": base64.b64encode(b"v").decode()}
    assert (await ki.create_or_update(kube_client, "secrets", desired, mutate))[0] == "unchanged"


async def test_mutate_must_keep_the_name(kube_client) -> None:
    def rename(cm: dict) -> None:
        cm["metadata"]["name"] = "other"

    with pytest.raises(ValueError, match="name or namespace"):
        await ki.create_or_update(kube_client, "configmaps", configmap("cm"), rename)


def test_merge_patch_diff() -> None:
    before = {"a": 1, "b": {"c": 1, "d": [1]}, "gone": 1}
    after = {"a": 1, "b": {"c": 2, "d": [1, 2]}, "new": {"x": 1}}
    assert merge_patch_diff(before, after) == {"gone": None, "b": {"c": 2, "d": [1, 2]}, "new": {"x": 1}}
    assert merge_patch_diff(after, after) == {}

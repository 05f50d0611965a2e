"""Testing a controller with kinformer's pytest fixtures (envtest's role): ``kube_client`` is a client of a fresh
embedded API server per test, ``kube_client_as`` a client acting as a user or ServiceAccount under RBAC.

    pytest examples/testing          # needs pytest-asyncio: pip install 'kinformer[testing]'
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import kinformer as ki

sys.path.insert(0, str(Path(__file__).parents[1]))  # the example under test lives one directory up
import configmap_to_secret


async def copied(client: ki.Client, name: str) -> ki.Object | None:
    return await ki.wait_for(client, "secrets", name, lambda s: s is not None, namespace="default", timeout=30)


@pytest.mark.asyncio
async def test_a_labelled_configmap_is_copied_into_an_owned_secret(kube_client: ki.Client) -> None:
    mgr = configmap_to_secret.manager(kube_client)
    running = asyncio.create_task(mgr.run())
    try:
        cm = await kube_client.create("configmaps", {"metadata": {"name": "app", "labels": {"copy": "secret"}},
                                                     "data": {"k": "v"}}, namespace="default")
        secret = await copied(kube_client, "app")
        assert secret is not None and secret["metadata"]["ownerReferences"][0]["uid"] == cm["metadata"]["uid"]
    finally:
        mgr.stop()
        await running


@pytest.mark.asyncio
async def test_an_unlabelled_configmap_is_left_alone(kube_client: ki.Client) -> None:
    mgr = configmap_to_secret.manager(kube_client)
    running = asyncio.create_task(mgr.run())
    try:
        await kube_client.create("configmaps", {"metadata": {"name": "plain"}}, namespace="default")
        await kube_client.create("configmaps", {"metadata": {"name": "marker", "labels": {"copy": "secret"}}},
                                 namespace="default")
        await copied(kube_client, "marker")  # reconciled after "plain" was seen (one informer, in order)
        with pytest.raises(ki.NotFound):
            await kube_client.get("secrets", "plain", namespace="default")
    finally:
        mgr.stop()
        await running


@pytest.mark.asyncio
async def test_a_user_without_rights_cannot_read_the_copies(kube_client_as: object) -> None:
    assert callable(kube_client_as)
    mallory = await kube_client_as("mallory")
    with pytest.raises(ki.Forbidden):
        await mallory.list("secrets", namespace="default")

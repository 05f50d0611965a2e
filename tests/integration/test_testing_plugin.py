"""The pytest plugin's identity fixture: ``kube_client_as`` hands out clients that RBAC treats as the named
user or ServiceAccount, and nothing more."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.errors import Forbidden
from kinformer.testing.plugin import client_as

RBAC = "rbac.authorization.k8s.io"


async def test_a_user_client_has_its_groups_and_only_their_rights(kube_client: Any, kube_client_as: Any) -> None:
    alice = await kube_client_as("alice", groups=["dev"])
    whoami = await alice.request_bytes("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                       data=b"{}", headers={"Content-Type": "application/json"})
    assert b'"username":"alice"' in whoami and b'"groups":["dev","system:authenticated"]' in whoami
    with pytest.raises(Forbidden, match='User "alice" cannot list resource "configmaps"'):
        await alice.list("configmaps", namespace="default")
    await kube_client.create("rolebindings", {
        "metadata": {"name": "dev-view"}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": "dev"}]}, namespace="default")
    await alice.list("configmaps", namespace="default")
    with pytest.raises(Forbidden):
        await alice.create("configmaps", {"metadata": {"name": "x"}}, namespace="default")


async def test_a_service_account_client_uses_a_token_request(kube_server: Any, kube_client_as: Any) -> None:
    bot = await kube_client_as(serviceaccount="default/bot")
    again = await kube_client_as(serviceaccount="default/bot")  # the account exists now: reused
    for client in (bot, again):
        body = await client.request_bytes("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                          data=b"{}", headers={"Content-Type": "application/json"})
        assert b'"username":"system:serviceaccount:default:bot"' in body
    with pytest.raises(ValueError, match="namespace/name"):
        await client_as(kube_server, serviceaccount="bot")
    with pytest.raises(ValueError, match="a user or a serviceaccount"):
        await client_as(kube_server, "alice", serviceaccount="default/bot")

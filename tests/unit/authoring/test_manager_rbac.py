"""The RBAC a Manager needs, derived offline as controller-gen derives it from markers: reads for what it watches,
writes for what it owns or declares, status/finalizers subresources, events, metrics reviews, leases; no more."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import kinformer as ki
from kinformer.authoring.rbac import rbac_documents
from kinformer.cli.offline import OfflineResolver

FOO_CRD = ki.crd(dict, group="example.com", version="v1", kind="Foo")
READ = ["get", "list", "watch"]
ALL = [*READ, "create", "update", "patch", "delete"]


@pytest.fixture
async def client() -> AsyncIterator[ki.Client]:
    async with ki.Client("https://never-contacted.invalid") as c:
        yield c


def noop(_: ki.Request) -> None:
    return None


def rules(mgr: ki.Manager) -> dict[tuple[str, str], list[str]]:
    role = rbac_documents(mgr, OfflineResolver([FOO_CRD]))[0]
    assert role["kind"] == "ClusterRole"
    return {(group, res): rule["verbs"] for rule in role["rules"]
            for group in rule["apiGroups"] for res in rule["resources"]}


def test_for_owns_and_watches_read_and_owned_resources_are_written(client: ki.Client) -> None:
    mgr = ki.Manager(client, metrics_secure=False)
    mgr.controller(noop).for_("foos.example.com").owns("deployments.apps").watches("cm", mapper=lambda o: [])
    assert rules(mgr) == {("example.com", "foos"): READ, ("apps", "deployments"): ALL, ("", "configmaps"): READ,
                          ("example.com", "foos/finalizers"): ["update"]}


def test_declared_status_finalizer_and_writes(client: ki.Client) -> None:
    mgr = ki.Manager(client, metrics_secure=False)
    mgr.controller(noop).for_("Foo").writes_status().finalizer().writes("secrets", ("create", "delete"))
    assert rules(mgr) == {("example.com", "foos"): [*READ, "update", "patch"],
                          ("example.com", "foos/status"): ["get", "update", "patch"],
                          ("example.com", "foos/finalizers"): ["update"], ("", "secrets"): ["create", "delete"]}


def test_event_recorders_and_secure_metrics_add_their_rights(client: ki.Client) -> None:
    mgr = ki.Manager(client, metrics_secure=True)
    mgr.controller(noop).for_("pods")
    mgr.event_recorder("me")
    assert rules(mgr) == {("", "pods"): READ, ("events.k8s.io", "events"): ["create", "patch"],
                          ("authentication.k8s.io", "tokenreviews"): ["create"],
                          ("authorization.k8s.io", "subjectaccessreviews"): ["create"]}


def test_a_legacy_event_recorder_gets_core_events(client: ki.Client) -> None:
    mgr = ki.Manager(client, metrics_secure=False)
    mgr.controller(noop).for_("pods")
    mgr.event_recorder("deployment-controller", legacy=True)
    assert rules(mgr) == {("", "pods"): READ, ("", "events"): ["create", "patch"]}


def test_leader_election_gets_a_role_for_leases_in_its_namespace_and_bindings(client: ki.Client) -> None:
    mgr = ki.Manager(client, metrics_secure=False,
                     leader_election=ki.LeaderElectionConfig("op-lock", lease_namespace="ops"))
    mgr.controller(noop).for_("pods")
    docs = rbac_documents(mgr, OfflineResolver(), name="op", service_account="ops/op")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ClusterRole", "op-role"), ("Role", "op-leader-election-role"),
        ("ClusterRoleBinding", "op-role"), ("RoleBinding", "op-leader-election-role")]
    role = docs[1]
    assert role["metadata"]["namespace"] == "ops" and role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]
    assert docs[3]["subjects"] == [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}]
    assert docs[3]["metadata"]["namespace"] == "ops"


def test_sharding_members_need_to_list_and_watch_leases(client: ki.Client) -> None:
    mgr = ki.Manager(client, metrics_secure=False, sharding=ki.Sharding("shards", namespace="ops"))
    role = rbac_documents(mgr, OfflineResolver())[1]
    assert role["rules"][0]["verbs"] == [*READ, "create", "update", "patch", "delete"]


def test_typed_resources_resolve_offline(client: ki.Client) -> None:
    from kinformer.kinds.apps_v1 import Deployment

    mgr = ki.Manager(client, metrics_secure=False)
    mgr.controller(noop).for_(Deployment)
    assert rules(mgr) == {("apps", "deployments"): READ}


@pytest.mark.parametrize(("spec", "expected"), [
    ("cm", ("", "configmaps")), ("deploy", ("apps", "deployments")), ("apps/v1/deployments", ("apps", "deployments")),
    ("Foo", ("example.com", "foos")), ("widgets.other.io", ("other.io", "widgets")),
    ("rbac.authorization.k8s.io/v1/ClusterRole", ("rbac.authorization.k8s.io", "clusterroles")),
])
def test_offline_resolver_spellings(spec: str, expected: tuple[str, str]) -> None:
    assert OfflineResolver([FOO_CRD])(spec) == expected


def test_an_unknown_unqualified_name_is_a_clear_error() -> None:
    with pytest.raises(LookupError, match=r"spell it plural\.group"):
        OfflineResolver()("widgets")


def test_a_bad_service_account_is_refused(client: ki.Client) -> None:
    with pytest.raises(ValueError, match="namespace/name"):
        rbac_documents(ki.Manager(client, metrics_secure=False), OfflineResolver(), service_account="op")


def test_writes_refuses_unknown_verbs(client: ki.Client) -> None:
    builder: Any = ki.Manager(client, metrics_secure=False).controller(noop)
    with pytest.raises(ValueError, match="writes\\(\\) takes verbs"):
        builder.writes("secrets", ("escalate",))
    with pytest.raises(ValueError, match="needs for_"):
        builder.writes_status()

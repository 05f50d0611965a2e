"""kube's apps/v1 columns beyond those of tests/unit/server/test_tables.py (``kinformer.server.printers.apps``)."""

from __future__ import annotations

from tablelib import cells, headers, meta


def test_controller_revision_names_its_controller() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "u1", "controller": True,
             "blockOwnerDeletion": True}
    rev = {"apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": 2,
           "metadata": meta("web-7b8d", ownerReferences=[owner]), "data": {}}
    assert headers("apps", "controllerrevisions") == ["Name", "Controller", "Revision", "Age"]
    assert cells("apps", "controllerrevisions", rev) == ["web-7b8d", "statefulset.apps/web", 2, "5m"]
    core_owner = {**owner, "apiVersion": "v1", "kind": "Pod", "name": "p"}
    assert cells("apps", "controllerrevisions", {"metadata": meta("r", ownerReferences=[core_owner])})[1] == "pod/p"
    not_controller = {**owner, "controller": False}
    assert cells("apps", "controllerrevisions", {"metadata": meta("r", ownerReferences=[not_controller])})[1] == \
        "<none>"


def test_selectors_print_as_kube_prints_each_kind() -> None:
    everything = {"metadata": meta("d"), "spec": {"selector": {}, "template": {"spec": {"containers": []}}}}
    assert cells("apps", "deployments", everything)[-1] == ""
    assert cells("apps", "replicasets", everything)[-1] == "<none>"
    assert cells("apps", "daemonsets", everything)[-1] == "<none>"

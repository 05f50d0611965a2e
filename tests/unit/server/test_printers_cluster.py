"""kube's columns of PodDisruptionBudgets, PriorityClasses, RuntimeClasses, CSRs and Leases
(``kinformer.server.printers.cluster``)."""

from __future__ import annotations

import pytest

from tablelib import cells, headers, meta


def test_pod_disruption_budget_rows() -> None:
    assert headers("policy", "poddisruptionbudgets") == ["Name", "Min Available", "Max Unavailable",
                                                         "Allowed Disruptions", "Age"]
    pdb = {"metadata": meta("zk-pdb"), "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "zk"}}},
           "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}}
    assert cells("policy", "poddisruptionbudgets", pdb) == ["zk-pdb", "2", "N/A", 1, "5m"]
    pct = {"metadata": meta("web"), "spec": {"maxUnavailable": "50%"}, "status": {}}
    assert cells("policy", "poddisruptionbudgets", pct) == ["web", "N/A", "50%", 0, "5m"]


def test_priority_and_runtime_classes() -> None:
    pc = {"metadata": meta("high"), "value": 1000000, "globalDefault": False,
          "preemptionPolicy": "PreemptLowerPriority", "description": "important"}
    assert headers("scheduling.k8s.io", "priorityclasses") == ["Name", "Value", "Global-Default", "Age",
                                                               "PreemptionPolicy"]
    assert cells("scheduling.k8s.io", "priorityclasses", pc) == ["high", 1000000, False, "5m",
                                                                 "PreemptLowerPriority"]
    rc = {"metadata": meta("gvisor"), "handler": "runsc"}
    assert cells("node.k8s.io", "runtimeclasses", rc) == ["gvisor", "runsc", "5m"]


@pytest.mark.parametrize(("conditions", "certificate", "condition"), [
    ([], None, "Pending"),
    ([{"type": "Approved", "status": "True"}], "LS0t", "Approved,Issued"),
    ([{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}], None, "Approved,Failed"),
    ([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}], None, "Denied"),
])
def test_certificate_signing_request_rows(conditions: list[dict[str, str]], certificate: str | None,
                                          condition: str) -> None:
    csr = {"metadata": meta("alice"),
           "spec": {"request": "LS0t", "signerName": "kubernetes.io/kube-apiserver-client", "username": "alice",
                    "expirationSeconds": 86400, "usages": ["client auth"]},
           "status": {"conditions": conditions, **({"certificate": certificate} if certificate else {})}}
    assert headers("certificates.k8s.io", "certificatesigningrequests") == [
        "Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"]
    assert cells("certificates.k8s.io", "certificatesigningrequests", csr) == [
        "alice", "5m", "kubernetes.io/kube-apiserver-client", "alice", "24h", condition]


def test_lease_holder() -> None:
    lease = {"metadata": meta("kube-scheduler"), "spec": {"holderIdentity": "node-1_4f2c", "leaseDurationSeconds": 15}}
    assert cells("coordination.k8s.io", "leases", lease) == ["kube-scheduler", "node-1_4f2c", "5m"]

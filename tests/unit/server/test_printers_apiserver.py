"""kube's columns of admission configuration, API priority and fairness and APIServices
(``kinformer.server.printers.apiserver``)."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.server.endpoints.tables import builtin_printer, to_table
from tablelib import NOW, cells, headers, meta

ADM = "admissionregistration.k8s.io"
FC = "flowcontrol.apiserver.k8s.io"


@pytest.mark.parametrize("plural", ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"])
def test_webhook_configurations_count_webhooks(plural: str) -> None:
    cfg = {"metadata": meta("policy.example.com"), "webhooks": [{"name": "a.example.com"}, {"name": "b.example.com"}]}
    assert headers(ADM, plural) == ["Name", "Webhooks", "Age"]
    assert cells(ADM, plural, cfg) == ["policy.example.com", 2, "5m"]


def test_validating_admission_policy_row() -> None:
    policy = {"metadata": meta("replicalimit"),
              "spec": {"paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
                       "validations": [{"expression": "object.spec.replicas <= params.maxReplicas"}]}}
    assert cells(ADM, "validatingadmissionpolicies", policy) == ["replicalimit", 1, "rules.example.com/v1/ReplicaLimit",
                                                                 "5m"]
    assert cells(ADM, "validatingadmissionpolicies", {"metadata": meta("p"), "spec": {}})[1:3] == [0, "<unset>"]


@pytest.mark.parametrize(("param_ref", "shown"), [
    ({"name": "limits", "namespace": "prod"}, "prod/limits"),
    ({"name": "limits"}, "*/limits"),
    ({"selector": {"matchLabels": {"env": "prod", "app": "x"},
                   "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}},
     "&LabelSelector{MatchLabels:map[string]string{app: x,env: prod,},MatchExpressions:[]LabelSelectorRequirement"
     "{LabelSelectorRequirement{Key:tier,Operator:In,Values:[a b],},},}"),
    (None, "<unset>"),
])
def test_validating_admission_policy_binding_param_ref(param_ref: dict[str, Any] | None, shown: str) -> None:
    spec: dict[str, Any] = {"policyName": "replicalimit", "validationActions": ["Deny"]}
    if param_ref is not None:
        spec["paramRef"] = param_ref
    binding = {"metadata": meta("replicalimit-prod"), "spec": spec}
    assert cells(ADM, "validatingadmissionpolicybindings", binding) == ["replicalimit-prod", "replicalimit", shown,
                                                                        "5m"]


def flowschema(name: str, precedence: int, **spec: Any) -> dict[str, Any]:
    return {"metadata": meta(name), "spec": {"priorityLevelConfiguration": {"name": "workload-low"},
                                             "matchingPrecedence": precedence, **spec},
            "status": {"conditions": [{"type": "Dangling", "status": "False"}]}}


def test_flow_schemas_print_and_list_in_matching_order() -> None:
    assert headers(FC, "flowschemas") == ["Name", "PriorityLevel", "MatchingPrecedence", "DistinguisherMethod", "Age",
                                          "MissingPL"]
    fs = flowschema("service-accounts", 9000, distinguisherMethod={"type": "ByUser"})
    assert cells(FC, "flowschemas", fs) == ["service-accounts", "workload-low", 9000, "ByUser", "5m", "False"]
    fresh = {"metadata": meta("new"), "spec": {"priorityLevelConfiguration": {"name": "global-default"},
                                               "matchingPrecedence": 1000}}
    assert cells(FC, "flowschemas", fresh)[3:] == ["<none>", "5m", "?"]
    items = [flowschema("b", 1000), flowschema("exempt", 1), flowschema("a", 1000)]
    table = to_table(builtin_printer(FC, "flowschemas"), {"kind": "FlowSchemaList", "items": items}, now=NOW)
    assert [r["cells"][0] for r in table["rows"]] == ["exempt", "a", "b"]


def test_priority_level_configuration_rows() -> None:
    limited = {"metadata": meta("workload-low"), "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 100, "lendablePercent": 90,
        "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}}
    assert cells(FC, "prioritylevelconfigurations", limited) == ["workload-low", "Limited", 100, 128, 6, 50, "5m"]
    rejecting = {"metadata": meta("catch-all"), "spec": {"type": "Limited", "limited": {
        "nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}}
    assert cells(FC, "prioritylevelconfigurations", rejecting)[2:6] == [5, "<none>", "<none>", "<none>"]
    exempt = {"metadata": meta("exempt"), "spec": {"type": "Exempt", "exempt": {}}}
    assert cells(FC, "prioritylevelconfigurations", exempt)[1:6] == ["Exempt", "<none>", "<none>", "<none>", "<none>"]


def test_apiservice_rows() -> None:
    local = {"metadata": meta("v1.apps"), "spec": {"group": "apps", "version": "v1"},
             "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}}
    assert headers("apiregistration.k8s.io", "apiservices") == ["Name", "Service", "Available", "Age"]
    assert cells("apiregistration.k8s.io", "apiservices", local) == ["v1.apps", "Local", "True", "5m"]
    metrics = {"metadata": meta("v1beta1.metrics.k8s.io"),
               "spec": {"service": {"namespace": "kube-system", "name": "metrics-server"}},
               "status": {"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]}}
    assert cells("apiregistration.k8s.io", "apiservices", metrics)[1:3] == ["kube-system/metrics-server",
                                                                            "False (MissingEndpoints)"]
    assert cells("apiregistration.k8s.io", "apiservices", {"metadata": meta("x"), "spec": {}})[2] == "Unknown"

"""Per-kind strategies: generation, status reset, kind validation, immutable fields, DELETE answers."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from kinformer.server.machinery import status as st
from kinformer.server.registry.ipallocator import ServiceAllocator
from kinformer.server.registry.resources import ResourceInfo
from kinformer.server.registry.strategies import FallbackStrategy, strategy_table
from kinformer.server.registry.strategies.pods import TOKEN_MOUNT_PATH, PodStrategy, admit_tolerations, qos_class


def info(group: str, kind: str, plural: str, *, status: bool = True, builtin: bool = True) -> ResourceInfo:
    return ResourceInfo(group=group, version="v1", kind=kind, plural=plural, singular=kind.lower(), namespaced=True,
                        subresources=("status",) if status else (), builtin=builtin)


TABLE = strategy_table()
DEPLOY = info("apps", "Deployment", "deployments")
JOB = info("batch", "Job", "jobs")
POD = info("", "Pod", "pods")


def deployment(labels: dict[str, str] | None = None, selector: dict[str, str] | None = None) -> dict[str, Any]:
    labels = labels or {"app": "web"}
    return {"metadata": {"name": "d", "uid": "u1"},
            "spec": {"selector": {"matchLabels": selector or labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}},
            "status": {"replicas": 9}}


def create(res: ResourceInfo, obj: dict[str, Any]) -> dict[str, Any]:
    strategy = TABLE.get((res.group, res.plural)) or FallbackStrategy()
    strategy.prepare_for_create(res, obj)
    return obj


def update(res: ResourceInfo, new: dict[str, Any], old: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    strategy = TABLE.get((res.group, res.plural)) or FallbackStrategy()
    strategy.prepare_for_update(res, new, old)
    return new, strategy.validate_update(res, new, old)


@pytest.mark.parametrize("group,kind,plural", [("", "ConfigMap", "configmaps"), ("", "Secret", "secrets"),
                                               ("", "Pod", "pods"), ("", "Service", "services"),
                                               ("", "Namespace", "namespaces"),
                                               ("", "ServiceAccount", "serviceaccounts")])
def test_kinds_without_generation(group, kind, plural):
    obj = create(info(group, kind, plural), {"metadata": {"name": "x", "generation": 5}, "spec": {}})
    assert "generation" not in obj["metadata"]
    changed, _ = update(info(group, kind, plural), {"metadata": {"name": "x"}, "spec": {"a": 1}}, obj)
    assert "generation" not in changed["metadata"]


def test_workload_generation_moves_with_spec_and_deployment_annotations():
    obj = create(DEPLOY, deployment())
    assert obj["metadata"]["generation"] == 1 and obj["status"] == {}
    same, causes = update(DEPLOY, copy.deepcopy(obj), obj)
    assert same["metadata"]["generation"] == 1 and causes == []
    annotated = copy.deepcopy(obj)
    annotated["metadata"]["annotations"] = {"a": "b"}
    assert update(DEPLOY, annotated, obj)[0]["metadata"]["generation"] == 2
    scaled = copy.deepcopy(obj)
    scaled["spec"]["replicas"] = 5
    assert update(DEPLOY, scaled, obj)[0]["metadata"]["generation"] == 2
    rs_info = info("apps", "ReplicaSet", "replicasets")
    rs = create(rs_info, deployment())
    labelled = copy.deepcopy(rs)
    labelled["metadata"]["annotations"] = {"a": "b"}
    assert update(rs_info, labelled, rs)[0]["metadata"]["generation"] == 1 and rs["status"] == {"replicas": 0}


def test_custom_resources_always_carry_generation():
    cr = info("example.com", "Foo", "foos", status=False, builtin=False)
    obj = create(cr, {"metadata": {"name": "f"}, "spec": {"a": 1}, "status": {"s": 1}})
    assert obj["metadata"]["generation"] == 1 and obj["status"] == {"s": 1}
    new, _ = update(cr, {"metadata": {"name": "f"}, "spec": {"a": 1}, "status": {"s": 2}}, obj)
    assert new["metadata"]["generation"] == 2


def test_deployment_selector_must_match_template():
    causes = TABLE[("apps", "deployments")].validate(DEPLOY, create(DEPLOY, deployment(selector={"app": "db"})))
    assert causes == [{"reason": "FieldValueInvalid", "field": "spec.template.metadata.labels",
                       "message": 'Invalid value: map[string]string{"app":"web"}: `selector` does not match '
                                  "template `labels`"}]
    missing = create(DEPLOY, deployment())
    del missing["spec"]["selector"]
    assert TABLE[("apps", "deployments")].validate(DEPLOY, missing) == [
        {"reason": "FieldValueRequired", "field": "spec.selector", "message": "Required value"}]
    expressions = create(DEPLOY, deployment(labels={"app": "a", "x": "y"}))
    expressions["spec"]["selector"] = {"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]}
    assert TABLE[("apps", "deployments")].validate(DEPLOY, expressions) == []
    empty = create(DEPLOY, deployment())
    empty["spec"]["selector"] = {}
    assert "empty selector is invalid for deployment" in \
        TABLE[("apps", "deployments")].validate(DEPLOY, empty)[0]["message"]


def test_workload_selectors_are_immutable():
    old = create(DEPLOY, deployment())
    new = copy.deepcopy(old)
    new["spec"]["selector"]["matchLabels"]["tier"] = "x"
    new["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    _, causes = update(DEPLOY, new, old)
    assert causes == [{"reason": "FieldValueInvalid", "field": "spec.selector",
                       "message": 'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", '
                                  '"tier":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is '
                                  "immutable"}]
    sts_info = info("apps", "StatefulSet", "statefulsets")
    sts = create(sts_info, deployment())
    changed = copy.deepcopy(sts)
    changed["spec"]["serviceName"] = "other"
    assert update(sts_info, changed, sts)[1][0]["message"].startswith("Forbidden: updates to statefulset spec")


def test_job_selector_is_generated_and_template_immutable():
    job = {"metadata": {"name": "pi", "uid": "u-1"},
           "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "perl"}],
                                          "restartPolicy": "Never"}}}}
    obj = create(JOB, job)
    labels = obj["spec"]["template"]["metadata"]["labels"]
    assert obj["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert labels == {"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi",
                      "controller-uid": "u-1", "job-name": "pi"}
    assert obj["metadata"]["labels"] == labels and obj["metadata"]["generation"] == 1
    assert TABLE[("batch", "jobs")].validate(JOB, obj) == []
    changed = copy.deepcopy(obj)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "perl:2"
    assert [c["field"] for c in update(JOB, changed, obj)[1]] == ["spec.template"]
    always = create(JOB, {"metadata": {"name": "a", "uid": "u"},
                          "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    assert TABLE[("batch", "jobs")].validate(JOB, always)[0]["message"] == \
        'Unsupported value: "Always": supported values: "OnFailure", "Never"'
    assert TABLE[("batch", "jobs")].default_gc_policy == "Orphan"


def test_secret_data_wrapped_base64_and_string_data():
    secrets = info("", "Secret", "secrets", status=False)
    wrapped = base64.encodebytes(b"x" * 100).decode()  # 76-character lines, like `base64` prints
    assert "\n" in wrapped
    obj = create(secrets, {"metadata": {"name": "s"}, "data": {"a": wrapped}, "stringData": {"b": "plain"}})
    assert obj["data"] == {"a": base64.b64encode(b"x" * 100).decode(), "b": base64.b64encode(b"plain").decode()}
    assert "stringData" not in obj and obj["type"] == "Opaque"


def test_immutable_configmaps_and_secrets_keep_their_data():
    cms = info("", "ConfigMap", "configmaps", status=False)
    old = create(cms, {"metadata": {"name": "c"}, "data": {"k": "1"}, "immutable": True})
    _, causes = update(cms, {"metadata": {"name": "c"}, "data": {"k": "2"}, "immutable": True}, old)
    assert causes == [{"reason": "FieldValueForbidden", "field": "data",
                       "message": "Forbidden: field is immutable when `immutable` is set"}]
    _, causes = update(cms, {"metadata": {"name": "c"}, "data": {"k": "1"}}, old)
    assert [c["field"] for c in causes] == ["immutable"]
    secrets = info("", "Secret", "secrets", status=False)
    old = create(secrets, {"metadata": {"name": "s"}, "type": "Opaque"})
    _, causes = update(secrets, {"metadata": {"name": "s"}, "type": "kubernetes.io/tls"}, old)
    assert causes[0]["field"] == "type" and causes[0]["message"].endswith("field is immutable")


def test_pod_admission_and_status():
    pod = create(POD, {"metadata": {"name": "p"},
                       "spec": {"containers": [{"name": "c", "image": "nginx"}]}, "status": {"phase": "Running"}})
    spec = pod["spec"]
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert spec["tolerations"] == [
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists",
         "tolerationSeconds": 300},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "tolerationSeconds": 300}]
    volume = spec["volumes"][0]
    assert volume["name"].startswith("kube-api-access-") and len(volume["name"]) == len("kube-api-access-") + 5
    assert spec["containers"][0]["volumeMounts"] == [{"mountPath": TOKEN_MOUNT_PATH, "name": volume["name"],
                                                      "readOnly": True}]
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    no_token = create(POD, {"metadata": {"name": "q"}, "spec": {"automountServiceAccountToken": False,
                                                               "containers": [{"name": "c", "image": "x"}]}})
    assert "volumes" not in no_token["spec"]
    assert TABLE[("", "pods")].returns_deleted_object


def test_default_toleration_seconds_not_ready_and_unreachable_are_set_apart():
    """kube-apiserver's --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds."""
    spec: dict[str, Any] = {"tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}
    admit_tolerations(spec, (30, 60))
    assert spec["tolerations"][1:] == [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
                                        "operator": "Exists", "tolerationSeconds": 30}]
    spec = {}
    admit_tolerations(spec, (30, 60))
    assert [t["tolerationSeconds"] for t in spec["tolerations"]] == [30, 60]
    for bad in (-1, (1, -1), (1,), True, (1.5, 2)):
        with pytest.raises(ValueError, match="not-ready, unreachable"):
            PodStrategy(bad)  # type: ignore[arg-type]


def test_qos_classes():
    def spec(resources: dict[str, Any]) -> dict[str, Any]:
        return {"containers": [{"name": "c", "resources": resources}]}
    both = {"cpu": "1", "memory": "1Gi"}
    assert qos_class(spec({})) == "BestEffort"
    assert qos_class(spec({"limits": both, "requests": both})) == "Guaranteed"
    assert qos_class(spec({"requests": {"cpu": "1"}})) == "Burstable"


def test_pod_updates_may_change_only_images_and_a_few_fields():
    old = create(POD, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}})
    image = copy.deepcopy(old)
    image["spec"]["containers"][0]["image"] = "nginx:2"
    assert update(POD, image, old)[1] == []
    env = copy.deepcopy(old)
    env["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    causes = update(POD, env, old)[1]
    assert [c["field"] for c in causes] == ["spec"]
    assert causes[0]["message"].startswith("Forbidden: pod updates may not change fields other than")


def _pod_with(restart_policy: str, **statuses: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {"restartPolicy": restart_policy, "containers": [{"name": "c", "image": "nginx"}],
            "initContainers": [{"name": "init", "image": "busybox"},
                               {"name": "sidecar", "image": "envoy", "restartPolicy": "Always"}]}
    return {"metadata": {"name": "p"}, "spec": spec, "status": dict(statuses)}


def _terminated(name: str, code: int) -> dict[str, Any]:
    return {"name": name, "state": {"terminated": {"exitCode": code}}}


def _running(name: str) -> dict[str, Any]:
    return {"name": name, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


@pytest.mark.parametrize(("policy", "code", "refused"), [
    ("Never", 0, True), ("Never", 1, True), ("OnFailure", 0, True), ("OnFailure", 2, False),
    ("Always", 0, False), ("Always", 1, False)])
def test_pod_status_may_not_bring_back_a_container_the_pod_would_not_restart(policy, code, refused):
    old = _pod_with(policy, containerStatuses=[_terminated("c", code)])
    new = _pod_with(policy, containerStatuses=[_running("c")])
    causes = PodStrategy().validate_status_update(POD, new, old)
    assert causes == ([{"reason": "FieldValueForbidden", "field": "status.containerStatuses[0].state",
                        "message": "Forbidden: may not be transitioned to non-terminated state"}] if refused else [])
    assert PodStrategy().validate_status_update(POD, old, old) == []  # staying terminated is always fine


def test_pod_status_init_and_ephemeral_containers_follow_their_own_restart_rules():
    old = _pod_with("Never", initContainerStatuses=[_terminated("init", 0), _terminated("sidecar", 0)],
                    ephemeralContainerStatuses=[_terminated("debug", 1)])
    new = _pod_with("Never", initContainerStatuses=[_running("init"), _running("sidecar")],
                    ephemeralContainerStatuses=[_running("debug")])
    fields = [c["field"] for c in PodStrategy().validate_status_update(POD, new, old)]
    assert fields == ["status.initContainerStatuses[0].state", "status.ephemeralContainerStatuses[0].state"]
    always_old, always_new = copy.deepcopy(old), copy.deepcopy(new)
    always_old["spec"]["restartPolicy"] = always_new["spec"]["restartPolicy"] = "Always"
    fields = [c["field"] for c in PodStrategy().validate_status_update(POD, always_new, always_old)]
    assert fields == ["status.ephemeralContainerStatuses[0].state"]  # never restarted, whatever the pod's policy


def test_pod_status_nominated_node_name_must_be_a_node_name_when_it_changes():
    old = _pod_with("Always")
    for good in ("node-1", "", None):
        assert PodStrategy().validate_status_update(POD, _pod_with("Always", nominatedNodeName=good), old) == []
    causes = PodStrategy().validate_status_update(POD, _pod_with("Always", nominatedNodeName="Node_1"), old)
    assert [c["field"] for c in causes] == ["status.nominatedNodeName"]
    assert causes[0]["message"].startswith('Invalid value: "Node_1": a lowercase RFC 1123 subdomain must consist')
    kept = _pod_with("Always", nominatedNodeName="Node_1")
    assert PodStrategy().validate_status_update(POD, kept, kept) == []  # only a change is judged


def services() -> tuple[dict[tuple[str, str], Any], ServiceAllocator, list[dict[str, Any]]]:
    stored: list[dict[str, Any]] = []

    def ips() -> set[str]:
        return {ip for s in stored for ip in s["spec"].get("clusterIPs") or ()}

    def ports() -> set[int]:
        return {p["nodePort"] for s in stored for p in s["spec"].get("ports") or () if p.get("nodePort")}

    allocator = ServiceAllocator(ips, ports, cidr="10.96.0.0/12")
    return strategy_table(allocator), allocator, stored


SVC = info("", "Service", "services")


def test_services_get_cluster_ips_families_and_node_ports():
    table, _, stored = services()
    strategy = table[("", "services")]
    svc = {"metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"port": 80}], "selector": {"a": "b"}}}
    strategy.prepare_for_create(SVC, svc)
    spec = svc["spec"]
    assert spec["clusterIP"] == spec["clusterIPs"][0] and spec["clusterIP"].startswith("10.")
    assert spec["ipFamilies"] == ["IPv4"] and spec["ipFamilyPolicy"] == "SingleStack"
    assert 30000 <= spec["ports"][0]["nodePort"] <= 32767 and svc["status"] == {"loadBalancer": {}}
    assert strategy.validate(SVC, svc) == []
    stored.append(svc)
    again = {"metadata": {"name": "t"}, "spec": {"clusterIP": spec["clusterIP"], "ports": [{"port": 80}]}}
    with pytest.raises(st.StatusError) as e:
        strategy.prepare_for_create(SVC, again)
    assert e.value.code == 422 and "provided IP is already allocated" in e.value.message
    outside = {"metadata": {"name": "u"}, "spec": {"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}}
    with pytest.raises(st.StatusError) as e:
        strategy.prepare_for_create(SVC, outside)
    assert "The range of valid IPs is 10.96.0.0/12" in e.value.message
    headless = {"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}}
    strategy.prepare_for_create(SVC, headless)
    assert headless["spec"]["ipFamilyPolicy"] == "RequireDualStack"
    assert headless["spec"]["ipFamilies"] == ["IPv4", "IPv6"]


def test_service_updates_keep_allocated_values_and_refuse_new_cluster_ips():
    table, _, _ = services()
    strategy = table[("", "services")]
    old = {"metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
    strategy.prepare_for_create(SVC, old)
    put = {"metadata": {"name": "s"}, "spec": {"type": "NodePort", "ports": [{"port": 80}]}}
    strategy.prepare_for_update(SVC, put, old)
    assert put["spec"]["clusterIP"] == old["spec"]["clusterIP"]
    assert put["spec"]["ports"][0]["nodePort"] == old["spec"]["ports"][0]["nodePort"]
    assert strategy.validate_update(SVC, put, old) == []
    moved = copy.deepcopy(put)
    moved["spec"]["clusterIP"] = "10.96.0.99"
    moved["spec"]["clusterIPs"] = ["10.96.0.99"]
    causes = strategy.validate_update(SVC, moved, old)
    assert [c["field"] for c in causes] == ["spec.clusterIP", "spec.clusterIPs[0]"]
    assert causes[1]["message"] == 'Invalid value: []string{"10.96.0.99"}: may not change once set'


def test_service_validation():
    strategy = TABLE[("", "services")]
    svc = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 0}]}}
    strategy.prepare_for_create(SVC, svc)
    fields = [c["field"] for c in strategy.validate(SVC, svc)]
    assert fields == ["spec.ports[0].name", "spec.ports[1].name", "spec.ports[1].port"]
    assert strategy.validate(SVC, {"metadata": {}, "spec": {"type": "ClusterIP"}})[0]["field"] == "spec.ports"


def test_delete_answers_per_kind():
    returned = {plural for (group, plural), s in TABLE.items() if s.returns_deleted_object}
    assert {"pods", "services", "serviceaccounts", "namespaces", "persistentvolumeclaims"} <= returned
    assert "configmaps" not in returned and not FallbackStrategy.returns_deleted_object


def test_single_stack_cluster_refuses_dual_stack_and_other_families():
    table, _, _ = services()
    strategy = table[("", "services")]
    for spec, field in (({"ipFamilyPolicy": "RequireDualStack"}, "spec.ipFamilyPolicy"),
                        ({"ipFamilies": ["IPv6"]}, "spec.ipFamilies[0]")):
        svc = {"metadata": {"name": "s"}, "spec": {**spec, "selector": {"a": "b"}, "ports": [{"port": 80}]}}
        with pytest.raises(st.StatusError) as e:
            strategy.prepare_for_create(SVC, svc)
        assert e.value.details["causes"][0]["field"] == field
    lb = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                                               "ports": [{"port": 80}]}}
    strategy.prepare_for_create(SVC, lb)
    assert 30000 <= lb["spec"]["healthCheckNodePort"] <= 32767
    assert lb["spec"]["healthCheckNodePort"] != lb["spec"]["ports"][0]["nodePort"]


def test_node_keeps_the_status_it_is_created_with_as_a_kubelet_registers_it():
    node = {"metadata": {"name": "node-1"}, "status": {"capacity": {"cpu": "4", "pods": "110"},
                                                        "conditions": [{"type": "Ready", "status": "True"}]}}
    created = create(info("", "Node", "nodes"), copy.deepcopy(node))
    assert created["status"] == node["status"]


def test_load_balancer_without_node_port_allocation_gets_only_the_node_ports_it_asks_for():
    table, _, _ = services()
    strategy = table[("", "services")]
    svc = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                                                "ports": [{"name": "a", "port": 80}, {"name": "b", "port": 81,
                                                                                       "nodePort": 30081}],
                                                "selector": {"a": "b"}}}
    strategy.prepare_for_create(SVC, svc)
    assert "nodePort" not in svc["spec"]["ports"][0]
    assert svc["spec"]["ports"][1]["nodePort"] == 30081
    allocated = {"metadata": {"name": "lb2"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}],
                                                       "selector": {"a": "b"}}}
    strategy.prepare_for_create(SVC, allocated)
    assert 30000 <= allocated["spec"]["ports"][0]["nodePort"] <= 32767

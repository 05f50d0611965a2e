"""Server-side Table printing (``kinformer.server.endpoints.tables``): negotiation, formats and row building."""

from __future__ import annotations

from typing import Any

import pytest

from kinformer.server.endpoints import tables
from kinformer.server.endpoints.tables import (
    age,
    builtin_printer,
    compile_jsonpath,
    custom_resource_printer,
    human_duration,
    negotiate_table,
    to_table,
)
from kinformer.server.printers import builtin_resources
from kinformer.server.schema.builtin_catalog import RESOURCES
from tablelib import CREATED, NOW, cells, meta, named

KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
                  "application/json")


# ------------------------------------------------------------------------------------------ negotiation


@pytest.mark.parametrize(("accept", "expected"), [
    (KUBECTL_ACCEPT, "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io, application/json", "v1beta1"),
    ("application/json", None),
    ("", None),
    ("*/*", None),
    ("application/json, application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("application/json;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
    ("application/json;as=Table;v=v2;g=meta.k8s.io, application/json", None),
    ("application/json;as=Table;v=v1;g=other.io, application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
    ("application/yaml;as=Table;v=v1;g=meta.k8s.io,application/json", None),
    ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0", None),
])
def test_negotiate_table(accept: str, expected: str | None) -> None:
    assert negotiate_table(accept) == expected


def test_table_content_type() -> None:
    assert tables.table_content_type("v1") == "application/json;as=Table;v=v1;g=meta.k8s.io"


# ------------------------------------------------------------------------------------------ durations


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"), (150, "2m30s"),
    (599, "9m59s"), (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (3 * 3600 + 60 * 7, "3h7m"),
    (8 * 3600, "8h"), (47 * 3600, "47h"), (48 * 3600, "2d"), (3 * 86400 + 4 * 3600, "3d4h"), (8 * 86400, "8d"),
    (729 * 86400, "729d"), (2 * 365 * 86400, "2y"), (3 * 365 * 86400 + 10 * 86400, "3y10d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_age_of_missing_or_bad_timestamp_is_unknown() -> None:
    assert age(None, NOW) == "<unknown>"
    assert age("yesterday", NOW) == "<unknown>"
    assert age(CREATED, NOW) == "5m"
    assert age("2023-11-14T22:13:19.500000Z", NOW) == "0s"  # MicroTime


# ------------------------------------------------------------------------------------------ tables


def test_list_table_metadata_columns_and_partial_objects() -> None:
    doc = {"kind": "ConfigMapList", "apiVersion": "v1",
           "metadata": {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3},
           "items": [{"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta("a", labels={"k": "v"}),
                      "data": {"x": "1"}},
                     {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta("b")}]}
    table = to_table(builtin_printer("", "configmaps"), doc, now=NOW)
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "tok", "remainingItemCount": 3}
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Data", "Age"]
    assert set(table["columnDefinitions"][0]) == {"name", "type", "format", "description", "priority"}
    assert table["columnDefinitions"][0]["format"] == "name"
    assert [r["cells"] for r in table["rows"]] == [["a", 1, "5m"], ["b", 0, "5m"]]
    obj = table["rows"][0]["object"]
    assert obj == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": meta("a", labels={"k": "v"})}


def test_single_object_table_and_include_object_modes() -> None:
    cm = {"kind": "ConfigMap", "apiVersion": "v1", "metadata": meta("a"), "data": {"x": "1"}}
    printer = builtin_printer("", "configmaps")
    table = to_table(printer, cm, now=NOW, version="v1beta1")
    assert table["apiVersion"] == "meta.k8s.io/v1beta1"
    assert table["metadata"] == {"resourceVersion": "7"}
    assert table["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    assert to_table(printer, cm, now=NOW, include_object="Object")["rows"][0]["object"] == cm
    assert to_table(printer, cm, now=NOW, include_object="None")["rows"][0]["object"] is None
    assert to_table(printer, cm, now=NOW, headers=False)["columnDefinitions"] == []
    with pytest.raises(ValueError, match="unrecognized includeObject"):
        to_table(printer, cm, now=NOW, include_object="Everything")


def test_empty_list_has_columns_and_no_rows() -> None:
    table = to_table(builtin_printer("", "pods"), {"kind": "PodList", "metadata": {"resourceVersion": "3"},
                                                   "items": []}, now=NOW)
    assert table["rows"] == [] and len(table["columnDefinitions"]) == 9


@pytest.mark.parametrize(("group", "plural"), [
    *builtin_resources(), ("apiextensions.k8s.io", "customresourcedefinitions"), ("example.com", "unknown"),
])
@pytest.mark.parametrize("obj", [
    {}, {"metadata": {}, "spec": None, "status": None}, {"metadata": meta()},
    {"metadata": {"labels": ["a"], "annotations": 1}, "spec": 1, "status": [1, None]},
    {"metadata": meta(), "spec": {"selector": {"matchExpressions": ["x"]}, "accessModes": [["RWO"]],
                                  "template": "t", "rules": [1], "metrics": [{"type": "Pods", "pods": 3}]},
     "status": {"conditions": "Ready", "hard": ["a"], "loadBalancer": {"ingress": "x"}}},
])
def test_every_printer_yields_one_cell_per_column_for_sparse_or_malformed_objects(group: str, plural: str,
                                                                     obj: dict[str, Any]) -> None:
    cells(group, plural, obj)


def test_printers_are_only_for_served_resources() -> None:
    served = {(r[0], r[3]) for r in RESOURCES}
    assert set(builtin_resources()) <= served


@pytest.mark.parametrize(("group", "plural"), builtin_resources())
def test_column_definitions_carry_kubes_descriptions(group: str, plural: str) -> None:
    defs = builtin_printer(group, plural).definitions()
    assert defs[0]["format"] == "name" or defs[0]["name"] == "Last Seen"
    assert all(d["type"] in ("string", "integer", "boolean", "number", "date") for d in defs)
    described = [d for d in defs if (group, plural, d["name"]) != ("node.k8s.io", "runtimeclasses", "Handler")]
    assert all(d["description"] for d in described), [d["name"] for d in described if not d["description"]]


def test_name_and_age_descriptions_are_the_object_meta_docs() -> None:
    name, *_, age_col = builtin_printer("", "configmaps").definitions()
    assert name["description"].startswith("Name must be unique within a namespace.")
    assert age_col["description"].startswith("CreationTimestamp is a timestamp representing the server time")


# ------------------------------------------------------------------------------------------ pods


def pod(status: dict[str, Any] | None = None, spec: dict[str, Any] | None = None, **m: Any) -> dict[str, Any]:
    return {"metadata": meta("p", **m), "spec": spec or {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": status or {}}


def running(name: str, *, ready: bool = True, restarts: int = 0, finished: str | None = None) -> dict[str, Any]:
    cs: dict[str, Any] = {"name": name, "ready": ready, "restartCount": restarts, "state": {"running": {}}}
    if finished:
        cs["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": finished}}
    return cs


def test_pod_pending_and_wide_defaults() -> None:
    row = named("", "pods", pod({"phase": "Pending"}))
    assert row == {"Name": "p", "Ready": "0/2", "Status": "Pending", "Restarts": "0", "Age": "5m", "IP": "<none>",
                   "Node": "<none>", "Nominated Node": "<none>", "Readiness Gates": "<none>"}


def test_pod_running_ready_restarts_and_wide_cells() -> None:
    status = {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.5"}],
              "conditions": [{"type": "Ready", "status": "True"}, {"type": "gate", "status": "True"}],
              "containerStatuses": [running("a", restarts=2, finished="2023-11-14T22:12:20Z"),
                                    running("b", ready=False, restarts=1)]}
    spec = {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1",
            "readinessGates": [{"conditionType": "gate"}, {"conditionType": "other"}]}
    row = named("", "pods", pod(status, spec))
    assert row["Ready"] == "1/2" and row["Status"] == "Running"
    assert row["Restarts"] == "3 (60s ago)"
    assert (row["IP"], row["Node"], row["Readiness Gates"]) == ("10.0.0.5", "n1", "1/2")


@pytest.mark.parametrize(("cstate", "status"), [
    ({"waiting": {"reason": "CrashLoopBackOff"}}, "CrashLoopBackOff"),
    ({"terminated": {"reason": "OOMKilled", "exitCode": 137}}, "OOMKilled"),
    ({"terminated": {"exitCode": 3}}, "ExitCode:3"),
    ({"terminated": {"exitCode": 0, "signal": 9}}, "Signal:9"),
])
def test_pod_container_state_reasons(cstate: dict[str, Any], status: str) -> None:
    obj = pod({"phase": "Running", "containerStatuses": [{"name": "a", "state": cstate}]},
              {"containers": [{"name": "a"}]})
    assert named("", "pods", obj)["Status"] == status


def test_pod_init_containers() -> None:
    spec = {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]}
    done = {"name": "i1", "state": {"terminated": {"exitCode": 0}}}
    waiting = {"name": "i2", "state": {"waiting": {"reason": "PodInitializing"}}}
    assert named("", "pods", pod({"phase": "Pending", "initContainerStatuses": [done, waiting]}, spec))["Status"] \
        == "Init:1/2"
    crash = {"name": "i2", "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "restartCount": 4}
    row = named("", "pods", pod({"phase": "Pending", "initContainerStatuses": [done, crash]}, spec))
    assert (row["Status"], row["Restarts"]) == ("Init:CrashLoopBackOff", "4")
    failed = {"name": "i1", "state": {"terminated": {"exitCode": 2}}}
    assert named("", "pods", pod({"phase": "Pending", "initContainerStatuses": [failed]}, spec))["Status"] \
        == "Init:ExitCode:2"


def test_pod_sidecar_counts_as_container() -> None:
    spec = {"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "a"}]}
    status = {"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
              "initContainerStatuses": [{"name": "side", "started": True, "ready": True, "restartCount": 1,
                                         "state": {"running": {}}}],
              "containerStatuses": [running("a")]}
    row = named("", "pods", pod(status, spec))
    assert (row["Ready"], row["Status"], row["Restarts"]) == ("2/2", "Running", "1")


def test_pod_completed_terminating_and_conditions() -> None:
    printer = builtin_printer("", "pods")
    done = pod({"phase": "Succeeded", "containerStatuses": [
        {"name": "a", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]},
        {"containers": [{"name": "a"}]})
    assert named("", "pods", done)["Status"] == "Completed"
    row = tables.table_row(printer, done, now=NOW)
    assert row["conditions"] == [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                  "message": "The pod has completed successfully."}]
    assert "conditions" not in tables.table_row(printer, pod({"phase": "Running"}), now=NOW)
    deleting = pod({"phase": "Running"}, deletionTimestamp=CREATED)
    assert named("", "pods", deleting)["Status"] == "Terminating"
    lost = pod({"phase": "Running", "reason": "NodeLost"}, deletionTimestamp=CREATED)
    assert named("", "pods", lost)["Status"] == "Unknown"
    gated = pod({"phase": "Pending", "conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}]})
    assert named("", "pods", gated)["Status"] == "SchedulingGated"


def test_pod_completed_with_running_container_is_running_or_not_ready() -> None:
    statuses = [running("a"), {"name": "b", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}]
    conditions = [{"type": "Ready", "status": "True"}]
    ready = pod({"phase": "Running", "containerStatuses": statuses, "conditions": conditions})
    assert named("", "pods", ready)["Status"] == "Running"
    assert named("", "pods", pod({"phase": "Running", "containerStatuses": statuses}))["Status"] == "NotReady"


# ------------------------------------------------------------------------------------------ workloads


def template(*containers: tuple[str, str]) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": n, "image": i} for n, i in containers]}}


def test_deployment_row() -> None:
    obj = {"metadata": meta("web"), "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                             "template": template(("a", "nginx"), ("b", "busybox:1"))},
           "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 1}}
    assert cells("apps", "deployments", obj) == ["web", "2/3", 3, 1, "5m", "a,b", "nginx,busybox:1", "app=web"]
    assert cells("apps", "deployments", {"metadata": meta("d"), "spec": {}})[1] == "0/1"  # replicas default 1
    assert [c.name for c in builtin_printer("apps", "deployments").columns if c.priority == 0] == \
        ["Name", "Ready", "Up-to-date", "Available", "Age"]


def test_replicaset_statefulset_daemonset_rows() -> None:
    sel = {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}
    rs = {"metadata": meta("rs"), "spec": {"replicas": 2, "selector": sel, "template": template(("c", "img"))},
          "status": {"replicas": 2, "readyReplicas": 1}}
    assert cells("apps", "replicasets", rs) == ["rs", 2, 2, 1, "5m", "c", "img", "app=x,tier in (a,b)"]
    sts = {"metadata": meta("s"), "spec": {"replicas": 3, "template": template(("c", "img"))},
           "status": {"readyReplicas": 3}}
    assert cells("apps", "statefulsets", sts) == ["s", "3/3", "5m", "c", "img"]
    ds = {"metadata": meta("d"), "spec": {"template": {"spec": {"nodeSelector": {"os": "linux"}, "containers": []}}},
          "status": {"desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 1,
                     "updatedNumberScheduled": 2, "numberAvailable": 1}}
    assert cells("apps", "daemonsets", ds)[:8] == ["d", 2, 2, 1, 2, 1, "os=linux", "5m"]


# ------------------------------------------------------------------------------------------ services


def svc(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": meta("s"), "spec": spec, "status": status or {}}


def test_service_cluster_ip() -> None:
    obj = svc({"type": "ClusterIP", "clusterIP": "10.0.0.1", "clusterIPs": ["10.0.0.1", "fd00::1"],
               "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
               "selector": {"b": "2", "a": "1"}})
    assert cells("", "services", obj) == ["s", "ClusterIP", "10.0.0.1", "<none>", "80/TCP,53/UDP", "5m", "a=1,b=2"]
    bare = svc({"ports": [{"port": 8080}]})
    assert cells("", "services", bare) == ["s", "ClusterIP", "<none>", "<none>", "8080/TCP", "5m", "<none>"]
    assert cells("", "services", svc({"clusterIP": "None"}))[2:5] == ["None", "<none>", "<none>"]


def test_service_node_port_load_balancer_external_name() -> None:
    np = svc({"type": "NodePort", "clusterIP": "10.0.0.2", "externalIPs": ["1.2.3.4"],
              "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}]})
    assert cells("", "services", np)[1:5] == ["NodePort", "10.0.0.2", "1.2.3.4", "80:30080/TCP"]
    lb = svc({"type": "LoadBalancer", "clusterIP": "10.0.0.3"})
    assert cells("", "services", lb)[3] == "<pending>"
    lb_up = svc({"type": "LoadBalancer", "externalIPs": ["5.6.7.8"]},
                {"loadBalancer": {"ingress": [{"ip": "9.9.9.9"}, {"hostname": "lb.example.com"}]}})
    assert cells("", "services", lb_up)[3] == "9.9.9.9,lb.example.com,5.6.7.8"
    ext = svc({"type": "ExternalName", "externalName": "db.example.com"})
    assert cells("", "services", ext)[1:4] == ["ExternalName", "<none>", "db.example.com"]


def test_endpoints_row() -> None:
    ep = {"metadata": meta("e"), "subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                                              "ports": [{"port": 80}, {"port": 443}]}]}
    assert cells("", "endpoints", ep)[1] == "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
    assert cells("", "endpoints", {"metadata": meta("e")})[1] == "<none>"
    assert cells("", "endpoints", {"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 8}]}]})[1] \
        == "[fd00::1]:8"


# ------------------------------------------------------------------------------------------ small kinds


def test_configmap_secret_namespace_serviceaccount_lease() -> None:
    cm = {"metadata": meta("c"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert cells("", "configmaps", cm) == ["c", 3, "5m"]
    assert cells("", "secrets", {"metadata": meta("s"), "data": {"a": "MQ=="}}) == ["s", "Opaque", 1, "5m"]
    tls = {"metadata": meta("t"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}
    assert cells("", "secrets", tls) == ["t", "kubernetes.io/tls", 2, "5m"]
    ns = {"metadata": meta("ns"), "status": {"phase": "Terminating"}}
    assert cells("", "namespaces", ns) == ["ns", "Terminating", "5m"]
    assert cells("", "namespaces", {"metadata": meta("ns")}) == ["ns", "Active", "5m"]
    sa = {"metadata": meta("default"), "secrets": [{"name": "tok"}]}
    assert cells("", "serviceaccounts", sa) == ["default", 1, "5m"]
    lease = {"metadata": meta("l"), "spec": {"holderIdentity": "me_123"}}
    assert cells("coordination.k8s.io", "leases", lease) == ["l", "me_123", "5m"]
    assert cells("coordination.k8s.io", "leases", {"metadata": meta("l"), "spec": {}}) == ["l", "", "5m"]


def test_node_row() -> None:
    node = {"metadata": meta("n1", labels={"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "x"}),
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "192.168.1.2"}],
                       "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "Debian", "kernelVersion": "6.1",
                                    "containerRuntimeVersion": "containerd://1.7"}}}
    assert cells("", "nodes", node) == ["n1", "Ready,SchedulingDisabled", "control-plane,x", "5m", "v1.32.0",
                                        "192.168.1.2", "<none>", "Debian", "6.1", "containerd://1.7"]
    assert cells("", "nodes", {"metadata": meta("n2")})[1:3] == ["Unknown", "<none>"]


def test_core_event_row() -> None:
    ev = {"metadata": meta("e1"), "type": "Warning", "reason": "BackOff", "message": " restarting \n",
          "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
          "source": {"component": "kubelet", "host": "n1"}, "count": 4,
          "firstTimestamp": "2023-11-14T21:13:20Z", "lastTimestamp": "2023-11-14T22:12:20Z"}
    assert cells("", "events", ev) == ["60s", "Warning", "BackOff", "pod/p", "spec.containers{a}", "kubelet, n1",
                                       "restarting", "60m", 4, "e1"]
    assert [c.name for c in builtin_printer("", "events").columns if c.priority == 0] == \
        ["Last Seen", "Type", "Reason", "Object", "Message"]


def test_new_style_event_rows() -> None:
    ev = {"metadata": meta("e2"), "type": "Normal", "reason": "Scheduled", "note": "assigned",
          "regarding": {"kind": "Pod", "name": "p"}, "reportingController": "scheduler",
          "eventTime": "2023-11-14T22:12:20.000000Z"}
    assert cells("events.k8s.io", "events", ev) == ["60s", "Normal", "Scheduled", "pod/p", "", "scheduler",
                                                    "assigned", "60s", 1, "e2"]
    series = dict(ev, series={"count": 7, "lastObservedTime": "2023-11-14T22:13:10.000000Z"})
    row = cells("events.k8s.io", "events", series)
    assert (row[0], row[8]) == ("10s", 7)
    core_series = {"metadata": meta("e3"), "involvedObject": {"kind": "Node"}, "eventTime": "2023-11-14T22:12:20Z",
                   "reportingComponent": "ctl", "reportingInstance": "i-1"}
    assert cells("", "events", core_series)[3:6] == ["node", "", "ctl, i-1"]


def test_crd_and_unknown_builtin_use_created_at() -> None:
    printer = builtin_printer("apiextensions.k8s.io", "customresourcedefinitions")
    assert [(c.name, c.type) for c in printer.columns] == [("Name", "string"), ("Created At", "date")]
    crd = {"metadata": {"name": "foos.example.com", "creationTimestamp": "2023-11-14T22:08:20Z"}}
    assert printer.row(crd, NOW) == ["foos.example.com", "2023-11-14T22:08:20Z"]
    assert builtin_printer("", "somethingelse") is tables.default_printer()


# ------------------------------------------------------------------------------------------ custom resources


def test_jsonpath_subset() -> None:
    obj = {"spec": {"replicas": 3, "items": [{"n": "a"}, {"n": "b"}, {"n": "c"}]},
           "metadata": {"labels": {"app.kubernetes.io/name": "web"}},
           "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"},
                                     {"type": "Weight", "status": "x", "w": 5}]}}
    assert compile_jsonpath(".spec.replicas")(obj) == [3]
    assert compile_jsonpath("{.spec.replicas}")(obj) == [3]
    assert compile_jsonpath("$.spec.replicas")(obj) == [3]
    assert compile_jsonpath(".spec.items[1].n")(obj) == ["b"]
    assert compile_jsonpath(".spec.items[-1].n")(obj) == ["c"]
    assert compile_jsonpath(".spec.items[*].n")(obj) == ["a", "b", "c"]
    assert compile_jsonpath(".spec.items[0:2].n")(obj) == ["a", "b"]
    assert compile_jsonpath(".spec['replicas']")(obj) == [3]
    assert compile_jsonpath(r".metadata.labels.app\.kubernetes\.io/name")(obj) == ["web"]
    assert compile_jsonpath(".metadata.labels['app.kubernetes.io/name']")(obj) == ["web"]
    assert compile_jsonpath('.status.conditions[?(@.type=="Ready")].status')(obj) == ["True"]
    assert compile_jsonpath(".status.conditions[?(@.type!='Ready')].type")(obj) == ["Synced", "Weight"]
    assert compile_jsonpath(".status.conditions[?(@.w>4)].type")(obj) == ["Weight"]
    assert compile_jsonpath(".status.conditions[?(@.w)].type")(obj) == ["Weight"]
    assert compile_jsonpath(".spec.missing.deeper")(obj) == []
    assert compile_jsonpath(".spec.items[9]")(obj) == []
    with pytest.raises(tables.JSONPathError):
        compile_jsonpath(".spec.items[")
    with pytest.raises(tables.JSONPathError):
        compile_jsonpath(".spec.items[?(bogus)]")


def test_custom_resource_printer_columns_and_typed_cells() -> None:
    printer = custom_resource_printer([
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio", "description": "how much"},
        {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused", "priority": 1},
        {"name": "Size", "type": "string", "jsonPath": ".spec.replicas", "format": "int"},
        {"name": "Started", "type": "date", "jsonPath": ".status.started"},
        {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
    ])
    assert [c.name for c in printer.columns] == ["Name", "Replicas", "Ready", "Ratio", "Paused", "Size", "Started",
                                                 "Missing"]
    defs = printer.definitions()
    assert defs[1]["description"] == "Custom resource definition column (in JSONPath format): .spec.replicas"
    assert (defs[3]["description"], defs[4]["priority"], defs[5]["format"]) == ("how much", 1, "int")
    obj = {"metadata": meta("f1"), "spec": {"replicas": 3, "ratio": 2, "paused": False},
           "status": {"conditions": [{"type": "Ready", "status": "True"}], "started": "2023-11-14T18:13:20Z"}}
    assert printer.row(obj, NOW) == ["f1", 3, "True", 2.0, False, "3", "4h", None]
    wrong = {"metadata": meta("f2"), "spec": {"replicas": "three", "ratio": "x", "paused": "no"},
             "status": {"started": "not a date"}}
    assert printer.row(wrong, NOW) == ["f2", None, None, None, None, "three", "<invalid>", None]


def test_custom_resource_without_columns_prints_age_and_bad_paths_print_empty() -> None:
    printer = custom_resource_printer([])
    assert [(c.name, c.type) for c in printer.columns] == [("Name", "string"), ("Age", "date")]
    assert printer.row({"metadata": meta("f")}, NOW) == ["f", "5m"]
    broken = custom_resource_printer([{"name": "Bad", "type": "string", "jsonPath": ".spec[oops"}])
    assert broken.row({"metadata": meta("f"), "spec": {}}, NOW) == ["f", None]


def test_crd_printer_columns_picks_the_version() -> None:
    crd = {"spec": {"versions": [
        {"name": "v1", "additionalPrinterColumns": [{"name": "A", "type": "string", "jsonPath": ".a"}]},
        {"name": "v2"}]}}
    assert tables.crd_printer_columns(crd, "v1") == [{"name": "A", "type": "string", "jsonPath": ".a"}]
    assert tables.crd_printer_columns(crd, "v2") == []
    assert tables.crd_printer_columns({}, "v1") == []

"""Compiled schemas of built-in kinds (kube 1.32's definitions from kubernetes-validate) and their data source."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.server.registry.resources import BUILTINS
from kinformer.server.schema import apidefs, schemas

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.sampled_from(["spec", "containers", "ports", "name", "image", "metadata",
                                                       "labels", "template", "replicas", "x"]), inner, max_size=4),
                    max_leaves=25)


def test_every_served_builtin_kind_has_a_definition() -> None:
    missing = [(i.group, i.version, i.kind) for i in BUILTINS if schemas.kind_node(i.group, i.version, i.kind) is None]
    assert missing == []


def test_definitions_are_decoded_only_when_used() -> None:
    defs = apidefs.definitions()
    assert len(defs) > 600 and apidefs.loaded()
    schemas.kind_node("apps", "v1", "Deployment")
    unserved = "io.k8s.api.storagemigration.v1alpha1.StorageVersionMigration"  # alpha: never served, never used
    assert unserved in defs and unserved not in defs._decoded
    assert apidefs.definition_name("events.k8s.io", "v1", "Event") == "io.k8s.api.events.v1.Event"
    assert apidefs.definition_name("", "v1", "Event") == "io.k8s.api.core.v1.Event"
    assert apidefs.definition_name("apps", "v1", "Nope") is None


def test_shared_and_recursive_definitions_compile_to_one_node() -> None:
    pod = schemas.kind_node("", "v1", "Pod")
    deploy = schemas.kind_node("apps", "v1", "Deployment")
    assert schemas.node_at(pod, ("spec",)) is schemas.node_at(deploy, ("spec", "template", "spec"))
    crd = schemas.kind_node("apiextensions.k8s.io", "v1", "CustomResourceDefinition")
    props = schemas.node_at(crd, ("spec", "versions", "schema", "openAPIV3Schema", "properties"))
    assert props is not None and props.item is schemas.node_at(crd, ("spec", "versions", "schema", "openAPIV3Schema"))


def test_int_or_string_quantity_and_free_form_fields() -> None:
    deploy = schemas.kind_node("apps", "v1", "Deployment")
    spec: dict[str, Any] = {"strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                            "selector": {"matchLabels": {"a": "b"}},
                            "template": {"spec": {"containers": [{"name": "c", "resources": {
                                "limits": {"cpu": 0.5, "memory": "1Gi"}}}]}}}
    assert deploy.fine({"spec": spec})
    cm = schemas.kind_node("", "v1", "ConfigMap")
    managed = [{"manager": "m", "fieldsV1": {"f:data": {"f:k": {}}}, "anything": "the field manager decides"}]
    assert cm.fine({"metadata": {"managedFields": managed}})


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_walks_never_raise_on_arbitrary_json(value: Any) -> None:
    for node in (schemas.kind_node("", "v1", "Pod"), schemas.kind_node("apps", "v1", "Deployment")):
        obj = {"spec": value, "metadata": value}
        causes: list[dict[str, str]] = []
        unknown: list[tuple[str, dict[str, Any], str]] = []
        node.check(obj, "", causes)
        node.unknown(obj, "", unknown)
        assert node.fine(obj) == (causes == [] and unknown == []) == (_ref_valid(node, obj) and _ref_clean(node, obj))


def test_type_errors_read_as_gos_decoding_errors() -> None:
    deploy = schemas.kind_node("apps", "v1", "Deployment")
    assert deploy.type_error({"spec": {"replicas": "3"}}) == (
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32")
    ports = {"spec": {"template": {"spec": {"containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}}}}
    assert deploy.type_error(ports) == ("json: cannot unmarshal string into Go struct field "
                                        "ContainerPort.spec.template.spec.containers.ports.containerPort of type int32")
    assert deploy.type_error({"spec": {"template": {"spec": {"containers": {}}}}}) == (
        "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type "
        "[]v1.Container")
    assert deploy.type_error({"metadata": {"labels": {"a": 1}}}) == (
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string")
    assert deploy.type_error({"spec": {"replicas": None, "strategy": {"rollingUpdate": {"maxSurge": "25%"}}}}) is None


# ------------------------------------------------------------------ the compiled check against a reference walk
# The walks the compiled closures replaced, kept as the reference: fine(v) must equal valid(v) and clean(v).

def _ref_clean(node: schemas.Node, value: Any) -> bool:
    if node.kind == schemas.OBJECT:
        if type(value) is not dict:
            return True
        for key, item in value.items():
            sub = node.props.get(key)
            if sub is None or (item is not None and sub.kind > schemas.ANY and not _ref_clean(sub, item)):
                return False
        return True
    item = node.item
    return item is None or item.kind <= schemas.ANY or all(_ref_clean(item, v) for v in _ref_items(node, value))


def _ref_valid(node: schemas.Node, value: Any) -> bool:
    if value is None:
        return True
    if not node.accepts(value) or (node.enum is not None and value not in node.enum):
        return False
    if node.kind == schemas.OBJECT:
        return type(value) is not dict or (all(name in value for name in node.required) and all(
            _ref_valid(node.props[k], v) for k, v in value.items() if k in node.props))
    item = node.item
    return item is None or all(_ref_valid(item, v) for v in _ref_items(node, value))


def _ref_items(node: schemas.Node, value: Any) -> Any:
    if node.kind == schemas.ARRAY and type(value) is list:
        return value
    return value.values() if node.kind == schemas.MAP and type(value) is dict else ()


FIXTURE = Path(__file__).resolve().parents[3] / "bench" / "pod-realistic.json"
_CONTAINER = {"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent", "command": ["nginx"],
              "args": ["-g", "daemon off;"], "env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {
                  "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}],
              "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
              "resources": {"limits": {"cpu": "500m", "memory": 1.5e9}, "requests": {"cpu": 0.25}},
              "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10.0},
              "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
              "securityContext": {"capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True},
              "terminationMessagePolicy": "File"}
_POD_SPEC = {"containers": [_CONTAINER], "initContainers": [{**_CONTAINER, "name": "init"}],
             "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "nodeSelector": {"disk": "ssd"},
             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
             "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                 {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}},
             "volumes": [{"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}, {"name": "cfg", "configMap": {
                 "name": "cfg", "items": [{"key": "a", "path": "a"}], "defaultMode": 420}}]}
_META = {"name": "x", "namespace": "default", "labels": {"app": "web"}, "annotations": {"a": "b"},
         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "uid": "u"}],
         "managedFields": [{"manager": "m", "operation": "Update", "fieldsV1": {"f:metadata": {}}}]}
BASES: list[tuple[tuple[str, str, str], dict[str, Any]]] = [
    (("", "v1", "Pod"), {"apiVersion": "v1", "kind": "Pod", "metadata": _META, "spec": _POD_SPEC,
                         "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
    (("apps", "v1", "Deployment"), {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _META, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "strategy": {
            "type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": _POD_SPEC}}}),
    (("", "v1", "Service"), {"apiVersion": "v1", "kind": "Service", "metadata": _META, "spec": {
        "type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080}],
        "sessionAffinity": "None", "ipFamilies": ["IPv4"]}}),
    (("apiextensions.k8s.io", "v1", "CustomResourceDefinition"), {"metadata": {"name": "a.b.c"}, "spec": {
        "group": "b.c", "scope": "Namespaced", "names": {"plural": "a", "kind": "A"}, "versions": [{
            "name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "n": {"type": "integer", "enum": [1, 2]}}, "x-kubernetes-preserve-unknown-fields": True}}}}}]}}),
]
BASES.append((("", "v1", "Pod"), json.loads(FIXTURE.read_text())))


def _spots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indices)."""
    out = [path]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        out += _spots(item, (*path, key))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> tuple[schemas.Node, dict[str, Any]]:
    """A base object with a few random edits: a value replaced (any JSON), a field deleted, or a field added."""
    gvk, base = draw(st.sampled_from(BASES))
    obj = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        spots = _spots(obj)[1:]
        if not spots:
            break
        path = draw(st.sampled_from(spots))
        parent = obj
        for key in path[:-1]:
            parent = parent[key]
        edit = draw(st.sampled_from(["replace", "delete", "add", "null"]))
        if edit == "delete":
            del parent[path[-1]]
        elif edit == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["x", "name", "spec", "type", "port", "items"]))] = draw(JSON)
        else:
            parent[path[-1]] = None if edit == "null" else draw(JSON | st.sampled_from(
                ["Always", "Never", "Sometimes", "TCP", "XTP", "", "ClusterIP", "80", 80, 1.0, 1.5]))
    node = schemas.kind_node(*gvk)
    assert node is not None
    return node, obj


@settings(max_examples=400, deadline=None)
@given(mutated())
def test_compiled_check_agrees_with_the_reference_and_reporting_walks(case: tuple[schemas.Node, Any]) -> None:
    node, obj = case
    causes: list[dict[str, str]] = []
    unknown: list[tuple[str, dict[str, Any], str]] = []
    node.check(obj, "", causes)
    node.unknown(obj, "", unknown)
    assert node.fine(obj) == (_ref_valid(node, obj) and _ref_clean(node, obj)) == (not causes and not unknown)
    assert (node.type_error(obj) is None) or not node.fine(obj)


def test_bases_are_fine() -> None:
    for gvk, base in BASES:
        node = schemas.kind_node(*gvk)
        assert node is not None and node.fine(base), gvk


# Every field the 1.32 schemas list as required that kube's validation does not require (optional_fields).
NOT_REQUIRED_BY_KUBE = [
    ("io.k8s.api.apps.v1.StatefulSetSpec", "serviceName"),
    ("io.k8s.api.apps.v1.ControllerRevision", "revision"),
    ("io.k8s.api.scheduling.v1.PriorityClass", "value"),
    ("io.k8s.api.apps.v1.DaemonSetStatus", "numberMisscheduled"),
    ("io.k8s.api.apps.v1.ReplicaSetStatus", "replicas"),
    ("io.k8s.api.apps.v1.StatefulSetStatus", "replicas"),
    ("io.k8s.api.core.v1.ReplicationControllerStatus", "replicas"),
    ("io.k8s.api.autoscaling.v1.HorizontalPodAutoscalerStatus", "currentReplicas"),
    ("io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerStatus", "desiredReplicas"),
    ("io.k8s.api.policy.v1.PodDisruptionBudgetStatus", "expectedPods"),
    ("io.k8s.api.apps.v1.DeploymentCondition", "type"),
    ("io.k8s.api.apps.v1.DaemonSetCondition", "status"),
    ("io.k8s.api.apps.v1.ReplicaSetCondition", "type"),
    ("io.k8s.api.apps.v1.StatefulSetCondition", "status"),
    ("io.k8s.api.core.v1.NodeCondition", "status"),
    ("io.k8s.api.core.v1.NamespaceCondition", "type"),
    ("io.k8s.api.core.v1.ContainerStatus", "image"),
    ("io.k8s.api.core.v1.ContainerStateTerminated", "exitCode"),
    ("io.k8s.api.core.v1.NodeSystemInfo", "machineID"),
    ("io.k8s.api.core.v1.AttachedVolume", "devicePath"),
    ("io.k8s.api.core.v1.DaemonEndpoint", "Port"),
    ("io.k8s.api.storage.v1.VolumeAttachmentStatus", "attached"),
    ("io.k8s.api.core.v1.ISCSIVolumeSource", "lun"),
    ("io.k8s.api.core.v1.ISCSIPersistentVolumeSource", "lun"),
    ("io.k8s.apimachinery.pkg.apis.meta.v1.Condition", "message"),
    ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionVersion", "served"),
]


def test_required_fields_are_kubes_validation_not_the_schemas_list() -> None:
    """The schema lists them as required; kube validates their zero value and accepts it, so must the server."""
    from kinformer.server.schema.optional_fields import NOT_REQUIRED

    for definition, name in NOT_REQUIRED_BY_KUBE:
        assert name in apidefs.definition(definition)["required"], (definition, name)
        node = schemas.definition_node(definition)
        assert name not in node.required, (definition, name)
        assert name in NOT_REQUIRED[definition]
    assert {d for d, _ in NOT_REQUIRED_BY_KUBE} == set(NOT_REQUIRED)
    # what kube's validation does require stays required
    assert schemas.definition_node("io.k8s.api.apps.v1.StatefulSetSpec").required == ("selector", "template")
    assert schemas.definition_node("io.k8s.api.core.v1.ContainerPort").required == ("containerPort",)
    assert schemas.definition_node("io.k8s.api.core.v1.ContainerStatus").required == ("name",)
    assert "message" not in schemas.definition_node("io.k8s.apimachinery.pkg.apis.meta.v1.Condition").required
    assert schemas.definition_node("io.k8s.apimachinery.pkg.apis.meta.v1.Condition").required == (
        "type", "status", "lastTransitionTime", "reason")

"""Compiled schemas of built-in kinds (kube 1.32's definitions from kubernetes-validate) and their data source."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kinformer.server import apidefs, schemas
from kinformer.server.registry import BUILTINS

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
    assert deploy.valid({"spec": spec}) and deploy.clean({"spec": spec})
    cm = schemas.kind_node("", "v1", "ConfigMap")
    managed = [{"manager": "m", "fieldsV1": {"f:data": {"f:k": {}}}, "anything": "the field manager decides"}]
    assert cm.valid({"metadata": {"managedFields": managed}}) and cm.clean({"metadata": {"managedFields": managed}})


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_walks_never_raise_on_arbitrary_json(value: Any) -> None:
    for node in (schemas.kind_node("", "v1", "Pod"), schemas.kind_node("apps", "v1", "Deployment")):
        obj = {"spec": value, "metadata": value}
        causes: list[dict[str, str]] = []
        unknown: list[tuple[str, dict[str, Any], str]] = []
        node.check(obj, "", causes)
        node.unknown(obj, "", unknown)
        assert node.valid(obj) == (causes == [])
        assert node.clean(obj) == (unknown == [])


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

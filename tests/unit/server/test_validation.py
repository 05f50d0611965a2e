"""Name rules, object validation, CRD schema validation, pruning, defaulting and unknown-field detection."""

from __future__ import annotations

import copy
import re
from types import SimpleNamespace
from typing import Any

import pytest

from kinformer.server.registry.validation import (
    apply_defaults,
    generate_name,
    invalid_message,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    prune,
    prune_builtin,
    unknown_fields,
    validate_against_schema,
    validate_object,
    validate_schema_structure,
)

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                 "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                 r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def _info(kind: str, *, builtin: bool = True, schema: dict[str, Any] | None = None,
          namespaced: bool = True) -> SimpleNamespace:
    return SimpleNamespace(group="", version="v1", kind=kind, plural=kind.lower() + "s", singular=kind.lower(),
                           namespaced=namespaced, short_names=[], categories=[], verbs=[], subresources=[],
                           schema=schema, builtin=builtin, selectable_fields=[])


CONFIGMAP = _info("ConfigMap")


def _fields(causes: list[dict[str, str]]) -> list[tuple[str, str]]:
    return [(c["field"], c["reason"]) for c in causes]


# ---------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["a", "abc", "a-b.c-d", "0.1", "x" * 253])
def test_valid_subdomains(name: str) -> None:
    assert is_dns1123_subdomain(name) == []


@pytest.mark.parametrize("name", ["", "A", "a_b", "-a", "a-", "a..b", ".a", "x" * 254])
def test_invalid_subdomains(name: str) -> None:
    assert is_dns1123_subdomain(name)


def test_subdomain_message_is_kube_text() -> None:
    assert is_dns1123_subdomain("Bad_Name") == [SUBDOMAIN_MSG]
    assert is_dns1123_subdomain("a" * 254)[0] == "must be no more than 253 characters"


@pytest.mark.parametrize(("name", "ok"), [("abc", True), ("a-1", True), ("a.b", False), ("x" * 64, False),
                                          ("1abc", True), ("", False)])
def test_dns1123_label(name: str, ok: bool) -> None:
    assert (is_dns1123_label(name) == []) is ok


@pytest.mark.parametrize(("key", "ok"), [("app", True), ("example.com/app", True), ("App_1.x", True),
                                         ("a/b/c", False), ("/app", False), ("Bad_Prefix/app", False),
                                         ("app-", False), ("x" * 64, False), ("example.com/", False)])
def test_qualified_names(key: str, ok: bool) -> None:
    assert (is_qualified_name(key) == []) is ok


def test_generate_name_uses_kube_alphabet_and_length_limit() -> None:
    name = generate_name("web-")
    assert re.fullmatch(r"web-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
    long_name = generate_name("p" * 100)
    assert len(long_name) == 63 and long_name.startswith("p" * 58)
    assert len({generate_name("x-") for _ in range(50)}) > 40


# ---------------------------------------------------------------------------------------- object rules


def test_name_required_and_invalid_name_cause() -> None:
    causes = validate_object(CONFIGMAP, {"metadata": {}})
    assert causes == [{"reason": "FieldValueRequired", "message": "Required value: name or generateName is required",
                       "field": "metadata.name"}]
    assert validate_object(CONFIGMAP, {"metadata": {"generateName": "x-"}}) == []
    causes = validate_object(CONFIGMAP, {"metadata": {"name": "Bad_Name"}})
    assert causes == [{"reason": "FieldValueInvalid", "message": f'Invalid value: "Bad_Name": {SUBDOMAIN_MSG}',
                       "field": "metadata.name"}]
    assert invalid_message("ConfigMap", "Bad_Name", causes) == (
        f'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}')


def test_namespace_names_are_labels_and_services_dns1035() -> None:
    assert validate_object(_info("Namespace", namespaced=False), {"metadata": {"name": "a.b"}})
    assert validate_object(CONFIGMAP, {"metadata": {"name": "a.b"}}) == []
    causes = validate_object(_info("Service"), {"metadata": {"name": "1svc"}})
    assert "DNS-1035" in causes[0]["message"]


def test_rbac_and_apiservice_names_are_path_segments() -> None:
    role = SimpleNamespace(**{**vars(_info("ClusterRole", namespaced=False)), "group": "rbac.authorization.k8s.io"})
    assert validate_object(role, {"metadata": {"name": "system:controller:Foo_1"}, "rules": []}) == []
    causes = validate_object(role, {"metadata": {"name": "a/b"}, "rules": []})
    assert [c["message"] for c in causes] == ['Invalid value: "a/b": may not contain \'/\'']
    api = SimpleNamespace(**{**vars(_info("APIService", namespaced=False)), "group": "apiregistration.k8s.io"})
    assert not [c for c in validate_object(api, {"metadata": {"name": "v1."}}) if c["field"] == "metadata.name"]
    assert validate_object(_info("ClusterRole", namespaced=False), {"metadata": {"name": "a:b"}})  # another group


def test_labels_annotations_and_sizes() -> None:
    causes = validate_object(CONFIGMAP, {"metadata": {"name": "c", "labels": {"bad key!": "v", "ok": "bad value!"},
                                                      "annotations": {"a": "x" * (256 * 1024)}}})
    assert _fields(causes) == [("metadata.labels", "FieldValueInvalid"), ("metadata.labels", "FieldValueInvalid"),
                               ("metadata.annotations", "FieldValueTooLong")]
    assert validate_object(CONFIGMAP, {"metadata": {"name": "c", "labels": {"example.com/app": "web-1"},
                                                    "annotations": {"Example.com/Note": "anything at all"}}}) == []


def test_update_cannot_change_name_or_namespace() -> None:
    old = {"metadata": {"name": "a", "namespace": "default", "uid": "u"}}
    causes = validate_object(CONFIGMAP, {"metadata": {"name": "b", "namespace": "other"}}, old)
    assert _fields(causes) == [("metadata.name", "FieldValueInvalid"), ("metadata.namespace", "FieldValueInvalid")]
    assert causes[0]["message"] == 'Invalid value: "b": field is immutable'


def test_configmap_keys_size_and_duplicates() -> None:
    obj = {"metadata": {"name": "c"}, "data": {"ok.key_1": "v", "bad key": "v", "..x": "v", "dup": "v"},
           "binaryData": {"dup": "AA==", "bin": "not base64!"}}
    assert _fields(validate_object(CONFIGMAP, obj)) == [
        ("data[bad key]", "FieldValueInvalid"), ("data[..x]", "FieldValueInvalid"),
        ("binaryData[bin]", "FieldValueInvalid"), ("data[dup]", "FieldValueInvalid")]
    big = {"metadata": {"name": "c"}, "data": {"a": "x" * (1024 * 1024), "b": "y"}}
    assert _fields(validate_object(CONFIGMAP, big)) == [("", "FieldValueTooLong")]


def test_secret_data_must_be_base64_and_fit() -> None:
    secret = _info("Secret")
    assert validate_object(secret, {"metadata": {"name": "s"}, "data": {"k": "aGVsbG8="}, "type": "Opaque"}) == []
    assert _fields(validate_object(secret, {"metadata": {"name": "s"}, "data": {"k": "!!"}})) == [
        ("data[k]", "FieldValueInvalid")]


def test_pod_needs_named_containers_with_images() -> None:
    pod = _info("Pod")
    assert _fields(validate_object(pod, {"metadata": {"name": "p"}, "spec": {}})) == [
        ("spec.containers", "FieldValueRequired")]
    causes = validate_object(pod, {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "a", "image": "i"}, {"name": "a"}, {"image": "x"}]}})
    assert _fields(causes) == [("spec.containers[1].name", "FieldValueDuplicate"),
                               ("spec.containers[1].image", "FieldValueRequired"),
                               ("spec.containers[2].name", "FieldValueRequired")]


def test_lease_spec_types() -> None:
    lease = _info("Lease")
    good = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                                                "renewTime": "2024-01-01T00:00:00.123456Z", "leaseTransitions": 0}}
    assert validate_object(lease, good) == []
    bad = {"metadata": {"name": "l"}, "spec": {"holderIdentity": 5, "leaseDurationSeconds": 0,
                                               "renewTime": "yesterday"}}
    assert _fields(validate_object(lease, bad)) == [("spec.holderIdentity", "FieldValueTypeInvalid"),
                                                    ("spec.leaseDurationSeconds", "FieldValueInvalid"),
                                                    ("spec.renewTime", "FieldValueInvalid")]


def _crd(**spec_changes: Any) -> dict[str, Any]:
    spec = {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    spec.update(spec_changes)
    return {"metadata": {"name": "widgets.example.com"}, "spec": spec}


def test_crd_rules() -> None:
    crd = _info("CustomResourceDefinition", namespaced=False)
    assert validate_object(crd, _crd()) == []
    schema = {"openAPIV3Schema": {"type": "object"}}
    two_storage = [{"name": "v1", "served": True, "storage": True, "schema": schema},
                   {"name": "v2", "served": True, "storage": True, "schema": schema}]
    assert _fields(validate_object(crd, _crd(versions=two_storage))) == [("spec.versions", "FieldValueInvalid")]
    no_schema = [{"name": "v1", "served": True, "storage": True}]
    assert validate_object(crd, _crd(versions=no_schema)) == [{
        "reason": "FieldValueRequired", "message": "Required value: schemas are required",
        "field": "spec.versions[0].schema.openAPIV3Schema"}]
    assert _fields(validate_object(crd, _crd(scope="Galaxy"))) == [("spec.scope", "FieldValueNotSupported")]
    wrong_name = _crd()
    wrong_name["metadata"]["name"] = "gadgets.example.com"
    causes = validate_object(crd, wrong_name)
    assert _fields(causes) == [("metadata.name", "FieldValueInvalid")]
    assert causes[0]["message"].endswith('must be spec.names.plural+"."+spec.group')


# --------------------------------------------------------------------------------------- CRD schemas

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["size"],
            "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
                "color": {"type": "string", "enum": ["red", "blue"]},
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "port": {"x-kubernetes-int-or-string": True},
                "ratio": {"type": "number"},
                "note": {"type": "string", "nullable": True},
                "tags": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                             "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}},
                "options": {"type": "object", "default": {},
                            "properties": {"retries": {"type": "integer", "default": 2}}},
            },
        },
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}
WIDGET = _info("Widget", builtin=False, schema=SCHEMA)


def _widget(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2, **spec}}


def test_schema_accepts_valid_object() -> None:
    obj = _widget(color="red", name="abc", port="http", ratio=1, note=None, tags=["a"], labels={"k": "v"},
                  extra={"anything": [1, {"x": None}]}, template={"apiVersion": "v1", "kind": "X",
                                                                  "metadata": {"name": "t"}, "spec": {"x": "y"}})
    assert validate_against_schema(SCHEMA, obj) == []
    assert validate_object(WIDGET, obj) == []


def test_schema_reports_each_rule() -> None:
    obj = _widget(size="big", color="green", name="ABCDEFG", port=1.5, ratio="x", tags=[1], labels={"k": 1})
    causes = validate_against_schema(SCHEMA, obj)
    assert _fields(causes) == [
        ("spec.size", "FieldValueTypeInvalid"),
        ("spec.color", "FieldValueNotSupported"),
        ("spec.name", "FieldValueTooLong"),
        ("spec.name", "FieldValueInvalid"),
        ("spec.port", "FieldValueTypeInvalid"),
        ("spec.ratio", "FieldValueTypeInvalid"),
        ("spec.tags[0]", "FieldValueTypeInvalid"),
        ("spec.labels.k", "FieldValueTypeInvalid"),
    ]
    assert causes[0]["message"] == 'Invalid value: "string": spec.size in body must be of type integer: "string"'
    assert causes[1]["message"] == 'Unsupported value: "green": supported values: "red", "blue"'


def test_schema_required_bounds_and_lengths() -> None:
    assert _fields(validate_against_schema(SCHEMA, {"metadata": {}})) == [("spec", "FieldValueRequired")]
    obj = _widget(size=0, name="a")
    obj["spec"].pop("size")
    assert _fields(validate_against_schema(SCHEMA, obj)) == [("spec.size", "FieldValueRequired"),
                                                             ("spec.name", "FieldValueInvalid")]
    causes = validate_against_schema(SCHEMA, _widget(size=0))
    assert causes[0]["message"] == "Invalid value: 0: spec.size in body should be greater than or equal to 1"
    assert validate_against_schema(SCHEMA, _widget(ratio=None))[0]["reason"] == "FieldValueTypeInvalid"


def test_prune_drops_unknown_fields_and_reports_paths() -> None:
    obj = _widget(bogus=1, extra={"kept": True}, template={"apiVersion": "v1", "kind": "X",
                                                           "metadata": {"name": "t", "uid": "drop"},
                                                           "spec": {"x": "y", "z": 1}})
    obj["topLevel"] = "x"
    obj["status"] = {"ready": True, "phase": "gone"}
    before = copy.deepcopy(obj)
    pruned, removed = prune(SCHEMA, obj)
    assert obj == before
    assert sorted(removed) == ["spec.bogus", "spec.template.metadata.uid", "spec.template.spec.z", "status.phase",
                               "topLevel"]
    assert pruned["spec"]["extra"] == {"kept": True}
    assert pruned["metadata"] == {"name": "w"} and pruned["apiVersion"] == "example.com/v1"
    assert unknown_fields(WIDGET, obj) == removed


def test_defaults_fill_absent_fields_only() -> None:
    obj = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {}}
    assert apply_defaults(SCHEMA, obj)["spec"] == {"size": 3, "options": {"retries": 2}}
    assert obj["spec"] == {}
    kept = apply_defaults(SCHEMA, _widget(options={"retries": 7}))
    assert kept["spec"]["size"] == 2 and kept["spec"]["options"] == {"retries": 7}
    assert "status" not in apply_defaults(SCHEMA, obj)


def test_unknown_fields_for_builtins() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labelz": {}}, "data": {},
           "spec": {}}
    assert unknown_fields(CONFIGMAP, obj) == ["metadata.labelz", "spec"]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "extra": 1,
                  "spec": {"replica": 2, "template": {"spec": {"containers": [{"name": "c", "containerPrt": 1}]}}}}
    deploy = SimpleNamespace(**{**vars(_info("Deployment")), "group": "apps"})
    assert unknown_fields(deploy, deployment) == ["extra", "spec.replica",
                                                  "spec.template.spec.containers[0].containerPrt"]
    assert prune_builtin(deploy, deployment) is deployment and unknown_fields(deploy, deployment) == []
    assert deployment["spec"]["template"]["spec"]["containers"] == [{"name": "c"}]


def test_what_an_update_shares_with_the_stored_object_is_taken_as_checked() -> None:
    # the stored object was checked when it was written: a top-level field an update (a patch's result, a status
    # write's object) shares with it by identity is not walked again; every other field still is
    deploy = SimpleNamespace(**{**vars(_info("Deployment")), "group": "apps"})
    spec = {"replicas": "two", "selector": {}, "template": {}}  # never stored so: it shows what is not walked
    old = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec}
    new = {**old, "metadata": {"name": "d"}, "status": {"replicaz": 1}}
    assert unknown_fields(deploy, new, old) == ["status.replicaz"]
    new["status"] = {"replicas": 1}
    assert validate_object(deploy, new, old, spec=False) == []
    copied = {**new, "spec": {**spec, "replicas": "".join(["tw", "o"])}}  # an equal value of its own is walked
    assert [c["field"] for c in validate_object(deploy, copied, old, spec=False)] == ["spec.replicas"]
    new["status"] = {"replicas": "one"}  # something to report: the whole object is walked, as before
    assert {c["field"] for c in validate_object(deploy, new, old, spec=False)} == {"spec.replicas",
                                                                                    "status.replicas"}


def test_what_a_new_top_level_object_shares_with_the_stored_one_is_taken_as_checked() -> None:
    # a patch's new metadata (or status) keeps the stored labels and owner references: those fields are not walked
    # again, the ones of its own are (a required field judged by its presence, kept with a None in its place)
    deploy = SimpleNamespace(**{**vars(_info("Deployment")), "group": "apps"})
    generation = "".join(["tw", "o"])  # never stored so: it shows what is not walked
    old = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "generation": generation},
           "spec": {"selector": {}, "template": {}}}
    new = {**old, "metadata": {"name": "d", "generation": generation, "uid": "u"}}
    assert unknown_fields(deploy, new, old) == [] and validate_object(deploy, new, old, spec=False) == []
    new = {**old, "metadata": {"name": "d", "generation": generation, "uidd": "u"}}
    assert unknown_fields(deploy, new, old) == ["metadata.uidd"]
    new = {**old, "metadata": {"name": "d", "generation": "".join(["tw", "o"])}}  # equal, of its own: walked
    assert [c["field"] for c in validate_object(deploy, new, old, spec=False)] == ["metadata.generation"]
    new = {**old, "spec": {"selector": old["spec"]["selector"]}}  # the required template missing: walked
    assert "spec.template" in [c["field"] for c in validate_object(deploy, new, old)]


def test_builtin_schema_types_and_required_fields() -> None:
    deploy = SimpleNamespace(**{**vars(_info("Deployment")), "group": "apps"})
    obj = {"metadata": {"name": "d", "creationTimestamp": None},
           "spec": {"replicas": "3", "paused": None, "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"name": "p"}],
                                                          "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}}}
    causes = validate_object(deploy, obj)
    assert ("spec.replicas", "FieldValueTypeInvalid") in _fields(causes)
    assert ("spec.template.spec.containers[0].ports[0].containerPort", "FieldValueRequired") in _fields(causes)
    assert not any("limits" in c["field"] for c in causes)  # a Quantity is a string or a number


def test_registry_infos_are_accepted() -> None:
    from kinformer.server.registry.resources import BUILTINS

    infos = {info.kind: info for info in BUILTINS}
    assert validate_object(infos["ConfigMap"], {"metadata": {"name": "c"}, "data": {"k": "v"}}) == []
    assert validate_object(infos["Namespace"], {"metadata": {"name": "a.b"}})[0]["field"] == "metadata.name"


def test_crd_schema_structure_is_checked() -> None:
    crd = _info("CustomResourceDefinition", namespaced=False)
    bad_schema = {"type": "object", "properties": {"spec": {"type": "objekt", "pattern": "(",
                                                            "required": "name", "maxLength": -1}}}
    versions = [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": bad_schema}}]
    assert _fields(validate_object(crd, _crd(versions=versions))) == [
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].type", "FieldValueNotSupported"),
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].maxLength", "FieldValueInvalid"),
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].required", "FieldValueInvalid"),
        ("spec.versions[0].schema.openAPIV3Schema.properties[spec].pattern", "FieldValueInvalid"),
    ]
    assert validate_schema_structure(SCHEMA) == []


# ------------------------------------------------------------------------------------------- enum fields

def _template(**pod: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c", "image": "i"}], **pod}}


# (group, version, plural, body, field, kube's message), one per enumerated field kube validates
ENUM_CASES = [
    ("", "v1", "pods", _template(restartPolicy="Sometimes"), "spec.restartPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ("", "v1", "pods", _template(dnsPolicy="Google"), "spec.dnsPolicy",
     'Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicy": "Bogus"}]}},
     "spec.containers[0].imagePullPolicy", 'Unsupported value: "Bogus": supported values: "Always", '
     '"IfNotPresent", "Never"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "terminationMessagePolicy": "Log"}]}},
     "spec.containers[0].terminationMessagePolicy", 'Unsupported value: "Log": supported values: "File", '
     '"FallbackToLogsOnError"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "resizePolicy": [
        {"resourceName": "cpu", "restartPolicy": "Always"}]}]}}, "spec.containers[0].resizePolicy",
     'Unsupported value: "Always": supported values: "NotRequired", "RestartContainer"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "ports": [
        {"containerPort": 80, "protocol": "XTP"}]}]}}, "spec.containers[0].ports[0].protocol",
     'Unsupported value: "XTP": supported values: "SCTP", "TCP", "UDP"'),
    ("", "v1", "pods", _template(tolerations=[{"key": "k", "operator": "Maybe"}]), "spec.tolerations[0].operator",
     'Unsupported value: "Maybe": supported values: "Equal", "Exists"'),
    ("", "v1", "pods", _template(tolerations=[{"key": "k", "effect": "Evict"}]), "spec.tolerations[0].effect",
     'Unsupported value: "Evict": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'),
    ("", "v1", "pods", _template(preemptionPolicy="Always"), "spec.preemptionPolicy",
     'Unsupported value: "Always": supported values: "PreemptLowerPriority", "Never"'),
    ("", "v1", "pods", _template(os={"name": "plan9"}), "spec.os.name",
     'Unsupported value: "plan9": supported values: "linux", "windows"'),
    ("", "v1", "pods", _template(securityContext={"fsGroupChangePolicy": "Never"}),
     "spec.securityContext.fsGroupChangePolicy", 'Unsupported value: "Never": supported values: "Always", '
     '"OnRootMismatch"'),
    ("", "v1", "pods", _template(securityContext={"seccompProfile": {"type": "Strict"}}),
     "spec.securityContext.seccompProfile.type", 'Unsupported value: "Strict": supported values: "Localhost", '
     '"RuntimeDefault", "Unconfined"'),
    ("", "v1", "pods", _template(securityContext={"appArmorProfile": {"type": "Strict"}}),
     "spec.securityContext.appArmorProfile.type", 'Unsupported value: "Strict": supported values: "Localhost", '
     '"RuntimeDefault", "Unconfined"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "livenessProbe": {
        "httpGet": {"port": 80, "scheme": "FTP"}}}]}}, "spec.containers[0].livenessProbe.httpGet.scheme",
     'Unsupported value: "FTP": supported values: "HTTP", "HTTPS"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [
        {"name": "v", "mountPath": "/v", "mountPropagation": "Both"}]}]}},
     "spec.containers[0].volumeMounts.mountPropagation",
     'Unsupported value: "Both": supported values: "Bidirectional", "HostToContainer", "None"'),
    ("", "v1", "pods", {"spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [
        {"name": "v", "mountPath": "/v", "readOnly": True, "recursiveReadOnly": "Always"}]}]}},
     "spec.containers[0].volumeMounts.recursiveReadOnly",
     'Unsupported value: "Always": supported values: "Disabled", "Enabled", "IfPossible"'),
    ("", "v1", "pods", _template(volumes=[{"name": "v", "azureDisk": {"diskName": "d", "diskURI": "https://d",
                                                                      "cachingMode": "WriteBack"}}]),
     "spec.volumes[0].azureDisk.cachingMode", 'Unsupported value: "WriteBack": supported values: "None", '
     '"ReadOnly", "ReadWrite"'),
    ("", "v1", "pods", _template(volumes=[{"name": "v", "hostPath": {"path": "/x", "type": "Pipe"}}]),
     "spec.volumes[0].hostPath.type", 'Unsupported value: "Pipe": supported values: "", "BlockDevice", '
     '"CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"'),
    ("", "v1", "pods", _template(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone",
                                                             "whenUnsatisfiable": "Wait", "nodeTaintsPolicy": "X"}]),
     "spec.topologySpreadConstraints[0].whenUnsatisfiable",
     'Unsupported value: "Wait": supported values: "DoNotSchedule", "ScheduleAnyway"'),
    ("", "v1", "pods", _template(topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone",
                                                             "whenUnsatisfiable": "DoNotSchedule",
                                                             "nodeAffinityPolicy": "Skip"}]),
     "spec.topologySpreadConstraints[0].nodeAffinityPolicy", 'Unsupported value: "Skip": supported values: '
     '"Honor", "Ignore"'),
    ("", "v1", "services", {"spec": {"type": "Public", "ports": [{"port": 80}]}}, "spec.type",
     'Unsupported value: "Public": supported values: "ClusterIP", "ExternalName", "LoadBalancer", "NodePort"'),
    ("", "v1", "services", {"spec": {"ports": [{"port": 80, "protocol": "ICMP"}]}}, "spec.ports[0].protocol",
     'Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"'),
    ("", "v1", "services", {"spec": {"sessionAffinity": "Cookie"}}, "spec.sessionAffinity",
     'Unsupported value: "Cookie": supported values: "ClientIP", "None"'),
    ("", "v1", "services", {"spec": {"externalTrafficPolicy": "Node"}}, "spec.externalTrafficPolicy",
     'Unsupported value: "Node": supported values: "Cluster", "Local"'),
    ("", "v1", "services", {"spec": {"internalTrafficPolicy": "Node"}}, "spec.internalTrafficPolicy",
     'Unsupported value: "Node": supported values: "Cluster", "Local"'),
    ("", "v1", "services", {"spec": {"ipFamilyPolicy": "DualStack"}}, "spec.ipFamilyPolicy",
     'Unsupported value: "DualStack": supported values: "PreferDualStack", "RequireDualStack", "SingleStack"'),
    ("", "v1", "services", {"spec": {"ipFamilies": ["IPv4", "IPv5"]}}, "spec.ipFamilies[1]",
     'Unsupported value: "IPv5": supported values: "IPv4", "IPv6"'),
    ("", "v1", "persistentvolumeclaims", {"spec": {"accessModes": ["ReadWriteOnce", "WriteOnly"]}},
     "spec.accessModes", 'Unsupported value: "WriteOnly": supported values: "ReadOnlyMany", "ReadWriteMany", '
     '"ReadWriteOnce", "ReadWriteOncePod"'),
    ("", "v1", "persistentvolumeclaims", {"spec": {"volumeMode": "Raw"}}, "spec.volumeMode",
     'Unsupported value: "Raw": supported values: "Block", "Filesystem"'),
    ("", "v1", "persistentvolumes", {"spec": {"accessModes": ["Shared"]}}, "spec.accessModes",
     'Unsupported value: "Shared": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", '
     '"ReadWriteOncePod"'),
    ("", "v1", "persistentvolumes", {"spec": {"volumeMode": "Raw"}}, "spec.volumeMode",
     'Unsupported value: "Raw": supported values: "Block", "Filesystem"'),
    ("", "v1", "persistentvolumes", {"spec": {"persistentVolumeReclaimPolicy": "Keep"}},
     "spec.persistentVolumeReclaimPolicy", 'Unsupported value: "Keep": supported values: "Delete", "Recycle", '
     '"Retain"'),
    ("apps", "v1", "deployments", {"spec": {"selector": {}, "template": _template(),
                                            "strategy": {"type": "BlueGreen"}}},
     "spec.strategy.type", 'Unsupported value: "BlueGreen": supported values: "Recreate", "RollingUpdate"'),
    ("apps", "v1", "statefulsets", {"spec": {"selector": {}, "template": _template(),
                                             "podManagementPolicy": "Random"}}, "spec.podManagementPolicy",
     "Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel'"),
    ("batch", "v1", "jobs", {"spec": {"template": _template(), "podFailurePolicy": {"rules": [
        {"action": "Retry", "onExitCodes": {"operator": "Is", "values": [1]}}]}}},
     "spec.podFailurePolicy.rules[0].action", 'Unsupported value: "Retry": supported values: "Count", '
     '"FailIndex", "FailJob", "Ignore"'),
    ("batch", "v1", "jobs", {"spec": {"template": _template(), "podFailurePolicy": {"rules": [
        {"action": "Ignore", "onExitCodes": {"operator": "Is", "values": [1]}}]}}},
     "spec.podFailurePolicy.rules[0].onExitCodes.operator", 'Unsupported value: "Is": supported values: "In", '
     '"NotIn"'),
    ("networking.k8s.io", "v1", "ingresses", {"spec": {"rules": [{"http": {"paths": [
        {"path": "/", "pathType": "Regex", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}]}},
     "spec.rules[0].http.paths[0].pathType", 'Unsupported value: "Regex": supported values: "Exact", '
     '"ImplementationSpecific", "Prefix"'),
    ("batch", "v1", "jobs", {"spec": {"template": _template(), "completionMode": "Ordered"}}, "spec.completionMode",
     'Unsupported value: "Ordered": supported values: "NonIndexed", "Indexed"'),
    ("batch", "v1", "jobs", {"spec": {"template": _template(), "podReplacementPolicy": "Never"}},
     "spec.podReplacementPolicy", 'Unsupported value: "Never": supported values: "TerminatingOrFailed", "Failed"'),
    ("batch", "v1", "cronjobs", {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": _template()}},
                                          "concurrencyPolicy": "Queue"}}, "spec.concurrencyPolicy",
     'Unsupported value: "Queue": supported values: "Allow", "Forbid", "Replace"'),
    ("networking.k8s.io", "v1", "networkpolicies", {"spec": {"podSelector": {}, "policyTypes": ["Ingress", "Both"]}},
     "spec.policyTypes[1]", 'Unsupported value: "Both": supported values: "Ingress", "Egress"'),
    ("policy", "v1", "poddisruptionbudgets", {"spec": {"unhealthyPodEvictionPolicy": "Never"}},
     "spec.unhealthyPodEvictionPolicy", 'Unsupported value: "Never": supported values: "AlwaysAllow", '
     '"IfHealthyBudget"'),
]


@pytest.mark.parametrize(("group", "version", "plural", "body", "field", "message"), ENUM_CASES,
                         ids=[c[4] + "@" + c[2] for c in ENUM_CASES])
def test_enum_fields_answer_as_kube(group: str, version: str, plural: str, body: dict[str, Any], field: str,
                                    message: str) -> None:
    from kinformer.server.registry.resources import Registry

    info = Registry().get(group, version, plural)
    obj = {"metadata": {"name": "x"}, **body}
    found = [c for c in validate_object(info, obj) if c["field"] == field]
    reason = "FieldValueInvalid" if message.startswith("Invalid") else "FieldValueNotSupported"
    assert found == [{"reason": reason, "message": message, "field": field}]


def test_enum_fields_take_their_values_and_defaulted_empty_strings() -> None:
    from kinformer.server.registry.resources import Registry

    pods, pvcs = Registry().get("", "v1", "pods"), Registry().get("", "v1", "persistentvolumeclaims")
    for policy in ("Always", "OnFailure", "Never", ""):
        assert validate_object(pods, {"metadata": {"name": "x"}, **_template(restartPolicy=policy)}) == []
    assert validate_object(pvcs, {"metadata": {"name": "x"}, "spec": {"accessModes": ["ReadWriteOncePod"]}}) == []
    assert _fields(validate_object(pvcs, {"metadata": {"name": "x"}, "spec": {"volumeMode": ""}})) == [
        ("spec.volumeMode", "FieldValueNotSupported")]
    assert _fields(validate_object(pods, {"metadata": {"name": "x"}, **_template(restartPolicy=3)})) == [
        ("spec.restartPolicy", "FieldValueTypeInvalid")]


def test_every_enum_of_the_table_reaches_its_compiled_field() -> None:
    from kinformer.server.schema import enums, schemas

    for (definition, field), enum in enums.BUILTIN_ENUMS.items():
        node = schemas.definition_node(definition).props[field]
        node = node.item or node
        assert node.enum_cause is not None and set(enum.values) <= set(node.enum or ()), (definition, field)

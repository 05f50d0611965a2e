"""ki.crd: Python types -> structural CRD schemas, as controller-gen's markers would write them."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import msgspec
import pytest

import kinformer as ki
from kinformer.authoring import schema_of


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@dataclass
class Port:
    """A port the thing listens on."""

    name: str
    port: Annotated[int, ki.Minimum(1), ki.Maximum(65535)]


@dataclass
class FooSpec:
    """Foo's desired state."""

    image: Annotated[str, ki.Pattern("^[a-z]"), ki.MaxLength(100)]
    """The container image."""
    replicas: Annotated[int, ki.Minimum(0), ki.Rule("self < 10", message="at most 9 replicas")] = 1
    color: Color = Color.RED
    mode: Literal["a", "b"] = "a"
    ports: Annotated[list[Port], ki.ListType("map", ("name",)), ki.MaxItems(8)] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    tags: set[str] = field(default_factory=set)
    note: Optional[str] = None  # noqa: UP045 (the spelling under test)
    extra: Any = None


@dataclass
class FooStatus:
    readyReplicas: int = 0


def test_dataclass_fields_become_properties_with_required_defaults_and_docs() -> None:
    schema = schema_of(FooSpec)
    props = schema["properties"]
    assert schema["type"] == "object" and schema["required"] == ["image"]
    assert schema["description"] == "Foo's desired state."
    assert props["image"]["type"] == "string" and props["image"]["pattern"] == "^[a-z]"
    assert props["image"]["maxLength"] == 100
    assert props["image"]["description"].startswith("The container image.")
    assert props["replicas"]["minimum"] == 0 and props["replicas"]["default"] == 1
    assert props["replicas"]["x-kubernetes-validations"] == [{"rule": "self < 10", "message": "at most 9 replicas"}]
    assert props["color"] == {"type": "string", "enum": ["red", "blue"], "default": "red",
                              "description": 'Constraints: default "red".'}
    assert props["mode"]["enum"] == ["a", "b"]
    assert props["ports"]["x-kubernetes-list-type"] == "map"
    assert props["ports"]["x-kubernetes-list-map-keys"] == ["name"]
    assert props["ports"]["items"]["required"] == ["name", "port"] and props["ports"]["maxItems"] == 8
    assert props["ports"]["items"]["properties"]["port"]["maximum"] == 65535
    assert props["labels"]["additionalProperties"] == {"type": "string"}
    assert props["tags"]["x-kubernetes-list-type"] == "set"
    assert props["note"] == {"type": "string", "nullable": True}
    assert props["extra"] == {"x-kubernetes-preserve-unknown-fields": True}


def test_constraints_are_said_in_the_description_kubectl_explain_prints() -> None:
    replicas = schema_of(FooSpec)["properties"]["replicas"]
    assert replicas["description"] == "Constraints: minimum 0; default 1; at most 9 replicas."


class Spec(TypedDict):
    title: Annotated[str, ki.MinLength(1)]
    size: NotRequired[Annotated[int, ki.Default(3)]]


class Struct(msgspec.Struct, rename="camel"):
    ready_replicas: int = 0
    last_seen: str | None = None


def test_typeddict_required_keys_and_markers_even_as_string_annotations() -> None:
    schema = schema_of(Spec)
    assert schema["required"] == ["title"] and schema["properties"]["size"]["default"] == 3


def test_msgspec_struct_uses_wire_names_and_defaults() -> None:
    props = schema_of(Struct)["properties"]
    assert set(props) == {"readyReplicas", "lastSeen"} and props["readyReplicas"]["default"] == 0
    assert props["lastSeen"]["nullable"] is True


def test_pydantic_model_when_installed() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Model(pydantic.BaseModel):
        name: str = pydantic.Field(description="Who.")
        count: Annotated[int, ki.Maximum(3)] = 2

    schema = schema_of(Model)
    assert schema["required"] == ["name"] and schema["properties"]["name"]["description"] == "Who."
    assert schema["properties"]["count"]["maximum"] == 3 and schema["properties"]["count"]["default"] == 2


@dataclass
class Node:
    children: list[Node]


@pytest.mark.parametrize(("tp", "message"), [
    (Node, "recursive type Node -> Node"),
    (int | str, "only X | None"),
    (dict[int, str], "JSON object keys are strings"),
    (tuple[int, str], r"only tuple\[X, \.\.\.\]"),
    (Literal["a", 1], "enum values must all be"),
    (complex, "has no OpenAPI schema"),
])
def test_types_without_a_structural_schema_are_refused(tp: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        schema_of(tp)


def test_crd_names_subresources_columns_and_versions() -> None:
    crd = ki.crd(FooSpec, group="example.com", version="v1", kind="Policy", status=FooStatus,
                 short_names=["po1"], categories=["all"], scope="Cluster",
                 printer_columns=[ki.PrinterColumn("Replicas", ".spec.replicas", "integer", priority=1)],
                 scale=ki.Scale(label_selector_path=".status.selector"),
                 versions=[ki.Version("v1beta1", FooSpec, deprecated="use v1")])
    assert crd["metadata"]["name"] == "policies.example.com"
    spec = crd["spec"]
    assert spec["scope"] == "Cluster" and spec["names"] == {
        "plural": "policies", "singular": "policy", "kind": "Policy", "listKind": "PolicyList",
        "shortNames": ["po1"], "categories": ["all"]}
    v1, beta = spec["versions"]
    assert (v1["name"], v1["storage"], beta["storage"]) == ("v1", True, False)
    assert v1["subresources"] == {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                          "statusReplicasPath": ".status.replicas",
                                                          "labelSelectorPath": ".status.selector"}}
    assert v1["additionalPrinterColumns"] == [{"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas",
                                               "priority": 1}]
    assert "subresources" not in beta and beta["deprecated"] is True and beta["deprecationWarning"] == "use v1"
    root = v1["schema"]["openAPIV3Schema"]
    assert set(root["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert "status" not in beta["schema"]["openAPIV3Schema"]["properties"]


def test_an_extra_version_may_be_the_storage_version() -> None:
    crd = ki.crd(FooSpec, group="example.com", version="v2", kind="Foo",
                 versions=[ki.Version("v1", FooSpec, storage=True)])
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [("v2", False), ("v1", True)]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"group": "example"}, "at least one dot"),
    ({"kind": "foo"}, "CamelCase"),
    ({"version": "1"}, "v1, v1beta2"),
    ({"versions": [ki.Version("v1", FooSpec)]}, "distinct"),
    ({"versions": [ki.Version("v2", FooSpec, storage=True), ki.Version("v3", FooSpec, storage=True)]},
     "exactly one version"),
    ({"scope": "Global"}, "Namespaced or Cluster"),
])
def test_names_kube_apiserver_would_refuse_are_refused(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"group": "example.com", "version": "v1", "kind": "Foo", **kwargs}
    with pytest.raises(ValueError, match=message):
        ki.crd(FooSpec, **args)


def test_bad_markers_are_refused_when_written() -> None:
    with pytest.raises(ValueError, match="non-negative int"):
        ki.MaxLength(-1)
    with pytest.raises(ValueError, match="needs keys"):
        ki.ListType("map")


@pytest.mark.parametrize(("kind", "plural"), [("Foo", "foos"), ("Policy", "policies"), ("Bus", "buses"),
                                              ("Gateway", "gateways"), ("Box", "boxes")])
def test_default_plural(kind: str, plural: str) -> None:
    assert ki.crd(FooSpec, group="a.b", version="v1", kind=kind)["spec"]["names"]["plural"] == plural

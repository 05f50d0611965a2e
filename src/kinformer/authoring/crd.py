"""``ki.crd``: an apiextensions.k8s.io/v1 CustomResourceDefinition from Python types.

``ki.crd(FooSpec, group="example.com", version="v1", kind="Foo", status=FooStatus)`` returns the CRD as a dict
(ready for ``client.create("customresourcedefinitions", crd)`` or ``yaml.safe_dump``). The schema of each
version is ``{apiVersion, kind, metadata, spec, status}`` with spec and status from :func:`.schema.schema_of`;
giving a status type turns on the status subresource, :class:`Scale` the scale subresource. Extra versions are
:class:`Version` values; exactly one version of the result is the storage version (the main one unless an extra
version says ``storage=True``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from kinformer.authoring.schema import schema_of
from kinformer.kinds.apiextensions_v1 import (
    CustomResourceColumnDefinition,
    CustomResourceDefinition,
    CustomResourceDefinitionNames,
    CustomResourceDefinitionVersion,
    CustomResourceSubresourceScale,
)

__all__ = ["PrinterColumn", "Scale", "Version", "crd", "default_plural"]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")


@dataclass(frozen=True)
class PrinterColumn:
    """A column ``kubectl get`` prints: ``json_path`` is a JSONPath into the object (``.spec.replicas``)."""

    name: str
    json_path: str
    type: Literal["string", "integer", "number", "boolean", "date"] = "string"
    description: str | None = None
    priority: int = 0
    format: str | None = None

    def to_dict(self) -> CustomResourceColumnDefinition:
        out: CustomResourceColumnDefinition = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description is not None:
            out["description"] = self.description
        if self.format is not None:
            out["format"] = self.format
        if self.priority:
            out["priority"] = self.priority
        return out


@dataclass(frozen=True)
class Scale:
    """The scale subresource: where the desired and observed replica counts (and the selector) live."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def to_dict(self) -> CustomResourceSubresourceScale:
        out: CustomResourceSubresourceScale = {"specReplicasPath": self.spec_replicas_path,
                                               "statusReplicasPath": self.status_replicas_path}
        if self.label_selector_path is not None:
            out["labelSelectorPath"] = self.label_selector_path
        return out


@dataclass(frozen=True)
class Version:
    """One more version of the kind, with its own spec (and status) types."""

    name: str
    spec: object
    status: object = None
    served: bool = True
    storage: bool = False
    deprecated: bool | str = False  # a string is the deprecation warning
    printer_columns: Sequence[PrinterColumn] = ()
    scale: Scale | None = None


def default_plural(kind: str) -> str:
    """The lower-case plural kube tools guess for ``kind`` (``Policy`` -> ``policies``, ``Bus`` -> ``buses``)."""
    word = kind.lower()
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _object_schema(spec: object, status: object, description: str) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string", "description": "The versioned schema of this object."},
        "kind": {"type": "string", "description": "The REST resource this object represents."},
        "metadata": {"type": "object"},
        "spec": schema_of(spec),
    }
    if status is not None:
        properties["status"] = schema_of(status)
    return {"type": "object", "description": description, "properties": properties}


def _version(v: Version, description: str) -> CustomResourceDefinitionVersion:
    out: dict[str, Any] = {"name": v.name, "served": v.served, "storage": v.storage,
                           "schema": {"openAPIV3Schema": _object_schema(v.spec, v.status, description)}}
    subresources: dict[str, Any] = {}
    if v.status is not None:
        subresources["status"] = {}
    if v.scale is not None:
        subresources["scale"] = v.scale.to_dict()
    if subresources:
        out["subresources"] = subresources
    if v.printer_columns:
        out["additionalPrinterColumns"] = [c.to_dict() for c in v.printer_columns]
    if v.deprecated:
        out["deprecated"] = True
        if isinstance(v.deprecated, str):
            out["deprecationWarning"] = v.deprecated
    return cast(CustomResourceDefinitionVersion, out)


def _check_names(group: str, kind: str, plural: str, versions: Sequence[Version]) -> None:
    if "." not in group or not all(_DNS_LABEL.match(part) for part in group.split(".")):
        raise ValueError(f"group must be a DNS subdomain with at least one dot (example.com), got {group!r}")
    if not _KIND.match(kind):
        raise ValueError(f"kind must be CamelCase (Foo), got {kind!r}")
    if not _DNS_LABEL.match(plural):
        raise ValueError(f"plural must be a lower-case DNS label, got {plural!r}")
    names = [v.name for v in versions]
    for name in names:
        if not _VERSION.match(name):
            raise ValueError(f"version must look like v1, v1beta2 or v2alpha1, got {name!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"versions must be distinct, got {names}")
    if sum(v.storage for v in versions) != 1:
        raise ValueError(f"exactly one version must be the storage version, got {names}")


def crd(spec: object, *, group: str, version: str, kind: str, status: object = None, plural: str | None = None,
        singular: str | None = None, scope: Literal["Namespaced", "Cluster"] = "Namespaced",
        short_names: Sequence[str] = (), categories: Sequence[str] = (), list_kind: str | None = None,
        printer_columns: Sequence[PrinterColumn] = (), scale: Scale | None = None,
        versions: Sequence[Version] = (), description: str | None = None) -> CustomResourceDefinition:
    """The CRD serving ``kind`` in ``group`` at ``version`` (plus ``versions``), its schema from ``spec``/``status``.

    ``ValueError`` for names kube-apiserver would refuse; ``TypeError`` for a type that has no structural schema.
    """
    plural = plural or default_plural(kind)
    description = description or f"{kind} is the Schema for the {plural} API."
    main = Version(version, spec, status, storage=not any(v.storage for v in versions),
                   printer_columns=printer_columns, scale=scale)
    every = [main, *versions]
    _check_names(group, kind, plural, every)
    if scope not in ("Namespaced", "Cluster"):
        raise ValueError(f"scope must be Namespaced or Cluster, got {scope!r}")
    names: CustomResourceDefinitionNames = {"plural": plural, "singular": singular or kind.lower(), "kind": kind,
                             "listKind": list_kind or kind + "List"}
    if short_names:
        names["shortNames"] = list(short_names)
    if categories:
        names["categories"] = list(categories)
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "names": names, "scope": scope,
                     "versions": [_version(v, description) for v in every]}}

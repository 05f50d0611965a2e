"""Python types as resource names: ``client.get(Deployment, ...)``, ``factory.informer(Website)``.

A type stands for the resource whose objects it describes, for type checkers only: objects stay the dicts (or
read-only mappings) the client decodes, so the typed path costs one name lookup per call, nothing per object.

* a generated TypedDict of :mod:`kinformer.kinds` (``kinformer.kinds.apps_v1.Deployment``) names its group,
  version and kind: ``"apps/v1/Deployment"``;
* any other class names its kind by its class name (``Website``), found in whichever group serves it; set
  ``__api_version__ = "example.com/v1"`` on the class (after the class statement, for a TypedDict) to pin the
  group and version.

The spelling returned is one :mod:`kinformer.client.discovery` resolves.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

__all__ = ["ObjT", "resource_spec"]

#: the type of the objects of a typed resource
ObjT = TypeVar("ObjT")

_KINDS_PACKAGE = "kinformer.kinds."
_GROUPS = {
    "core": "", "apps": "apps", "autoscaling": "autoscaling", "batch": "batch", "policy": "policy",
    "admissionregistration": "admissionregistration.k8s.io", "apiextensions": "apiextensions.k8s.io",
    "apiregistration": "apiregistration.k8s.io", "apiserverinternal": "internal.apiserver.k8s.io",
    "authentication": "authentication.k8s.io", "authorization": "authorization.k8s.io",
    "certificates": "certificates.k8s.io", "coordination": "coordination.k8s.io", "discovery": "discovery.k8s.io",
    "events": "events.k8s.io", "flowcontrol": "flowcontrol.apiserver.k8s.io", "networking": "networking.k8s.io",
    "node": "node.k8s.io", "rbac": "rbac.authorization.k8s.io", "resource": "resource.k8s.io",
    "scheduling": "scheduling.k8s.io", "storage": "storage.k8s.io", "storagemigration": "storagemigration.k8s.io",
}


@functools.cache
def resource_spec(tp: type[Any]) -> str:
    """The resource name ``tp`` stands for (``TypeError`` for a value that is not a class)."""
    if not isinstance(tp, type):
        raise TypeError(f"a resource is a name (str), a Resource or a class, got {tp!r}")
    api_version = tp.__dict__.get("__api_version__")
    if isinstance(api_version, str) and api_version:
        return f"{api_version}/{tp.__name__}"
    module = tp.__module__
    if module.startswith(_KINDS_PACKAGE):
        prefix, _, version = module.removeprefix(_KINDS_PACKAGE).rpartition("_")
        if prefix in _GROUPS:
            group = _GROUPS[prefix]
            return f"{group}/{version}/{tp.__name__}" if group else f"{version}/{tp.__name__}"
    return tp.__name__

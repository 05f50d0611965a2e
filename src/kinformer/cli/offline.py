"""Resource names resolved without a server: the built-in catalogue of kube 1.32 plus given CRDs.

Accepts the spellings :mod:`kinformer.client.discovery` accepts (plural, singular, kind or short name, optionally
qualified by group and version); an unknown name with a group qualifier (``widgets.example.com``) is taken as
``plural.group``. Anything else is a ``LookupError`` that says how to spell it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kinformer.client.discovery import parse_resource_spec
from kinformer.server.registry.resources import BUILTINS, ResourceInfo, crd_resources

__all__ = ["OfflineResolver"]


def _names(info: ResourceInfo) -> set[str]:
    return {info.plural, info.singular, info.kind.lower(), *info.short_names}


class OfflineResolver:
    """``resolver(spec) -> (group, plural)`` over the built-ins and ``crds``."""

    def __init__(self, crds: Iterable[Mapping[str, Any]] = ()) -> None:
        self.resources: list[ResourceInfo] = [r for crd in crds for r in crd_resources(crd)] + list(BUILTINS)

    def __call__(self, spec: str) -> tuple[str, str]:
        candidates = parse_resource_spec(spec)
        for cand in candidates:
            for info in self.resources:
                if (cand.name.lower() in _names(info) and cand.group in (None, info.group)
                        and cand.version in (None, info.version)):
                    return info.group, info.plural
        qualified = next((c for c in candidates if c.group), None)
        if qualified is not None:
            return qualified.group or "", qualified.name
        raise LookupError(f"cannot resolve {spec!r} without a server: spell it plural.group (widgets.example.com) "
                          "or pass its CRD with --crd")

"""``MODULE:ATTR`` targets of ``kinformer run``, ``rbac`` and ``crd``: load them and build their Manager.

MODULE is imported with the current directory first on ``sys.path`` (as ``python -m`` does); ATTR is a dotted
attribute path. A Manager target is used as it is; a callable is called with the Client (its result, or the
awaited result, must be a Manager). Bad input is a :class:`TargetError` naming the target.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kinformer.client import Client
    from kinformer.controller import Manager

__all__ = ["TargetError", "crds_of", "dump_yaml", "is_crd", "load", "manager_of", "module_crds"]


class TargetError(Exception):
    """A ``MODULE:ATTR`` target that cannot be loaded or is of the wrong kind."""


def load(target: str) -> tuple[ModuleType, Any]:
    """The module and the attribute ``target`` names."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise TargetError(f"expected MODULE:ATTR, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise TargetError(f"cannot import {module_name!r}: {exc}") from exc
    value: Any = module
    for part in attr.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise TargetError(f"{module_name!r} has no attribute {attr!r}") from None
    return module, value


async def manager_of(value: Any, client: Client, target: str) -> Manager:
    """The Manager ``value`` is, or that calling it with ``client`` returns."""
    from kinformer.controller import Manager

    if not isinstance(value, Manager):
        if not callable(value):
            raise TargetError(f"{target} is neither a Manager nor a callable returning one")
        value = value(client)
        if inspect.isawaitable(value):
            value = await value
    if not isinstance(value, Manager):
        raise TargetError(f"{target} returned {type(value).__name__}, not a Manager")
    return value


def is_crd(value: Any) -> bool:
    return isinstance(value, dict) and value.get("kind") == "CustomResourceDefinition"


def module_crds(module: ModuleType) -> list[dict[str, Any]]:
    """The CRD dicts bound to ``module``'s top-level names (singly or in a list or tuple)."""
    found: list[dict[str, Any]] = []
    for value in vars(module).values():
        for item in value if isinstance(value, list | tuple) else (value,):
            if is_crd(item) and all(item is not f for f in found):
                found.append(item)
    return found


def crds_of(value: Any, target: str) -> list[dict[str, Any]]:
    """``value`` as a list of CRD dicts (it is one, or a list or tuple of them)."""
    crds = list(value) if isinstance(value, list | tuple) else [value]
    if not crds or not all(is_crd(c) for c in crds):
        raise TargetError(f"{target} is not a CustomResourceDefinition dict or a list of them")
    return crds


def dump_yaml(docs: Sequence[Mapping[str, object]]) -> str:
    """``docs`` as one YAML stream, keys in the order given."""
    import yaml

    return yaml.safe_dump_all(docs, sort_keys=False)

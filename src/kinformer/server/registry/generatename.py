"""kube-apiserver's retry of a create whose name it generated (KEP-4420, feature RetryGenerateName: beta and on
by default in 1.31, GA and locked on in 1.32).

A create with ``metadata.generateName`` and no ``metadata.name`` is attempted up to
:data:`MAX_GENERATE_NAME_ATTEMPTS` times in all, each attempt on a fresh copy of the object as decoded (so each
generates its own name and runs the create's preparation and admission again), as long as the attempt fails
with AlreadyExists; the last attempt's error is the answer (the store's ``generate_name_conflict``: 409
AlreadyExists "... the server was not able to generate a unique name for the object"). Any other outcome ends
the loop at once. A create that names its object is attempted once: its AlreadyExists is the client's.

One difference from kube: there, mutating admission runs once before the attempts (on the object without a
name) and only the validation and validating admission run per attempt; here the name is generated before
admission, so each attempt runs the whole chain, mutating webhooks included, and they see the name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from ..machinery import status as st
from ..machinery.jsoncopy import json_copy

__all__ = ["MAX_GENERATE_NAME_ATTEMPTS", "create_generating_name", "needs_name_generation"]

T = TypeVar("T")

#: kube's ``maxNameGenerationCreateAttempts`` (the first attempt included).
MAX_GENERATE_NAME_ATTEMPTS = 8


def needs_name_generation(obj: Mapping[str, Any]) -> bool:
    """Whether the server picks ``obj``'s name: a non-empty string ``generateName`` and no ``name``."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or meta.get("name"):
        return False
    prefix = meta.get("generateName")
    return isinstance(prefix, str) and bool(prefix)


async def create_generating_name(obj: dict[str, Any], attempt: Callable[[dict[str, Any]], Awaitable[T]]) -> T:
    """``attempt(obj)``, retried on AlreadyExists while the server generates the name (see the module).

    ``attempt`` may mutate the object it is given; every attempt but the last gets a copy of ``obj``.
    """
    if not needs_name_generation(obj):
        return await attempt(obj)
    for _ in range(MAX_GENERATE_NAME_ATTEMPTS - 1):
        try:
            return await attempt(json_copy(obj))
        except st.StatusError as err:
            if err.reason != "AlreadyExists":
                raise
    return await attempt(obj)

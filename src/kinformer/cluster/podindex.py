"""Cached pods as the cluster's parts read them (node lifecycle, taint eviction, pod GC): the pods
informer's index by ``spec.nodeName`` and the reference an event about a pod names.

The index is named after the field, so ``manager.client.list("pods", field_selector="spec.nodeName=n")``
reads it too; unassigned pods are not indexed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kinformer.cache.shared_informer import SharedIndexInformer
    from kinformer.controller import Manager

NODE_NAME_INDEX = "spec.nodeName"


def _node_name(pod: Mapping[str, Any]) -> list[str]:
    name = (pod.get("spec") or {}).get("nodeName")
    return [name] if name else []


def pods_informer(manager: Manager) -> SharedIndexInformer:
    """The Manager's shared pods informer, indexed by node name (the index added once)."""
    informer = manager.informer("pods")
    if NODE_NAME_INDEX not in informer.indexer.get_indexers():
        informer.add_indexers({NODE_NAME_INDEX: _node_name})
    return informer


def pods_on_node(informer: SharedIndexInformer, node: str) -> list[Any]:
    """The cached pods assigned to ``node``."""
    return informer.indexer.by_index(NODE_NAME_INDEX, node)


def pod_reference(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The pod as an event's ``regarding`` names it (informer objects may lack kind and apiVersion)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod["metadata"]}

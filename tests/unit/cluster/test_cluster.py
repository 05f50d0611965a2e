"""The cluster's frame: which controllers run, and that a server asked for none runs nothing."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kinformer.cluster import CONTROLLERS, ClusterOptions
from kinformer.cluster.cluster import controller_names
from kinformer.server import APIServer


def test_controller_names_true_is_every_controller_and_false_none() -> None:
    assert controller_names(True) == tuple(CONTROLLERS)
    assert controller_names(False) == ()


def test_unknown_controller_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown controllers no-such-controller"):
        controller_names(["no-such-controller"])
    with pytest.raises(ValueError, match="unknown controllers"):
        APIServer(controllers=["no-such-controller"])


def test_negative_node_count_is_refused() -> None:
    with pytest.raises(ValueError, match="nodes must be >= 0"):
        APIServer(nodes=-1)


async def test_bare_server_has_no_cluster() -> None:
    async with APIServer() as server:
        assert server.cluster is None


@pytest.mark.parametrize(("options", "message"), [
    ({"workers": 0}, "workers must be > 0"),
    ({"client_max_in_flight": 0}, "client_max_in_flight must be > 0"),
    ({"workers": 1.5}, "workers must be an integer"),
    ({"node_pods": True}, "node_pods must be a number"),
    ({"container_run_seconds": -1.0}, "container_run_seconds must be >= 0"),
    ({"node_monitor_grace_period": 0}, "node_monitor_grace_period must be > 0"),
    ({"pod_gc_quarantine": 0}, "pod_gc_quarantine must be > 0"),
    ({"max_endpoints_per_slice": 0}, "max_endpoints_per_slice must be > 0"),
    ({"restart_backoff": 10.0, "restart_backoff_max": 1.0}, "0 < restart_backoff <= restart_backoff_max"),
    ({"node_cpu": "four"}, "node_cpu must be a positive quantity"),
    ({"node_memory": "0"}, "node_memory must be a positive quantity"),
])
def test_bad_cluster_options_are_refused_naming_the_field(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClusterOptions(**options)
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(ClusterOptions(), **options)


def test_default_cluster_options_are_valid_and_reach_the_cluster() -> None:
    options = ClusterOptions(node_cpu="8", container_run_seconds=0.0)
    assert APIServer(nodes=1, cluster_options=options).cluster_options is options


async def test_every_controller_and_the_kubelets_share_one_informer_per_resource() -> None:
    """As kube-controller-manager's shared informer factory: a resource spelled two ways ("replicasets" and
    "replicasets.apps") would be listed, watched and decoded twice."""
    async with APIServer(storage="memory", controllers=True, nodes=1) as server:
        assert server.cluster is not None
        keys = server.cluster.manager.factory.informers_by_key()
        plurals = sorted(key[0].partition(".")[0] for key in keys)
        assert len(keys) > 10
        assert [p for p in plurals if plurals.count(p) > 1] == []
        # one client for all of them, its ordinary requests bounded (a burst reuses pooled connections)
        assert server.cluster.manager.api_client is server.cluster.client
        # the server started once the cluster's caches synced (not merely once its Manager's task was made)
        assert server.cluster.manager.informers_started.is_set()
        assert all(informer.has_synced() for informer in keys.values())
        assert server.cluster.client.max_in_flight == ClusterOptions().client_max_in_flight == 16

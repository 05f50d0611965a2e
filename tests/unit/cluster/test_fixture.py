"""The pytest fixtures: ``kube_cluster`` runs the controllers and three simulated nodes; ``kube_server`` stays bare."""

from __future__ import annotations

from kinformer.client import Client
from kinformer.cluster import CONTROLLERS
from kinformer.server import APIServer


async def test_kube_cluster_runs_controllers_and_three_nodes(kube_cluster: APIServer) -> None:
    assert kube_cluster.cluster is not None
    assert kube_cluster.cluster.controller_names == tuple(CONTROLLERS)
    async with Client(kube_cluster.url) as client:
        nodes = sorted(n["metadata"]["name"] for n in (await client.list("nodes")).items)
    assert nodes == ["node-1", "node-2", "node-3"]


async def test_kube_server_stays_bare(kube_server: APIServer, kube_client: Client) -> None:
    assert kube_server.cluster is None
    assert not (await kube_client.list("nodes")).items

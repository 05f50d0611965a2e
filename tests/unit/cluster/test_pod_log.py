"""``pods/<name>/log`` answered by the simulated kubelets: ``Client.logs`` and ``kubectl logs`` agree (issue 27),
container selection and its errors as kube-apiserver's validateContainer, tailLines, previous."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator

import pytest

from cluster_helpers import is_ready, phase_is, pod, wait_for_object
from kinformer.client import Client
from kinformer.cluster import ClusterOptions
from kinformer.errors import APIError
from kinformer.server import APIServer

NS = "default"
KUBECTL = shutil.which("kubectl")


@pytest.fixture
async def cluster() -> AsyncIterator[tuple[APIServer, Client]]:
    options = ClusterOptions(restart_backoff=0.01)
    async with APIServer(nodes=1, cluster_options=options) as server, Client(server.url) as client:
        yield server, client


async def _running(client: Client, name: str, **kwargs: object) -> None:
    await client.create("pods", pod(name, node="node-1", **kwargs), NS)  # type: ignore[arg-type]
    await wait_for_object(client, "pods", name, lambda o: phase_is("Running")(o) and is_ready(o), NS)


async def test_log_names_pod_container_and_node(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await _running(client, "web")
    text = await client.logs("web", NS)
    assert text.endswith("\n")
    assert "container app of pod default/web started on node node-1" in text


async def test_tail_lines_keeps_the_last_lines(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await _running(client, "web")
    whole = (await client.logs("web", NS)).splitlines()
    assert (await client.logs("web", NS, tail_lines=1)).splitlines() == whole[-1:]
    assert await client.logs("web", NS, tail_lines=0) == ""


async def test_container_must_be_named_when_the_pod_has_several(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await _running(client, "two", containers=("a", "b"))
    with pytest.raises(APIError) as missing:
        await client.logs("two", NS)
    assert missing.value.code == 400
    assert "a container name must be specified for pod two, choose one of: [a b]" in str(missing.value)
    with pytest.raises(APIError) as unknown:
        await client.logs("two", NS, container="c")
    assert "container c is not valid for pod two" in str(unknown.value)
    assert "container b of pod" in await client.logs("two", NS, container="b")


async def test_previous_needs_a_terminated_instance(cluster: tuple[APIServer, Client]) -> None:
    server, client = cluster
    assert server.cluster is not None
    await _running(client, "web")
    with pytest.raises(APIError) as none:
        await client.logs("web", NS, previous=True)
    assert 'previous terminated container "app" in pod "web" not found' in str(none.value)
    await server.cluster.fail_container(NS, "web", "app", exit_code=7)
    await wait_for_object(client, "pods", "web", lambda o: o["status"]["containerStatuses"][0]["restartCount"] == 1,
                          NS)
    previous = await client.logs("web", NS, previous=True)
    assert "restart 0" in previous and "exited with code 7" in previous


async def test_unscheduled_pod_has_an_empty_log(cluster: tuple[APIServer, Client]) -> None:
    _, client = cluster
    await client.create("pods", pod("pending"), NS)
    assert await client.logs("pending", NS) == ""


async def test_bare_server_refuses_logs() -> None:
    async with APIServer() as server, Client(server.url) as client:
        await client.create("pods", pod("p", node="node-1"), NS)
        with pytest.raises(APIError, match="needs the kubelet"):
            await client.logs("p", NS)

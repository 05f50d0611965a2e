"""``kinformer serve`` runs the cluster: the controllers and one simulated node by default, ``--nodes N`` nodes,
``--bare`` neither (an inert server, as envtest's)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT = 30.0


def _serve(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str, str]:
    """Start ``kinformer serve`` (plain HTTP, memory storage); returns the process, its URL and its cluster line."""
    proc = subprocess.Popen([sys.executable, "-m", "kinformer.cli", "serve", "--no-tls", "--port", "0", "--storage",
                             "memory", "--data", str(tmp_path), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    url = cluster = ""
    deadline = time.monotonic() + START_TIMEOUT
    while not (url and cluster) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "listening on" in line:
            url = line.split("listening on", 1)[1].split()[0]
        if line.startswith("cluster:"):
            cluster = line.split(":", 1)[1].strip()
    return proc, url, cluster


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def _node_names(url: str) -> list[str]:
    with urllib.request.urlopen(f"{url}/api/v1/nodes", timeout=10) as resp:
        return sorted(n["metadata"]["name"] for n in json.loads(resp.read())["items"])


def test_serve_runs_one_simulated_node_by_default(tmp_path: Path, stopped: list[subprocess.Popen[str]]) -> None:
    proc, url, cluster = _serve(tmp_path)
    stopped.append(proc)
    assert url and "simulated nodes: 1" in cluster
    assert _node_names(url) == ["node-1"]


def test_serve_nodes_flag_runs_that_many(tmp_path: Path, stopped: list[subprocess.Popen[str]]) -> None:
    proc, url, cluster = _serve(tmp_path, "--nodes", "2")
    stopped.append(proc)
    assert "simulated nodes: 2" in cluster
    assert _node_names(url) == ["node-1", "node-2"]


def test_serve_bare_runs_neither_controllers_nor_nodes(tmp_path: Path,
                                                       stopped: list[subprocess.Popen[str]]) -> None:
    proc, url, cluster = _serve(tmp_path, "--bare")
    stopped.append(proc)
    assert cluster.startswith("bare")
    assert _node_names(url) == []


@pytest.mark.parametrize("flags", [("--bare", "--nodes", "2"), ("--nodes", "-1")])
def test_serve_refuses_contradictory_cluster_flags(tmp_path: Path, flags: tuple[str, ...]) -> None:
    proc = subprocess.run([sys.executable, "-m", "kinformer.cli", "serve", "--no-tls", "--port", "0", "--data",
                           str(tmp_path), *flags], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "--nodes" in proc.stderr

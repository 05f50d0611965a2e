"""``kinformer run MODULE:ATTR``: the CRD operator example run as controller-runtime's managers are (kubeconfig,
leader election, probes), stopped by SIGTERM gracefully; bad targets and flags are clear errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kinformer as ki
from kinformer.cli import build_parser
from kinformer.cli.run import log_level
from kinformer.server.cli import write_kubeconfig
from testlib import wait_until

EXAMPLE = Path(__file__).parents[2] / "examples" / "crd_operator"
STOP_TIMEOUT = 60.0


async def start(*args: str, cwd: Path = EXAMPLE) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("KUBECONFIG", None)
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "kinformer.cli", *args, cwd=cwd, env=env,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def has_ready(obj: Any) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions", []))


async def test_run_leads_reconciles_and_stops_on_sigterm_releasing_the_lease(
        kube_server: Any, kube_client: ki.Client, tmp_path: Path) -> None:
    sys.path.insert(0, str(EXAMPLE))
    try:
        import website
    finally:
        sys.path.remove(str(EXAMPLE))
    await website.install_crd(kube_client)
    await kube_client.create(website.WEBSITES, {"apiVersion": "example.com/v1", "kind": "Website",
                                                "metadata": {"name": "run"}, "spec": {"title": "Run"}},
                             namespace="default")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_server.url, None, None)
    proc = await start("run", "website:manager", "--kubeconfig", str(kubeconfig), "--leader-elect",
                       "--leader-election-id", "website-op", "--health-probe-bind-address", "127.0.0.1:0",
                       "--zap-log-level", "debug")
    try:
        async def ready() -> bool:
            return has_ready(await kube_client.get(website.WEBSITES, "run", namespace="default"))
        await wait_until(ready, timeout=60, what="the Website made Ready by `kinformer run`")
        lease = await kube_client.get("leases", "website-op", namespace="default")
        assert lease["spec"]["holderIdentity"]
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(STOP_TIMEOUT):
            _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    released = await kube_client.get("leases", "website-op", namespace="default")
    assert not released["spec"].get("holderIdentity"), released["spec"]


async def test_a_bad_target_is_a_clear_error(tmp_path: Path) -> None:
    proc = await start("run", "website:nothing", "--kubeconfig", str(tmp_path / "missing"))
    async with asyncio.timeout(STOP_TIMEOUT):
        _, err = await proc.communicate()
    assert proc.returncode == 2 and "has no attribute 'nothing'" in err.decode()


def test_flags_parse_as_controller_runtime_spells_them() -> None:
    args = build_parser("run").parse_args(["run", "m:a", "--leader-elect", "--metrics-bind-address", ":8080",
                                           "--zap-log-level", "error"])
    assert args.leader_elect and args.metrics_bind_address == ":8080" and args.zap_log_level == 40
    assert log_level("3") == 10 and log_level("info") == 20
    with pytest.raises(Exception, match="unknown log level"):
        log_level("loud")

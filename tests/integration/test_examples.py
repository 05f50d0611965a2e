"""Every program in examples/ runs as documented against an embedded API server, ends on its own within a bound
and prints what it shows; the CRD operator's deploy manifest carries the CRD and RBAC the commands generate now."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kinformer.server.cli import write_kubeconfig

EXAMPLES = Path(__file__).parents[2] / "examples"
#: as deploy/operator.yaml's header says it was generated
RBAC_ARGS = ["rbac", "website:manager", "--name", "website-operator", "--service-account",
             "website-system/website-operator", "--leader-elect", "--leader-election-id", "website-operator",
             "--leader-election-namespace", "website-system"]
RUN_TIMEOUT = 120.0  # each example bounds its own waits with --timeout 60

CASES = [
    ("informer_basics.py", "from the cache: {'color': 'blue'}"),
    ("configmap_to_secret.py", "copied: {'greeting': 'hello'}"),
    ("crd_operator/website.py", "website hello: Ready, replicas 1"),
    ("webhooks.py", "configmaps must not hold passwords; use a Secret"),
    ("leader_election.py", "stepped down"),
    ("sharding.py", "after a left:"),
    ("sync_facade.py", "cached: {'v': '2'}"),
]


async def run(cmd: list[str], cwd: Path, kubeconfig: Path | None = None) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("KUBECONFIG", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            out, _ = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out.decode()


@pytest.mark.slow
@pytest.mark.parametrize(("example", "expected"), CASES, ids=[c[0] for c in CASES])
async def test_example_runs_against_an_embedded_server(example: str, expected: str, kube_server: Any,
                                                       tmp_path: Path) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", kube_server.url, None, None)
    path = EXAMPLES / example
    code, out = await run([sys.executable, path.name, "--timeout", "60"], path.parent, kubeconfig)
    assert code == 0 and expected in out, out[-4000:]


@pytest.mark.slow
async def test_the_testing_example_passes_under_pytest() -> None:
    code, out = await run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "testing"], EXAMPLES)
    assert code == 0 and "3 passed" in out, out[-4000:]


def test_every_example_is_listed_and_tested() -> None:
    listed = (EXAMPLES / "README.md").read_text()
    programs = {p.relative_to(EXAMPLES).as_posix() for p in EXAMPLES.rglob("*.py") if not p.name.startswith("test_")}
    assert programs == {c[0] for c in CASES}
    for program in programs:
        assert f"({program})" in listed or f"({program.split('/')[0]}/" in listed, program


async def test_the_deploy_manifest_has_the_generated_crd_and_rbac() -> None:
    operator = EXAMPLES / "crd_operator"
    docs = list(yaml.safe_load_all((operator / "deploy" / "operator.yaml").read_text()))
    code, crd = await run([sys.executable, "-m", "kinformer.cli", "crd", "website:CRD"], operator)
    assert code == 0, crd
    code, rbac = await run([sys.executable, "-m", "kinformer.cli", *RBAC_ARGS], operator)
    assert code == 0, rbac
    generated = [*yaml.safe_load_all(crd), *yaml.safe_load_all(rbac)]
    shipped = [d for d in docs if d["kind"] not in ("Namespace", "ServiceAccount", "Deployment")]
    assert shipped == generated, "deploy/operator.yaml is stale: regenerate its CRD and RBAC documents"

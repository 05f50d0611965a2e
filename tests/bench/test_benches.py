"""Every benchmark in bench/ still runs: each is started with ``--quick`` (small sizes) and must exit 0.

Figures are not judged here (bench/ prints them; they are not pass/fail). The benches run side by side, each in
a process of its own, so the whole smoke run costs about as long as its slowest few benches.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SRC = BENCH.parent / "src"
#: benches that need a binary the machine may lack (CI installs them; skipped here when absent)
NEEDS = {"bench_server_storage.py": "etcd", "bench_storage_etcd.py": "etcd"}
PARALLEL = 4
DEADLINE = 240.0


def _commands() -> list[tuple[str, list[str]]]:
    """(name, argv) per bench; run_all's watch and server sections are thin wrappers over bench_client_watch's
    and bench_server's functions, which those benches' own quick runs exercise."""
    benches = [(b.name, [str(b), "--quick"]) for b in sorted(BENCH.glob("bench_*.py"))
               if shutil.which(NEEDS.get(b.name, "python3"))]
    return [*benches, ("run_all.py", [str(BENCH / "run_all.py"), "--quick", "--only", "pipeline,workqueue,storage"])]


@pytest.mark.slow
@pytest.mark.timeout(DEADLINE + 30)
def test_every_bench_runs_quick(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    todo = _commands()
    assert len(todo) >= 15, todo
    running: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    failures: list[str] = []
    timings: dict[str, float] = {}
    deadline = time.monotonic() + DEADLINE
    try:
        while todo or running:
            while todo and len(running) < PARALLEL:
                bench, argv = todo.pop(0)
                log = (tmp_path / f"{bench}.log").open("wb")
                proc = subprocess.Popen([sys.executable, *argv], cwd=tmp_path, env=env, stdout=log,
                                        stderr=subprocess.STDOUT)
                log.close()
                running[bench] = (proc, time.monotonic())
            for bench, (proc, started) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[bench]
                timings[bench] = time.monotonic() - started
                if proc.returncode != 0:
                    tail = (tmp_path / f"{bench}.log").read_text(errors="replace")[-2000:]
                    failures.append(f"{bench} exited {proc.returncode}:\n{tail}")
            assert time.monotonic() < deadline, f"benches still running after {DEADLINE:g}s: {list(running)}"
            time.sleep(0.05)
    finally:
        for proc, _ in running.values():
            proc.kill()
            proc.wait()
    print("bench --quick seconds:", {name: round(t, 1) for name, t in sorted(timings.items())})
    assert not failures, "\n\n".join(failures)

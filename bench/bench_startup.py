"""Start-up cost of the embedded API server with kube 1.32's whole built-in catalogue: lazy vs eager schemas.

    python3 bench/bench_startup.py [--rounds 5]

Each round runs, in fresh interpreters (so nothing is cached between them):

* ``lazy``: an in-process ``APIServer(storage="memory")`` as shipped: seconds to import it, seconds from
  construction until ready (imports excluded), RSS when ready, then
  the first Deployment create (which decodes the definitions Deployment refers to), the first OpenAPI v3
  ``apis/apps/v1`` and ``api/v1`` documents and the ``/openapi/v2`` document, and RSS after them; then a second
  server in the same process (every module imported: the server's own start-up work);
* ``eager``: the same with every definition decoded and every served kind's schema compiled before the server
  starts (what loading the API definitions up front would cost);
* ``serve``: ``kinformer serve --storage memory`` in its own process: seconds until it prints its kubeconfig,
  and its RSS about a second later (idle).

Figures are medians over the rounds; the lazy/eager ratio is computed within each round.

Start-up includes compiling every module that has no cached bytecode, about 0.4 s for kinformer's ~120 modules
on this machine. A ``pip install`` compiles them at install time and a first run writes the cache, unless the
environment forbids writing it (``PYTHONDONTWRITEBYTECODE=1``, as this VM sets), when an editable install
compiles kinformer from source at every start. The first line printed says which case was measured;
``--compile`` first writes kinformer's bytecode as ``pip install`` would (``python3 -m compileall``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import parse_args

SRC = Path(__file__).resolve().parent.parent / "src" / "kinformer"

_DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}


def _rss_mb(pid: int | None = None) -> float:
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _eager() -> None:
    from kinformer.server.registry.resources import BUILTINS
    from kinformer.server.schema import apidefs, schemas

    defs = apidefs.definitions()
    for name in defs:
        defs[name]
    for info in BUILTINS:
        schemas.kind_node(info.group, info.version, info.kind)


async def _in_process(eager: bool) -> dict[str, float]:
    import aiohttp

    t0 = time.perf_counter()
    from kinformer.server import APIServer

    out: dict[str, float] = {"import_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    if eager:
        _eager()
    async with APIServer(storage="memory") as server:
        out["ready_s"] = time.perf_counter() - t0
        out["ready_rss_mb"] = _rss_mb()
        async with aiohttp.ClientSession() as http:
            for key, method, path, body in (
                    ("first_deployment_create_ms", "POST", "/apis/apps/v1/namespaces/default/deployments",
                     _DEPLOYMENT),
                    ("openapi_v3_apps_ms", "GET", "/openapi/v3/apis/apps/v1", None),
                    ("openapi_v3_core_ms", "GET", "/openapi/v3/api/v1", None),
                    ("openapi_v2_ms", "GET", "/openapi/v2", None)):
                t = time.perf_counter()
                async with http.request(method, server.url + path, json=body) as resp:
                    await resp.read()
                    assert resp.status < 300, (path, resp.status)
                out[key] = (time.perf_counter() - t) * 1000
        out["after_rss_mb"] = _rss_mb()
    t0 = time.perf_counter()
    async with APIServer(storage="memory"):
        out["second_server_ready_s"] = time.perf_counter() - t0
    return out


def _serve() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as data:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "kinformer.cli", "serve", "--bare", "--port", "0",
                                 "--data", data, "--storage", "memory"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"kinformer serve exited {proc.wait(5)}")
                if line.startswith("kubeconfig:"):
                    break
            ready = time.perf_counter() - t0
            time.sleep(1.0)
            return {"serve_ready_s": ready, "serve_idle_rss_mb": _rss_mb(proc.pid)}
        finally:
            proc.terminate()
            proc.wait(15)


def _child(mode: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, "--child", mode], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _bytecode_state() -> str:
    """Whether kinformer's modules start from cached bytecode or are compiled from source at each start."""
    import importlib.util

    sources = list(SRC.rglob("*.py"))
    cached = sum(Path(importlib.util.cache_from_source(str(f))).exists() for f in sources)
    writes = "not written (PYTHONDONTWRITEBYTECODE)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "written"
    return f"{cached} of kinformer's {len(sources)} modules cached; new bytecode is {writes}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compile", action="store_true",
                        help="compile kinformer's modules to bytecode first, as pip install does")
    parser.add_argument("--child", choices=("lazy", "eager"), help=argparse.SUPPRESS)
    args = parse_args(parser, rounds=1)
    if args.child:
        print(json.dumps(asyncio.run(_in_process(args.child == "eager"))))
        return
    if args.compile:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(SRC)], check=True)
    print(f"bytecode: {_bytecode_state()}")
    rows: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        lazy, eager, serve = _child("lazy"), _child("eager"), _serve()
        for key, value in lazy.items():
            rows.setdefault(f"lazy {key}", []).append(value)
        for key in ("ready_s", "ready_rss_mb"):
            rows.setdefault(f"eager {key}", []).append(eager[key])
        rows.setdefault("ready ratio eager/lazy", []).append(eager["ready_s"] / lazy["ready_s"])
        for key, value in serve.items():
            rows.setdefault(key, []).append(value)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for key, values in rows.items():
        print(f"{key:40s} {statistics.median(values):10.3f}   ({' / '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()

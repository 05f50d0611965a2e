"""The fixed cost of a request in the embedded API server, before and after a change, side by side in one run.

Each server runs in a process of its own (``APIServer("memory")``, plain HTTP on loopback, as
``bench_server_writes.py --serve``); one minimal blocking HTTP/1.1 client (one keep-alive socket, a few µs
per request) in a thread of this process sends, per round and server, ``GET /healthz`` (aiohttp and the
handler chain alone), a ``GET`` of one small ConfigMap, small ConfigMap creates (~0.3 KB) and realistic pod
creates (``bench_server_writes.py``'s 7.5 KB pods). Printed per
server and workload: the best and the median of the rounds of the server process's CPU time per request
(user + system, from /proc; the machine's load disturbs it far less than wall-clock rates) and of the rate.

``--instructions`` instead counts the instructions each server executes per request (valgrind's callgrind,
instrumenting only while the requests run; one round, ~30 s per server and workload): a figure the
machine's load does not move.

``--floor`` adds ``bench_server_writes.py``'s floor application (an aiohttp app on the same loop that only
decodes, stamps, keeps and re-encodes) as a column: what the stack under kinformer costs per request.

``--profile N`` instead profiles N ConfigMap creates in this process (the server in this event loop under
cProfile, the collector tuned as in a server process, the client in a thread) and prints the functions
with the most time of their own.

    python3 bench/bench_request_pipeline.py --baseline /tmp/before/src --rounds 5
    python3 bench/bench_request_pipeline.py --baseline /tmp/before/src --instructions --requests 400
    python3 bench/bench_request_pipeline.py --floor --instructions --requests 300
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_server_writes import (
    CMS,
    FLOOR,
    PODS,
    configmap_bodies,
    cpu_seconds,
    minimal_sequential,
    pod_bodies,
    server_process,
)
from benchlib import parse_args

HERE = Path(__file__).resolve().parent


def _read_ok(sock: socket.socket) -> None:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("connection closed")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 200"):
        raise RuntimeError(lines[0].decode())
    length = next(int(v) for k, _, v in (line.partition(b":") for line in lines[1:])
                  if k.strip().lower() == b"content-length")
    while len(rest) < length:
        rest += sock.recv(65536)


def minimal_gets(url: str, path: str, n: int) -> None:
    """``n`` GETs of ``path`` on one keep-alive socket, one at a time."""
    host, port = url.split("://", 1)[1].rsplit(":", 1)
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(n):
            sock.sendall(request)
            _read_ok(sock)


async def measure(src: str, n: int) -> dict[str, tuple[float, float]]:
    """(server CPU µs per request, requests/s) per workload, on one fresh server from ``src``."""
    out: dict[str, tuple[float, float]] = {}
    async with server_process(src) as (url, pid):
        await asyncio.to_thread(_warm_up, url)
        for name, run in _workloads(url, n):
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            await asyncio.to_thread(run)
            out[name] = ((cpu_seconds(pid) - cpu0) / n * 1e6, n / (time.perf_counter() - t0))
    return out


def _warm_up(url: str) -> None:
    """What every workload's first request would pay once: each kind's compiled checks, memos and code paths."""
    minimal_sequential(url, CMS, configmap_bodies(100, "warm"))
    minimal_sequential(url, PODS, pod_bodies(20, "warm"))
    minimal_gets(url, "/healthz", 50)


def _workloads(url: str, n: int) -> list[tuple[str, Callable[[], None]]]:
    return [("GET /healthz", lambda: minimal_gets(url, "/healthz", n)),
            ("GET one configmap", lambda: minimal_gets(url, f"{CMS}/warm-1", n)),
            ("create configmap", lambda: minimal_sequential(url, CMS, configmap_bodies(n, "c"))),
            ("create realistic pod", lambda: minimal_sequential(url, PODS, pod_bodies(n, "p")))]


def instructions(src: str, n: int, names: list[str] | None = None) -> dict[str, float]:
    """Instructions the server executes per request, per workload (``names``: those only; valgrind's callgrind,
    instrumenting only while the requests run): unlike CPU time, the machine's load does not move it."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(name for name, _ in _workloads("", n) if names is None or name in names):
            dump = os.path.join(tmp, f"callgrind.{i}")
            proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--cache-sim=no", "--instr-atstart=no",
                                     f"--callgrind-out-file={dump}", sys.executable,
                                     str(HERE / "bench_server_writes.py"), "--serve",
                                     FLOOR if src == FLOOR else "memory"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env={**os.environ, "PYTHONPATH": str(HERE.parent / "src") if src == FLOOR else src})
            assert proc.stdin is not None and proc.stdout is not None
            url = proc.stdout.readline().decode().strip()
            _warm_up(url)
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True, check=True)
            dict(_workloads(url, n))[name]()
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], capture_output=True, check=True)
            proc.stdin.close()
            proc.wait(timeout=300)
            with open(dump) as f:
                totals = [int(line.split()[1]) for line in f if line.startswith(("totals:", "summary:"))]
            out[name] = totals[-1] / n
    return out


async def run(args: argparse.Namespace) -> None:
    variants = {"current": args.current}
    if args.baseline:
        variants = {"baseline": args.baseline, **variants}
    if args.floor:
        variants[FLOOR] = FLOOR
    if args.instructions:
        counts = {v: instructions(src, args.requests) for v, src in variants.items()}
        print("| workload | " + " | ".join(f"{v} instructions/request" for v in variants) + " |")
        print("|---" * (1 + len(variants)) + "|")
        for name in counts[next(iter(variants))]:
            print(f"| {name} | " + " | ".join(f"{counts[v][name]:,.0f}" for v in variants) + " |")
        return
    rounds: list[dict[str, dict[str, tuple[float, float]]]] = []
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}, load average {os.getloadavg()[0]:.1f}", flush=True)
        rounds.append({v: await measure(src, args.requests) for v, src in variants.items()})
    print(f"\n{args.rounds} rounds of {args.requests} requests per workload; load average at the end "
          f"{os.getloadavg()[0]:.1f}")
    print("| workload | " + " | ".join(f"{v} server µs/request best / median | {v} requests/s best / median"
                                        for v in variants) + " |")
    print("|---" * (1 + 2 * len(variants)) + "|")
    for name in rounds[0][next(iter(variants))]:
        cells = []
        for v in variants:
            cpu = [rd[v][name][0] for rd in rounds]
            rate = [rd[v][name][1] for rd in rounds]
            cells += [f"{min(cpu):,.0f} / {statistics.median(cpu):,.0f}",
                      f"{max(rate):,.0f} / {statistics.median(rate):,.0f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


async def profile(n: int) -> None:
    import cProfile
    import pstats

    from kinformer.server import APIServer

    async with APIServer("memory", compaction_interval=0) as server:
        gc.collect()  # the collector as kinformer.server.python_gc sets it in a server process
        gc.freeze()
        gc.set_threshold(20_000, 10, 100)
        await asyncio.to_thread(minimal_sequential, server.url, CMS, configmap_bodies(200, "warm"))
        bodies = configmap_bodies(n, "c")
        prof = cProfile.Profile()
        prof.enable()
        await asyncio.to_thread(minimal_sequential, server.url, CMS, bodies)
        await asyncio.sleep(0.2)  # let the watch cache take the last events
        prof.disable()
    print(f"cProfile of {n} ConfigMap creates in process, load average {os.getloadavg()[0]:.1f}")
    pstats.Stats(prof).sort_stats("tottime").print_stats(40)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", metavar="SRC", help="another source tree (its src/ directory) to run side by side")
    p.add_argument("--current", metavar="SRC", default=str(HERE.parent / "src"),
                   help="the source tree measured as current (default: this checkout's src/)")
    p.add_argument("--requests", type=int, default=2000, help="requests per workload and round (default 2000)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--floor", action="store_true", help="also run bench_server_writes.py's floor application (an "
                   "aiohttp app that only decodes, stamps, keeps and re-encodes) side by side")
    p.add_argument("--instructions", action="store_true",
                   help="count the server's instructions per request under valgrind instead (one round)")
    p.add_argument("--profile", type=int, metavar="N", help="profile N ConfigMap creates in process instead")
    args = parse_args(p, requests=100, rounds=1)
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
    args.current = os.path.abspath(args.current)
    asyncio.run(profile(args.profile) if args.profile else run(args))


if __name__ == "__main__":
    main()

"""Hostile requests against ``kinformer serve --no-tls``: each answered 4xx fast, health probes unaffected.

    python3 bench/bench_hostile_requests.py [--probe-interval 0.01] [--only TEXT] [--items 140000]

One ``kinformer serve`` process (in-memory storage, ``--header-timeout 2``); for each attack below, a probe
task sends ``GET /healthz`` on a connection of its own every ``--probe-interval`` seconds while the attack
runs. Printed per attack: the status codes the attack got, the slowest attack answer, the bytes of the
largest answer, the health probes' median and slowest latency during the attack, and whether the store
moved (the resourceVersion of a ``limit=1`` list, read from storage, before and after).

Attacks: writes through ``/watch/``; a YAML alias bomb (9 levels of 9); 28 JSON-patch copies of ``/data``
into itself; a 1 MiB label value (a 422 that must not echo it); JSON nested 600 deep in an unknown field;
a 5000-digit resourceVersion; a ``text/plain`` POST and a foreign ``Host`` (CSRF, DNS rebinding); 1100
reads at a future resourceVersion from one client while another client lists; 500 connections trickling their
request heads; list merges of 140,000 items (about what the body limit lets in): a strategic-merge patch of
finalizers (a set) and of a Deployment's container env (keyed by name), ``$deleteFromPrimitiveList`` of all
140,000 stored finalizers, and server-side apply of 140,000 finalizers reordered by a second manager (the
merges are linear in the lists: with ``--items`` ten times smaller they take a tenth of the time). Each merge
request also prints the server process's CPU seconds for it (user + system, from ``/proc``, worker threads
included): unlike the answer time, it does not count waiting for a core. Figures are one run's; re-run and
compare on a loaded machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from benchlib import parse_args

SERVE = "import sys; from kinformer.cli import main; sys.exit(main())"
CM = "/api/v1/namespaces/default/configmaps"
#: how many future-RV reads flood the server, and how many connections trickle their request heads
SIZES = {"flood": 1100, "heads": 500}
#: the server process, once started ("pid"), for its CPU time
SERVER: dict[str, int] = {}


async def start_server(data: str, *extra: str) -> tuple[asyncio.subprocess.Process, str]:
    """``kinformer serve --no-tls`` on a free loopback port, in-memory, no rate limit, with ``extra`` options."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SERVE, "serve", "--bare", "--no-tls", "--host", "127.0.0.1", "--port", "0",
        "--data", data, "--storage", "memory", "--rate-limit-qps", "0", *extra,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    assert proc.stdout is not None
    async with asyncio.timeout(60):
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                raise RuntimeError("kinformer serve exited")
            if "listening on" in line:
                return proc, line.split("listening on", 1)[1].split()[0]


async def store_revision(http: aiohttp.ClientSession) -> str:
    async with http.get(CM, params={"limit": "1"}) as resp:
        return (await resp.json())["metadata"]["resourceVersion"]


PROBE = """
import http.client, json, sys, time
host, port, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
conn, out, resets = http.client.HTTPConnection(host, port, timeout=30), [], 0
print("ready", flush=True)
while True:
    start = time.perf_counter()
    try:
        conn.request("GET", "/healthz")
        conn.getresponse().read()
    except (ConnectionError, http.client.HTTPException):  # the server closed the idle keep-alive connection
        resets += 1
        conn.close()
        if resets > 100:
            break
        continue
    out.append(time.perf_counter() - start)
    if sys.stdin in __import__("select").select([sys.stdin], [], [], interval)[0]:
        break
print(json.dumps({"latencies": out, "resets": resets}), flush=True)
"""


class Prober:
    """``GET /healthz`` every ``interval`` seconds from a process of its own (the attacks' client work in this
    process must not delay the probes), on one kept-alive connection."""

    def __init__(self, url: str, interval: float) -> None:
        self.host, port = url.split("//", 1)[1].rsplit(":", 1)
        self.port, self.interval = int(port), interval
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Prober:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PROBE, self.host, str(self.port), str(self.interval),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert self.proc.stdout is not None
        await self.proc.stdout.readline()
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def latencies(self) -> list[float]:
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"stop\n")
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        await self.proc.wait()
        return json.loads(line)["latencies"]


Attack = Callable[[aiohttp.ClientSession, str], Awaitable[list[tuple[int, float, int]]]]


async def timed(http: aiohttp.ClientSession, method: str, path: str, *, body: bytes | None = None,
                ctype: str | None = "application/json", params: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, float, int]:
    hdrs = dict(headers or {})
    if ctype:
        hdrs["Content-Type"] = ctype
    start = time.perf_counter()
    async with http.request(method, path, data=body, params=params, headers=hdrs) as resp:
        data = await resp.read()
    return resp.status, time.perf_counter() - start, len(data)


def cm(name: str, **extra: Any) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **extra}).encode()


async def watch_writes(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    path = "/api/v1/watch/namespaces/default/configmaps"
    return [await timed(http, "POST", path, body=cm("via-watch")), await timed(http, "DELETE", path)]


async def alias_bomb(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: bomb}", f"a0: &a0 [{', '.join(['x'] * 9)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    return [await timed(http, "POST", CM, body="\n".join(lines).encode(), ctype="application/yaml")]


async def copy_amplification(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    ops = [{"op": "copy", "from": "/data", "path": f"/data/c{i}"} for i in range(28)]
    return [await timed(http, "PATCH", f"{CM}/target", body=json.dumps(ops).encode(),
                        ctype="application/json-patch+json")]


async def huge_label(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "label", "labels": {"a": "v" * (1024 * 1024)}}}).encode()
    return [await timed(http, "POST", CM, body=body)]


async def deep_unknown_field(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"x":' + b"[" * 600 + b"]" * 600 + b"}"
    return [await timed(http, "POST", CM, body=body)]


async def long_resource_version(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    return [await timed(http, "GET", CM, ctype=None, params={"resourceVersion": "9" * 5000})]


async def browser_requests(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    port = url.rsplit(":", 1)[1]
    return [await timed(http, "POST", CM, body=cm("csrf"), ctype="text/plain"),
            await timed(http, "POST", CM, body=cm("rebind"), headers={"Host": f"evil.example:{port}"})]


async def future_reads(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    future = str(int(await store_revision(http)) + 10_000)
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(base_url=url, connector=conn) as flood:
        tasks = [asyncio.create_task(timed(flood, "GET", CM, ctype=None, params={"resourceVersion": future}))
                 for _ in range(SIZES["flood"])]
        await asyncio.sleep(0.2)
        other = [await timed(http, "GET", CM, ctype=None) for _ in range(20)]
        flooded = await asyncio.gather(*tasks)
    print(f"    future-RV flood: {len(flooded)} requests, codes {_codes(flooded)}; meanwhile 20 lists by another "
          f"connection: codes {_codes(other)}, slowest {max(t for _, t, _ in other) * 1000:.0f} ms")
    return flooded


async def trickled_heads(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    heads = SIZES["heads"]
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(heads)]
    for _, writer in conns:
        writer.write(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    start = time.perf_counter()
    closed = 0
    async with asyncio.timeout(30):
        for reader, writer in conns:
            try:
                data = await reader.read()
            except ConnectionError:
                data = b""
            closed += data == b""
            writer.close()
    print(f"    trickled heads: {closed}/{heads} connections closed by the server, the last "
          f"{time.perf_counter() - start:.1f} s after the attack began (header timeout 2 s)")
    return [(408 if closed == heads else 0, time.perf_counter() - start, 0)]


def server_cpu() -> float:
    """CPU seconds (user + system, all threads) the server process has used so far."""
    with open(f"/proc/{SERVER['pid']}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name: state, ppid, ... utime, stime
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_timed(http: aiohttp.ClientSession, what: str, method: str, path: str, *, body: bytes,
                    ctype: str, params: dict[str, str]) -> tuple[int, float, int]:
    """:func:`timed`, printing the server's CPU seconds for the request as ``    server CPU <what>: <s> s``."""
    before = server_cpu()
    result = await timed(http, method, path, body=body, ctype=ctype, params=params)
    print(f"    server CPU {what}: {server_cpu() - before:.2f} s")
    return result


MERGE_ITEMS = 140_000  # about as many short list items as the 3 MiB body limit lets in (--items)
SMP = "application/strategic-merge-patch+json"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


def finalizers(n: int) -> list[str]:
    return [f"example.com/f{i}" for i in range(n)]


async def smp_finalizers(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    body = json.dumps({"metadata": {"finalizers": finalizers(MERGE_ITEMS)}}).encode()
    return [await cpu_timed(http, "SMP finalizers", "PATCH", f"{CM}/target", body=body, ctype=SMP,
                            params={"dryRun": "All"})]


async def smp_env(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    env = [{"name": f"E{i}"} for i in range(MERGE_ITEMS)]
    body = json.dumps({"spec": {"template": {"spec": {"containers": [{"name": "c", "env": env}]}}}}).encode()
    return [await cpu_timed(http, "SMP env", "PATCH", f"{DEPLOYMENTS}/target", body=body, ctype=SMP,
                            params={"dryRun": "All"})]


async def smp_delete_primitives(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    held = f"{CM}/held"  # stores MERGE_ITEMS finalizers (outside the timing), then a dry-run deletes them all
    status, _, _ = await timed(http, "PATCH", held, body=json.dumps({"metadata": {"finalizers": finalizers(
        MERGE_ITEMS)}}).encode(), ctype=SMP)
    assert status == 200, status
    body = json.dumps({"metadata": {"$deleteFromPrimitiveList/finalizers": finalizers(MERGE_ITEMS)}}).encode()
    return [await cpu_timed(http, "SMP delete", "PATCH", held, body=body, ctype=SMP, params={"dryRun": "All"})]


async def apply_reordered(http: aiohttp.ClientSession, url: str) -> list[tuple[int, float, int]]:
    def applied(names: list[str]) -> bytes:
        return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "held", "finalizers": names}}).encode()

    apply = "application/apply-patch+yaml"
    first = await cpu_timed(http, "apply", "PATCH", f"{CM}/held", body=applied(finalizers(MERGE_ITEMS)),
                            ctype=apply, params={"fieldManager": "first"})
    second = await cpu_timed(http, "apply reordered", "PATCH", f"{CM}/held",
                             body=applied(finalizers(MERGE_ITEMS)[::-1]), ctype=apply,
                             params={"fieldManager": "second", "dryRun": "All"})
    print(f"    server-side apply of {MERGE_ITEMS} finalizers: {first[1] * 1000:.0f} ms by their first manager, "
          f"{second[1] * 1000:.0f} ms reordered by a second (dry run)")
    return [first, second]


def _codes(results: list[tuple[int, float, int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for code, _, _ in results:
        out[code] = out.get(code, 0) + 1
    return dict(sorted(out.items()))


ATTACKS: list[tuple[str, Attack]] = [
    ("writes through /watch/", watch_writes), ("YAML alias bomb 9x9", alias_bomb),
    ("JSON-patch 28 copies", copy_amplification), ("1 MiB label value", huge_label),
    ("JSON 600 deep, unknown field", deep_unknown_field), ("5000-digit resourceVersion", long_resource_version),
    ("text/plain POST, foreign Host", browser_requests), ("1100 future-RV reads", future_reads),
    ("500 trickled request heads", trickled_heads),
    ("merge: SMP finalizers", smp_finalizers), ("merge: SMP env (keyed)", smp_env),
    ("merge: SMP delete all finalizers", smp_delete_primitives), ("merge: apply reordered", apply_reordered),
]


async def main(interval: float, only: str) -> None:
    with tempfile.TemporaryDirectory() as data:
        proc, url = await start_server(data, "--header-timeout", "2")
        SERVER["pid"] = proc.pid
        try:
            async with aiohttp.ClientSession(base_url=url) as http:
                labels = {"app": "target"}
                deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "target"},
                              "spec": {"selector": {"matchLabels": labels}, "template": {
                                  "metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
                for path, body in ((CM, cm("target", data={"k": "v" * 1000})), (CM, cm("held")),
                                   (DEPLOYMENTS, json.dumps(deployment).encode())):
                    async with http.post(path, data=body, headers={"Content-Type": "application/json"}) as resp:
                        assert resp.status == 201, await resp.text()
                print(f"{'attack':32} {'codes':24} {'slowest':>9} {'largest':>9} {'probes':>6} {'probe p50':>10} "
                      f"{'probe max':>10}  store")
                for name, attack in ATTACKS:
                    if only not in name:
                        continue
                    before = await store_revision(http)
                    async with Prober(url, interval) as prober:
                        async with asyncio.timeout(120):
                            results = await attack(http, url)
                        latencies = await prober.latencies()
                    after = await store_revision(http)
                    slowest = max(t for _, t, _ in results)
                    largest = max(n for _, _, n in results)
                    print(f"{name:32} {json.dumps(_codes(results)):24} {slowest * 1000:7.0f}ms {largest:8d}B "
                          f"{len(latencies):6d} "
                          f"{statistics.median(latencies) * 1000:8.1f}ms {max(latencies) * 1000:8.1f}ms  "
                          f"{'unchanged' if before == after else f'MOVED {before}->{after}'}")
        finally:
            proc.terminate()
            await proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe-interval", type=float, default=0.01)
    parser.add_argument("--only", default="", help="run the attacks whose name contains this text")
    parser.add_argument("--items", type=int, default=MERGE_ITEMS, help="list items of the merge attacks")
    parser.add_argument("--flood", type=int, default=SIZES["flood"], help="future-RV reads")
    parser.add_argument("--heads", type=int, default=SIZES["heads"], help="connections trickling their heads")
    args = parse_args(parser, items=1000, flood=50, heads=20)
    MERGE_ITEMS = args.items
    SIZES.update(flood=args.flood, heads=args.heads)
    asyncio.run(main(args.probe_interval, args.only))

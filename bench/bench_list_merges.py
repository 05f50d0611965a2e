"""The CPU of the five list-merge attacks of ``bench_hostile_requests.py``, in process, the least of a few rounds.

    python3 bench/bench_list_merges.py [--items 140000] [--repeat 3] [--only env] [--profile apply2]

An embedded ``APIServer`` (memory storage, the collector settings of ``kinformer serve``) and an aiohttp
client in this process; each round stores 140,000 finalizers on a fresh ConfigMap (outside the timing), then
times, by this process's CPU clock, the same requests as the hostile-requests bench: ``smpfin`` (a
strategic-merge patch of 140,000 finalizers, dry run), ``env`` (of a Deployment container's env, keyed by
name), ``delete`` (``$deleteFromPrimitiveList`` of every stored finalizer), ``apply1`` (server-side apply of
them by a first manager) and ``apply2`` (reordered by a second one, dry run). The client's share is small: it
sends the prepared body and reads the answer's bytes. ``--profile NAME`` runs that request's stages inline
(no worker thread) under cProfile and prints the 30 costliest functions; compare trees by running this
against each in turn, interleaved (``PYTHONPATH=<tree>/src``): on a shared machine, only ratios within one
run mean anything.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import time

import aiohttp
from benchlib import parse_args

from kinformer.server import APIServer
from kinformer.server.endpoints import offloop
from kinformer.server.python_gc import tune_for_server

CM = "/api/v1/namespaces/default/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
JSON, SMP, APPLY = "application/json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "target"},
              "spec": {"selector": {"matchLabels": {"app": "t"}}, "template": {
                  "metadata": {"labels": {"app": "t"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
Request = tuple[str, str, bytes, str, dict[str, str]]


def finalizers(n: int) -> list[str]:
    return [f"example.com/f{i}" for i in range(n)]


def requests(n: int, held: str) -> dict[str, Request]:
    """The five timed requests (method, path, body, content type, query), ``held`` storing ``n`` finalizers."""
    def applied(names: list[str]) -> bytes:
        return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": held, "finalizers": names}
                           }).encode()

    env = [{"name": f"E{i}"} for i in range(n)]
    dry = {"dryRun": "All"}
    return {
        "smpfin": ("PATCH", f"{CM}/target", json.dumps({"metadata": {"finalizers": finalizers(n)}}).encode(), SMP, dry),
        "env": ("PATCH", f"{DEPLOYMENTS}/target", json.dumps({"spec": {"template": {"spec": {"containers": [
            {"name": "c", "env": env}]}}}}).encode(), SMP, dry),
        "delete": ("PATCH", f"{CM}/{held}", json.dumps({"metadata": {
            "$deleteFromPrimitiveList/finalizers": finalizers(n)}}).encode(), SMP, dry),
        "apply1": ("PATCH", f"{CM}/{held}", applied(finalizers(n)), APPLY, {"fieldManager": "first"}),
        "apply2": ("PATCH", f"{CM}/{held}", applied(finalizers(n)[::-1]), APPLY,
                   {"fieldManager": "second", "dryRun": "All"}),
    }


async def send(http: aiohttp.ClientSession, request: Request) -> bytes:
    method, path, body, ctype, params = request
    async with http.request(method, path, data=body, params=params, headers={"Content-Type": ctype}) as resp:
        data = await resp.read()
        if resp.status not in (200, 201):
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:300]!r}")
        return data


async def timed(http: aiohttp.ClientSession, request: Request, profile: bool) -> float:
    """This process's CPU seconds for ``request``; with ``profile``, print where they went."""
    profiler = cProfile.Profile() if profile else None
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    await send(http, request)
    if profiler is not None:
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    return time.process_time() - start


async def main(items: int, repeat: int, only: str, profile: str) -> dict[str, float]:
    if profile:
        offloop.OFF_LOOP_BYTES = 1 << 60  # every stage inline, where the profiler sees it
    least: dict[str, float] = {}
    async with APIServer(storage="memory", compaction_interval=0) as server:
        tune_for_server()
        async with aiohttp.ClientSession(base_url=server.url) as http:
            await send(http, ("POST", CM, json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                                      "metadata": {"name": "target"}}).encode(), JSON, {}))
            await send(http, ("POST", DEPLOYMENTS, json.dumps(DEPLOYMENT).encode(), JSON, {}))
            for round_ in range(repeat):
                held = f"held{round_}"
                await send(http, ("POST", CM, json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": held}}).encode(), JSON, {}))
                await send(http, ("PATCH", f"{CM}/{held}", json.dumps({"metadata": {"finalizers": finalizers(
                    items)}}).encode(), SMP, {}))
                for name, request in requests(items, held).items():
                    if only in name or (name == "apply1" and "apply2" in only):  # the second applies on the first
                        cpu = await timed(http, request, profile == name)
                        least[name] = min(least.get(name, cpu), cpu)
    return least


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=140_000, help="list items per request")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (the least CPU is printed)")
    parser.add_argument("--only", default="", help="the requests whose name contains this text")
    parser.add_argument("--profile", default="", help="profile the request of this name (smpfin, env, ...)")
    args = parse_args(parser, items=1000, repeat=1)
    figures = asyncio.run(main(args.items, args.repeat, args.only, args.profile))
    print(" ".join(f"{name}: {cpu:.3f}" for name, cpu in figures.items()))

"""What the blocking facade costs an informer: the same informer, with the same plain handler, started through
``kinformer.sync`` and through the async API, against one embedded server (on a thread of its own).

Measured: seconds from ``start()`` until the handler has received every object of the first list (N ConfigMaps),
best of R runs each; the ratio facade/async should be ~1.0, as the informer runs on the loop either way.
Usage: ``python bench/bench_sync_facade.py [--objects N] [--runs R]``.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from typing import Any

from benchlib import parse_args

import kinformer as ki
from kinformer import sync as kis
from kinformer.server import APIServer


def fill(url: str, n: int) -> None:
    with kis.Client(url) as client:
        for i in range(n):
            body = {"metadata": {"name": f"cm-{i}", "namespace": "default"}, "data": {"i": str(i)}}
            client.create("configmaps", body)


def run_facade(url: str, n: int) -> float:
    done = threading.Event()
    seen = [0]

    def on_add(obj: Any) -> None:
        seen[0] += 1
        if seen[0] == n:
            done.set()

    with kis.Client(url) as client:
        factory = kis.SharedInformerFactory(client)
        factory.informer("configmaps", namespace="default").add_event_handler(on_add=on_add)
        start = time.perf_counter()
        factory.start()
        done.wait(300)
        elapsed = time.perf_counter() - start
        factory.shutdown()
    return elapsed


async def _run_async(url: str, n: int) -> float:
    done = threading.Event()
    seen = [0]

    def on_add(obj: Any) -> None:
        seen[0] += 1
        if seen[0] == n:
            done.set()

    async with ki.Client(url) as client:
        factory = ki.SharedInformerFactory(client)
        factory.informer("configmaps", namespace="default").add_event_handler(on_add=on_add)
        start = time.perf_counter()
        async with factory.running():
            await asyncio.to_thread(done.wait, 300)
            return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parse_args(parser, objects=100, runs=1)
    server_thread = kis.LoopThread("apiserver")
    server = APIServer(storage="memory", namespace_defaults=False)
    server_thread.run(server.start())
    try:
        fill(server.url, args.objects)
        facade = min(run_facade(server.url, args.objects) for _ in range(args.runs))
        plain = min(asyncio.run(_run_async(server.url, args.objects)) for _ in range(args.runs))
    finally:
        server_thread.run(server.stop())
        server_thread.close()
    print(f"{args.objects} objects listed and handed to a plain handler, best of {args.runs}:")
    print(f"  async API      {plain * 1000:8.1f} ms")
    print(f"  kinformer.sync {facade * 1000:8.1f} ms   ratio facade/async {facade / plain:.2f}")


if __name__ == "__main__":
    main()

"""Throughput of the informer's core path: DeltaFIFO.add/update -> pop -> Indexer.update (3 indices).

10k keys; a stream of N update deltas (default 200k) is produced in batches (as a watch would deliver
them) and consumed by a pop loop that applies each delta to an Indexer holding the namespace index and
two label indices. Prints deltas/s. Run: ``python3 bench/bench_fifo_indexer.py [--deltas N] [--keys K]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from benchlib import parse_args

from kinformer.cache.delta_fifo import Delta, DeltaFIFO, DeltaType, FIFOClosed
from kinformer.cache.store import Indexer


def by_app(obj: Any) -> list[str]:
    return [obj["metadata"].get("labels", {}).get("app", "")]


def by_tier(obj: Any) -> list[str]:
    return [obj["metadata"].get("labels", {}).get("tier", "")]


def make_objects(keys: int, version: int) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": f"cm-{i}", "namespace": f"ns-{i % 20}", "resourceVersion": str(version * keys + i),
                          "labels": {"app": f"app-{(i + version) % 50}", "tier": f"tier-{i % 3}"}},
             "data": {"k": str(version)}} for i in range(keys)]


async def run(n_deltas: int, keys: int, batch: int) -> tuple[float, int]:
    indexer = Indexer(indexers={"app": by_app, "tier": by_tier})
    fifo = DeltaFIFO(known_objects=indexer)
    versions = [make_objects(keys, v) for v in range(4)]
    fifo.replace(versions[0], "1")
    processed = 0

    def process(deltas: list[Delta], _initial: bool) -> None:
        nonlocal processed
        for d in deltas:
            if d.type is DeltaType.DELETED:
                indexer.delete(d.object)
            else:
                indexer.update(d.object)
        processed += len(deltas)

    async def consume() -> None:
        try:
            while True:
                await fifo.pop(process)
        except FIFOClosed:
            pass

    while len(fifo):  # initial list, not timed
        await fifo.pop(process)
    processed = 0
    consumer = asyncio.create_task(consume())
    start = time.perf_counter()
    produced = 0
    while produced < n_deltas:
        objs = versions[1 + (produced // keys) % 3]
        offset = produced % keys
        for obj in objs[offset:offset + min(batch, n_deltas - produced)]:
            fifo.update(obj)
            produced += 1
        await asyncio.sleep(0)  # a watch read returns to the loop between chunks
    fifo.close()
    await consumer
    elapsed = time.perf_counter() - start
    assert processed == n_deltas, (processed, n_deltas)
    assert len(indexer) == keys
    return elapsed, processed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100, help="deltas produced per loop turn")
    parser.add_argument("--rounds", type=int, default=3)
    args = parse_args(parser, deltas=5000, keys=500, rounds=1)
    best = 0.0
    for r in range(args.rounds):
        elapsed, n = asyncio.run(run(args.deltas, args.keys, args.batch))
        rate = n / elapsed
        best = max(best, rate)
        print(f"round {r + 1}: {n} deltas in {elapsed:.3f} s = {rate:,.0f} deltas/s")
    print(f"best: {best:,.0f} deltas/s (DeltaFIFO.update -> pop -> Indexer.update, 3 indices, {args.keys} keys)")


if __name__ == "__main__":
    main()

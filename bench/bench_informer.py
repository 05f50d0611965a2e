"""Deltas per second through the informer pipeline: DeltaFIFO -> SharedIndexInformer._handle_deltas -> Indexer
(namespace index + 2 custom indexes) -> one no-op handler.

Two feeds: updates put straight into the DeltaFIFO (the informer's own machinery only), and updates read
from a FakeSource watch by the Reflector (adds the reflector and the in-memory watch). Each is run with an
async and a sync (worker-thread) no-op handler. Usage: ``python bench/bench_informer.py [--keys N] [--updates N]
[--profile]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import pstats
import random
import time
from typing import Any

from benchlib import parse_args

from kinformer.cache.fake import FakeSource
from kinformer.cache.shared_informer import SharedIndexInformer
from kinformer.clock import FakeClock

INDEXERS = {
    "by_app": lambda o: [o["metadata"]["labels"]["app"]],
    "by_tier": lambda o: [o["metadata"]["labels"]["tier"]],
}


def make_obj(i: int, rv: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}", "namespace": f"ns-{i % 20}", "resourceVersion": str(rv),
                         "labels": {"app": f"app-{i % 50}", "tier": ("web", "db", "cache")[i % 3]}},
            "data": {"k": str(rv)}}


class _NoLW:
    async def list(self, options: Any) -> Any:
        raise AssertionError("not used")

    def watch(self, options: Any) -> Any:
        raise AssertionError("not used")


def _handler(kind: str, counter: list[int], target: int, done: asyncio.Event) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    if kind == "async":
        async def on_update(old: Any, new: Any) -> None:
            counter[0] += 1
            if counter[0] >= target:
                done.set()
        return {"on_update": on_update}

    def sync_update(old: Any, new: Any) -> None:
        counter[0] += 1
        if counter[0] == target:
            loop.call_soon_threadsafe(done.set)
    return {"on_update": sync_update}


async def bench_fifo(keys: int, updates: int, handler_kind: str) -> float:
    """Updates fed straight into the informer's DeltaFIFO; returns deltas/s (until the handler saw them all)."""
    informer = SharedIndexInformer(_NoLW(), indexers=INDEXERS, clock=FakeClock())
    fifo = informer._fifo
    fifo.replace([make_obj(i, 1) for i in range(keys)], "1")
    while len(fifo):
        await fifo.pop(informer._handle_deltas)
    counter = [0]
    done = asyncio.Event()
    informer.add_event_handler(**_handler(handler_kind, counter, updates, done))
    objs = [make_obj(i % keys, 2 + i) for i in range(updates)]
    task_started = time.perf_counter()
    informer._started = True

    async def consume() -> None:
        pop = fifo.pop
        handle = informer._handle_deltas
        while True:
            await pop(handle)

    async with asyncio.TaskGroup() as tg:  # owns the consumer and the handler's task
        for listener in informer._listeners:
            listener.start(tg)
        consumer = tg.create_task(consume())
        update = fifo.update
        step = 1000
        for start in range(0, updates, step):
            for obj in objs[start:start + step]:
                update(obj)
            await asyncio.sleep(0)
        await done.wait()
        elapsed = time.perf_counter() - task_started
        consumer.cancel()
        for listener in informer._listeners:
            listener.stop()
    return updates / elapsed


async def bench_watch(keys: int, updates: int, handler_kind: str) -> float:
    """Updates written to a FakeSource beforehand, read by the Reflector from the watch; returns deltas/s."""
    src = FakeSource()
    for i in range(keys):
        src.create(make_obj(i, 0))
    informer = SharedIndexInformer(src, indexers=INDEXERS, clock=FakeClock(), rng=random.Random(1))
    counter = [0]
    done = asyncio.Event()
    informer.add_event_handler(**_handler(handler_kind, counter, updates, done))
    informer.start()
    await informer.wait_for_sync(30)
    src.close_watches()  # hold the watch closed while the updates are written
    for i in range(updates):
        src.put(make_obj(i % keys, 0))
    started = time.perf_counter()
    informer._reflector.clock.step(60)  # the closed watch counted as short: release its backoff
    await done.wait()
    elapsed = time.perf_counter() - started
    await informer.stop()
    return updates / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--freeze-gc", action="store_true", help="gc.freeze() the objects made before timing")
    args = parse_args(parser, keys=500, updates=3000)
    if args.freeze_gc:
        gc.freeze()
    for feed, fn in (("fifo", bench_fifo), ("watch", bench_watch)):
        for kind in ("async", "sync"):
            profiler = cProfile.Profile() if args.profile else None
            if profiler:
                profiler.enable()
            rate = await fn(args.keys, args.updates, kind)
            if profiler:
                profiler.disable()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(12)
            print(f"feed={feed:5s} handler={kind:5s} keys={args.keys} updates={args.updates}: {rate:,.0f} deltas/s",
                  flush=True)


if __name__ == "__main__":
    asyncio.run(main())

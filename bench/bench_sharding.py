"""Sharded controllers: reconciles/s of 1, 2 and 4 members, and the pause when a member leaves.

Run: ``python bench/bench_sharding.py [--keys 400] [--workers 4] [--call 0.02] [--window 3]``.

Workload: ``keys`` ConfigMaps in an embedded API server (memory storage, in this process); every member is
a ``Manager(client, sharding=ki.Sharding(...))`` with a client of its own and one controller of
``workers`` workers whose reconcile awaits ``call`` seconds (a slow external call) and asks to be
requeued at once (``Result(requeue_after=0.001)``), so every key is reconciled over and over.

Throughput: for 1, 2 and 4 members, once the group settled (every member sees all and may reconcile),
reconciles counted over ``window`` seconds. The members share this process (and its event loop), so the
figure shows what sharding is for: splitting slow, I/O-bound reconciles over more workers in more
replicas; it is not a CPU scaling figure.

Hand-off: with 4 members, one leaves (a graceful ``stop()``: drain, then delete its Lease; and a crash:
its run task cancelled, the Lease left to expire). Reported: the time from the stop until the other three
own its keys (their views settled without it), and, for each key it owned, the pause from its last
reconcile by the leaving member to its first by the new owner (which includes waiting behind the new
owner's own queue: the workload keeps every member busy); median and max over those keys, with the
lease timings used (``--lease 3 --renew 2 --retry 0.4``; the defaults 15/10/2
would make a crash's pause about 15 s).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import statistics
import time
from typing import Any

from benchlib import parse_args

import kinformer as ki
from kinformer.server import APIServer


class Workload:
    def __init__(self, call: float) -> None:
        self.call = call
        self.count = 0
        self.last: dict[str, tuple[str, float]] = {}  # key -> (member, end of its last reconcile)
        self.first_after: dict[str, tuple[str, float]] = {}  # key -> (member, start of its first reconcile)
        self.watching: str | None = None  # the member that left

    def reconciler(self, member: str) -> Any:
        async def reconcile(request: ki.Request) -> ki.Result:
            started = time.perf_counter()
            await asyncio.sleep(self.call)
            key = request.key
            if self.watching is None or member == self.watching:
                self.last[key] = (member, time.perf_counter())  # the leaving member's last end
            elif key not in self.first_after:
                self.first_after[key] = (member, started)  # the new owner's first start
            self.count += 1
            return ki.Result(requeue_after=0.001)

        return reconcile


class Member:
    def __init__(self, url: str, work: Workload, name: str, args: argparse.Namespace) -> None:
        self.name = name
        self.client = ki.Client(url)
        self.mgr = ki.Manager(self.client, sharding=ki.Sharding(
            "bench", identity=name, lease_duration=args.lease, renew_deadline=args.renew, retry_period=args.retry))
        self.mgr.controller(work.reconciler(name), name=f"bench-{name}").for_("configmaps").workers(args.workers)
        self.task = asyncio.create_task(self.mgr.run())

    async def stop(self, crash: bool = False) -> None:
        if crash:
            self.task.cancel()
        else:
            self.mgr.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.client.close()


async def poll(condition: Any, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110 (a benchmark's bounded poll)
            await asyncio.sleep(0.01)


async def settled(members: list[Member], timeout: float = 30.0) -> None:
    names = frozenset(m.name for m in members)
    await poll(lambda: all(m.mgr.shard_member is not None and m.mgr.shard_member.acting == names
                           and m.mgr.shard_member.admitted() for m in members), timeout)


async def throughput(url: str, n: int, args: argparse.Namespace) -> float:
    work = Workload(args.call)
    members = [Member(url, work, f"m{i}", args) for i in range(n)]
    try:
        await settled(members)
        await asyncio.sleep(0.5)  # past the initial list
        start, t0 = work.count, time.perf_counter()
        await asyncio.sleep(args.window)
        return (work.count - start) / (time.perf_counter() - t0)
    finally:
        for m in members:
            await m.stop()


async def handoff(url: str, args: argparse.Namespace, crash: bool) -> tuple[float, float, float, int]:
    work = Workload(args.call)
    members = [Member(url, work, f"m{i}", args) for i in range(4)]
    try:
        await settled(members)
        await asyncio.sleep(0.5)
        leaving = members[0]
        theirs = [key for key in work.last if work.last[key][0] == leaving.name]
        work.watching = leaving.name
        t0 = time.perf_counter()
        stopping = asyncio.create_task(leaving.stop(crash=crash))
        await settled(members[1:], timeout=args.lease * 4 + 10)
        handed = time.perf_counter() - t0
        await stopping
        await poll(lambda: all(key in work.first_after for key in theirs), args.lease * 4 + 10)
        pauses = [work.first_after[key][1] - work.last[key][1] for key in theirs]
        return handed, statistics.median(pauses), max(pauses), len(theirs)
    finally:
        for m in members[1:]:
            await m.stop()


async def main(args: argparse.Namespace) -> None:
    logging.basicConfig(level=logging.ERROR)
    async with APIServer(storage="memory") as server, ki.Client(server.url) as client:
        for i in range(0, args.keys, 50):
            await asyncio.gather(*(client.create("configmaps", {"metadata": {"name": f"cm-{j}",
                                                                             "namespace": "default"}})
                                   for j in range(i, min(i + 50, args.keys))))
        print(f"load average {os.getloadavg()[0]:.1f}; {args.keys} keys, {args.workers} workers per member, "
              f"reconcile awaits {args.call * 1000:.0f} ms; lease {args.lease}/{args.renew}/{args.retry} s")
        base = None
        print("| members | reconciles/s | vs 1 member | ideal |")
        print("|---:|---:|---:|---:|")
        for n in (1, 2, 4):
            rate = await throughput(server.url, n, args)
            base = base or rate
            ideal = n * args.workers / args.call
            print(f"| {n} | {rate:,.0f} | {rate / base:.2f}x | {ideal:,.0f} |")
        print("\n| a member leaves (of 4) | keys moved | others own them after | key pause median | max |")
        print("|---|---:|---:|---:|---:|")
        for crash in (False, True):
            handed, median, worst, moved = await handoff(server.url, args, crash)
            label = "crash (Lease left to expire)" if crash else "graceful stop (drain, delete Lease)"
            print(f"| {label} | {moved} | {handed:.2f} s | {median:.2f} s | {worst:.2f} s |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=400)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--call", type=float, default=0.02, help="seconds each reconcile awaits")
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--lease", type=float, default=3.0)
    parser.add_argument("--renew", type=float, default=2.0)
    parser.add_argument("--retry", type=float, default=0.4)
    asyncio.run(main(parse_args(parser, keys=40, window=0.5, lease=2.0, renew=1.5, retry=0.3)))

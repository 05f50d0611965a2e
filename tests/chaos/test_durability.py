"""Server durability: ``kill -9`` of ``kinformer serve`` under a write load loses no acknowledged write.

A real ``kinformer serve --no-tls`` process (SQLite in a data directory) takes concurrent creates, updates
and deletes through a :class:`kinformer.Client`; every write the server acknowledged is recorded with its
resourceVersion. The process is killed with SIGKILL mid-load and restarted on the same data directory and
port, three times over. After each restart:

* every acknowledged create/update is present at its acknowledged resourceVersion or a later one;
* every acknowledged delete stays deleted;
* resourceVersions stay monotonic: the restarted server's list RV and new writes are above every
  acknowledged RV;
* an informer started before the kill (reflector with a fast backoff) resumes or relists and ends equal to
  the server's state.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from chaoslib import diff_cache, make_factory

from kinformer.cache.reflector import Backoff
from kinformer.client import Client
from kinformer.errors import APIError

WRITERS = 8
CYCLES = 3
WRITES_PER_CYCLE = 300
NAMESPACE = "durable"
START_TIMEOUT = 30.0
SERVE = "import sys; from kinformer.cli import main; sys.exit(main())"


@dataclass
class Acks:
    """The last acknowledged write per object name: ("present", rv) or ("deleted", rv)."""

    last: dict[str, tuple[str, int]] = field(default_factory=dict)
    count: int = 0
    deleting: set[str] = field(default_factory=set)  # deletes sent, not (yet) acknowledged: may have committed

    def ack(self, name: str, state: str, rv: int) -> None:
        self.last[name] = (state, rv)
        self.count += 1

    @property
    def max_rv(self) -> int:
        return max((rv for _, rv in self.last.values()), default=0)


class Serve:
    """One ``kinformer serve`` process on ``port`` (0: any) over ``data``."""

    def __init__(self, data: Path, port: int) -> None:
        self.data, self.port = data, port
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self.log_path = data.parent / "serve.log"

    async def start(self) -> str:
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", SERVE, "serve", "--bare", "--no-tls", "--host", "127.0.0.1",
                "--port", str(self.port), "--data", str(self.data), "--watch-cache-size", "50",
                stdout=asyncio.subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        async with asyncio.timeout(START_TIMEOUT):
            while True:
                line = (await self.proc.stdout.readline()).decode()
                if not line:
                    raise RuntimeError(f"kinformer serve exited with {await self.proc.wait()}")
                if "listening on" in line:
                    self.url = line.split("listening on", 1)[1].split()[0]
                    self.port = int(self.url.rsplit(":", 1)[1])
                    return self.url

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
            await self.proc.wait()


async def _writer(client: Client, prefix: str, acks: Acks, stop: asyncio.Event, rng: random.Random) -> None:
    """Create, update and delete configmaps until the server dies (or ``stop``); record every acknowledgement."""
    mine: list[str] = []
    i = 0
    while not stop.is_set():
        i += 1
        try:
            roll = rng.random()
            if not mine or roll < 0.5:
                name = f"{prefix}-{i}"
                obj = await client.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                    "name": name, "namespace": NAMESPACE}, "data": {"i": str(i)}}, namespace=NAMESPACE)
                mine.append(name)
                acks.ack(name, "present", int(obj["metadata"]["resourceVersion"]))
            elif roll < 0.85:
                name = rng.choice(mine)
                obj = await client.patch("configmaps", name, {"data": {"i": str(i)}}, namespace=NAMESPACE)
                acks.ack(name, "present", int(obj["metadata"]["resourceVersion"]))
            else:
                name = mine.pop(rng.randrange(len(mine)))
                acks.deleting.add(name)
                status = await client.delete("configmaps", name, namespace=NAMESPACE)
                rv = (status.get("metadata") or {}).get("resourceVersion")
                acks.ack(name, "deleted", int(rv) if rv else 0)
                acks.deleting.discard(name)
        except (TimeoutError, aiohttp.ClientError, OSError, APIError):
            return  # the server died under this request: it was never acknowledged


async def _wait_for(cond: Any, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.mark.timeout(90)
async def test_kill_9_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    acks = Acks()
    rng = random.Random(6)

    def backoff() -> Backoff:
        return Backoff(initial=0.02, cap=0.2, reset_after=2.0, rng=random.Random(1))

    serve = Serve(data, 0)
    url = await serve.start()
    port = serve.port
    try:
        async with Client(url, timeout=10.0) as watched:
            async with Client(url, timeout=10.0) as setup:
                await setup.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": NAMESPACE}})
            factory = make_factory(watched, backoff)
            informer = factory.informer("configmaps", namespace=NAMESPACE)
            factory.start()
            assert all((await factory.wait_for_cache_sync(timeout=20)).values())
            try:
                for cycle in range(CYCLES):
                    serve = await _kill_mid_load(serve, data, port, cycle, acks, rng, informer)
                stats = informer.stats.reflector
            finally:
                await factory.shutdown()
    finally:
        await serve.kill()
    print(f"\ndurability: {CYCLES} x kill -9 under load, {acks.count} acknowledged writes, 0 lost; informer "
          f"relists={stats.relists} watch_restarts={stats.watch_restarts}")


async def _kill_mid_load(serve: Serve, data: Path, port: int, cycle: int, acks: Acks, rng: random.Random,
                         informer: Any) -> Serve:
    """Write until WRITES_PER_CYCLE more acknowledgements, SIGKILL the server, restart it, check; the new one."""
    target = acks.count + WRITES_PER_CYCLE
    async with Client(serve.url, timeout=10.0, max_retries=0) as writer_client:
        stop = asyncio.Event()
        writers = [asyncio.create_task(_writer(writer_client, f"c{cycle}-w{w}", acks, stop, rng))
                   for w in range(WRITERS)]
        await _wait_for(lambda: _true(acks.count >= target), 30, f"{WRITES_PER_CYCLE} acknowledged writes")
        await serve.kill()  # SIGKILL mid-load: the writers are still going
        stop.set()
        await asyncio.wait_for(asyncio.gather(*writers), 30)
    restarted = Serve(data, port)
    await restarted.start()
    async with Client(restarted.url, timeout=10.0) as direct:
        await _check_acknowledged(direct, acks, f"after-restart-{cycle}")
        await _wait_for(lambda: _informer_equal(direct, informer), 30, "the informer to converge")
    stats = informer.stats.reflector
    assert stats.watch_errors + stats.list_errors >= cycle + 1  # it did notice each crash
    return restarted


async def _true(value: bool) -> bool:
    return value


async def _check_acknowledged(direct: Client, acks: Acks, probe: str) -> None:
    listed = await direct.list("configmaps", namespace=NAMESPACE)
    present = {o["metadata"]["name"]: int(o["metadata"]["resourceVersion"]) for o in listed.items}
    lost = []
    for name, (state, rv) in acks.last.items():
        if state == "present" and present.get(name, -1) < rv and name not in acks.deleting:
            lost.append(f"{name}: acknowledged at rv {rv}, after restart {present.get(name)}")
        if state == "deleted" and name in present:
            lost.append(f"{name}: acknowledged delete, present again at rv {present[name]}")
    assert not lost, f"{len(lost)} acknowledged writes lost: {lost[:20]}"
    top = acks.max_rv
    assert int(listed.resource_version) >= top
    obj = await direct.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": probe, "namespace": NAMESPACE}}, namespace=NAMESPACE)
    rv = int(obj["metadata"]["resourceVersion"])
    assert rv > top, "a new write got a resourceVersion already handed out"
    acks.ack(probe, "present", rv)


async def _informer_equal(direct: Client, informer: Any) -> bool:
    listed = await direct.list("configmaps", namespace=NAMESPACE)
    expected = {f"{NAMESPACE}/{o['metadata']['name']}": int(o["metadata"]["resourceVersion"]) for o in listed.items}
    return diff_cache(informer, expected) == ""

"""Chaos convergence: informers behind a fault proxy end equal to the server, and their handlers saw it all.

Each schedule is a pure function of its seed: a SQLite-backed :class:`APIServer` (small watch cache, so 410s
happen), a :class:`FaultProxy` in front of it, informers for configmaps and secrets (cluster-wide) and for
configmaps in one namespace, fed through the proxy (a quarter of the schedules with streaming lists), with an
async handler each and a plain (threaded) one on the cluster-wide configmaps; a direct client runs 20-60
random writes across three namespaces while faults fire between them (dropped connections, stalls, refused
connections, injected 500/429/410, delay, compaction to the current revision, server restarts on the same
database file, the proxy retargeted to the new port).

After the workload every fault is healed and, within a bounded wait, the schedule must converge:

* every informer's cache equals the server's state (keys and resourceVersions, read by a direct list);
* for every live key, the last notification each handler got carries the key's final resourceVersion;
* for every key that is gone and that a handler had seen, the handler's last notification is a delete
  (the object or a ``DeletedFinalStateUnknown`` tombstone);
* no handler ever saw a key's resourceVersion go backwards.

Environment: ``KINFORMER_CHAOS_SCHEDULES`` (default 200) and ``KINFORMER_CHAOS_BUDGET`` (seconds, default
150) scale the run; ``KINFORMER_CHAOS_SEED=N`` replays exactly schedule N (with its fault log printed).
Totals go to ``chaos-totals.json`` in the pytest base temp directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from chaoslib import diff_cache, fast_backoff, make_factory

from kinformer.cache.tombstone import DeletedFinalStateUnknown
from kinformer.client import Client
from kinformer.server import APIServer
from kinformer.testing import FaultProxy

NAMESPACES = ("chaos-a", "chaos-b", "chaos-c")
KINDS = ("configmaps", "secrets")
NAMES = tuple(f"obj-{i}" for i in range(5))
CONVERGE_TIMEOUT = 30.0
SETTLE = 0.15
CACHE_SIZES = (3, 5, 8, 16, 50)

# Informers under test: (label, resource, namespace or None for all namespaces).
INFORMERS = (("configmaps", "configmaps", None), ("secrets", "secrets", None),
             (f"configmaps@{NAMESPACES[0]}", "configmaps", NAMESPACES[0]))


# ---------------------------------------------------------------------------------------------------- records


@dataclass
class HandlerLog:
    """Every notification one handler got, per key: (kind, resourceVersion) in delivery order."""

    events: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    def _rv(self, obj: Any) -> int:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if obj is None:
            return -1
        return int(obj["metadata"]["resourceVersion"])

    def record(self, kind: str, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            key = obj.key
            kind = "tombstone"
        else:
            meta = obj["metadata"]
            key = f"{meta['namespace']}/{meta['name']}"
        self.events.setdefault(key, []).append((kind, self._rv(obj)))

    def handlers(self, *, threaded: bool) -> dict[str, Callable[..., Any]]:
        record = self.record
        if threaded:
            return {"on_add": lambda obj: record("add", obj), "on_update": lambda old, new: record("update", new),
                    "on_delete": lambda obj: record("delete", obj)}

        async def on_add(obj: Any) -> None:
            record("add", obj)

        async def on_update(old: Any, new: Any) -> None:
            record("update", new)

        async def on_delete(obj: Any) -> None:
            record("delete", obj)

        return {"on_add": on_add, "on_update": on_update, "on_delete": on_delete}

    def problems(self, final: dict[str, int], name: str) -> list[str]:
        """What this log says that contradicts the server's final state ``{key: rv}``."""
        out = []
        for key, rv in final.items():
            seen = self.events.get(key)
            if not seen:
                out.append(f"{name}: live key {key} (rv {rv}) never reached the handler")
            elif seen[-1][0] not in ("add", "update") or seen[-1][1] != rv:
                out.append(f"{name}: live key {key}: last notification {seen[-1]}, want final rv {rv}")
        for key, seen in self.events.items():
            if key not in final and seen[-1][0] not in ("delete", "tombstone"):
                out.append(f"{name}: deleted key {key}: last notification {seen[-1]} is not a delete")
            rvs = [rv for kind, rv in seen if rv >= 0]
            if any(b < a for a, b in itertools.pairwise(rvs)):
                out.append(f"{name}: key {key}: resourceVersion went backwards: {seen}")
        return out


@dataclass
class Outcome:
    seed: int
    faults: Counter[str]
    log: list[str]
    problems: list[str]
    seconds: float
    restarts: int
    reflector: Counter[str]


# ---------------------------------------------------------------------------------------------------- schedule


class Schedule:
    """One seeded run: workload + faults, then the convergence checks."""

    def __init__(self, seed: int, data: Path) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.db = data / f"chaos-{seed}.db"
        self.cache_size = self.rng.choice(CACHE_SIZES)
        self.streaming = self.rng.random() < 0.25
        self.faults: Counter[str] = Counter()
        self.log: list[str] = [f"seed {seed}: watch_cache_size={self.cache_size} streaming_list={self.streaming}"]
        self.model: dict[tuple[str, str, str], bool] = {}  # (kind, ns, name) -> exists
        self.server: APIServer | None = None
        self.direct: Client | None = None
        self.restarts = 0
        self.reflector: Counter[str] = Counter()
        # Timed faults: (ops remaining, undo).
        self._pending_undo: list[list[Any]] = []

    # -- server lifecycle

    async def _start_server(self) -> APIServer:
        server = APIServer(storage=f"sqlite:///{self.db}", watch_cache_size=self.cache_size,
                           compaction_interval=0, bookmark_interval=0.2)
        await server.start()
        self.server = server
        self.direct = Client(server.url)
        return server

    async def _stop_server(self) -> None:
        if self.direct is not None:
            await self.direct.close()
            self.direct = None
        if self.server is not None:
            await self.server.stop()
            self.server = None

    async def _restart(self, proxy: FaultProxy) -> None:
        await self._stop_server()
        server = await self._start_server()
        proxy.retarget(server.host, server.port)
        self.restarts += 1

    # -- run

    async def run(self) -> Outcome:
        started = time.perf_counter()
        problems: list[str] = []
        server = await self._start_server()
        try:
            for ns in NAMESPACES:
                await self.direct.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",  # type: ignore[union-attr]
                                                        "metadata": {"name": ns}})
            async with FaultProxy(server.host, server.port) as proxy, Client(proxy.url, timeout=30.0) as watched:
                problems = await self._with_informers(proxy, watched)
        except Exception as exc:  # a crash in the harness or the library is a divergence too
            problems.append(f"schedule raised {type(exc).__name__}: {exc}")
            logging.getLogger(__name__).exception("seed %d raised", self.seed)
        finally:
            await self._stop_server()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(f"{self.db}{suffix}")
        return Outcome(self.seed, self.faults, self.log, problems, time.perf_counter() - started, self.restarts,
                       self.reflector)

    async def _with_informers(self, proxy: FaultProxy, watched: Client) -> list[str]:
        factory = make_factory(watched, fast_backoff(self.rng), streaming=self.streaming)
        logs: dict[str, HandlerLog] = {}
        regs = []
        informers = {}
        for label, resource, ns in INFORMERS:
            informer = factory.informer(resource, namespace=ns)
            informers[label] = informer
            for threaded in (False, label == "configmaps"):
                name = f"{label}{'/thread' if threaded else ''}"
                if name in logs:
                    continue
                logs[name] = HandlerLog()
                regs.append((label, name, informer.add_event_handler(**logs[name].handlers(threaded=threaded))))
        try:
            factory.start()
            synced = await factory.wait_for_cache_sync(timeout=CONVERGE_TIMEOUT)
            if not all(synced.values()):
                return [f"informers did not sync: {synced}"]
            t0 = time.perf_counter()
            await self._workload(proxy)
            proxy.heal()
            self._pending_undo.clear()
            t1 = time.perf_counter()
            problems = await self._converge(informers, regs, logs)
            self.log.append(f"healed; workload {t1 - t0:.3f}s, converged in {time.perf_counter() - t1:.3f}s")
            return problems
        finally:
            await factory.shutdown()

    # -- workload

    async def _workload(self, proxy: FaultProxy) -> None:
        rng = self.rng
        ops = rng.randint(20, 60)
        fault_rate = rng.choice((0.15, 0.3, 0.5))
        restart_at = rng.randrange(ops) if rng.random() < 0.2 else -1
        for i in range(ops):
            await self._one_op(i)
            self._tick()
            if i == restart_at:
                self.faults["restart"] += 1
                self.log.append(f"op {i}: restart server")
                await self._restart(proxy)
            elif rng.random() < fault_rate:
                await self._settle(proxy)
                await self._fault(i, proxy)
            if rng.random() < 0.3:
                await asyncio.sleep(rng.choice((0, 0.001, 0.005)))  # let the informers read some of it

    async def _one_op(self, i: int) -> None:
        rng = self.rng
        kind, ns, name = rng.choice(KINDS), rng.choice(NAMESPACES), rng.choice(NAMES)
        exists = self.model.get((kind, ns, name), False)
        direct = self.direct
        assert direct is not None
        value = f"{self.seed}-{i}"
        if not exists:
            body = {"apiVersion": "v1", "kind": "ConfigMap" if kind == "configmaps" else "Secret",
                    "metadata": {"name": name, "namespace": ns, "labels": {"op": str(i)}},
                    "data": {"v": value if kind == "configmaps" else "eA=="}}
            await direct.create(kind, body, namespace=ns)
            self.model[(kind, ns, name)] = True
        elif rng.random() < 0.3:
            await direct.delete(kind, name, namespace=ns)
            self.model[(kind, ns, name)] = False
        elif rng.random() < 0.5:
            await direct.patch(kind, name, {"metadata": {"labels": {"op": str(i)}}}, namespace=ns)
        else:
            current = (await direct.get(kind, name, namespace=ns)).to_dict()
            current["metadata"]["annotations"] = {"op": value}
            await direct.replace(kind, current, namespace=ns)

    async def _settle(self, proxy: FaultProxy) -> None:
        """Wait (at most SETTLE seconds) until every informer has a connection open through the proxy, so that
        the next fault hits live streams rather than reflectors still backing off from the previous one."""
        if proxy.refuse:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE
        while proxy.connections < len(INFORMERS) and loop.time() < deadline:  # noqa: ASYNC110 - no event to await
            await asyncio.sleep(0.002)

    def _tick(self) -> None:
        """Count down timed faults; undo the ones that expire."""
        keep = []
        for entry in self._pending_undo:
            entry[0] -= 1
            if entry[0] <= 0:
                entry[1]()
            else:
                keep.append(entry)
        self._pending_undo = keep

    def _later(self, ops: int, undo: Callable[[], None]) -> None:
        self._pending_undo.append([ops, undo])

    async def _fault(self, i: int, proxy: FaultProxy) -> None:
        rng = self.rng
        kind = rng.choice(("drop", "drop", "stall", "inject", "inject", "compact", "delay", "refuse"))
        self.faults[kind] += 1
        if kind == "drop":
            self.log.append(f"op {i}: drop {proxy.drop_connections()} connections")
        elif kind == "stall":
            span = rng.randint(1, 5)
            proxy.stall()
            self._later(span, proxy.resume)
            self.log.append(f"op {i}: stall for {span} ops")
        elif kind == "inject":
            status = rng.choice((500, 429, 410))
            times = rng.randint(1, 3)
            retry_after = rng.choice((None, None, 0))
            self.faults[f"inject_{status}"] += 1
            proxy.inject(status, times=times, retry_after=retry_after)
            self.log.append(f"op {i}: inject {status} x{times} retry_after={retry_after}")
        elif kind == "compact":
            storage = self.server.storage  # type: ignore[union-attr]
            rev = await storage.current_revision()
            await storage.compact(rev)
            self.log.append(f"op {i}: compact to {rev}")
        elif kind == "delay":
            delay, span = rng.choice((0.002, 0.01, 0.03)), rng.randint(1, 5)
            proxy.delay = delay

            def undelay() -> None:
                proxy.delay = 0.0

            self._later(span, undelay)
            self.log.append(f"op {i}: delay {delay}s for {span} ops")
        else:
            span = rng.randint(1, 4)
            proxy.refuse = True

            def accept() -> None:
                proxy.refuse = False

            self._later(span, accept)
            self.log.append(f"op {i}: refuse connections for {span} ops")

    # -- convergence

    async def _server_state(self) -> dict[str, dict[str, int]]:
        direct = self.direct
        assert direct is not None
        state = {}
        for label, resource, ns in INFORMERS:
            items = (await direct.list(resource, namespace=ns)).items
            state[label] = {f"{o['metadata']['namespace']}/{o['metadata']['name']}":
                            int(o["metadata"]["resourceVersion"]) for o in items}
        return state

    async def _converge(self, informers: dict[str, Any], regs: list[tuple[str, str, Any]],
                        logs: dict[str, HandlerLog]) -> list[str]:
        expected = await self._server_state()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONVERGE_TIMEOUT
        while True:
            cache_diff = {label: diff_cache(informers[label], expected[label]) for label in informers}
            cache_diff = {label: d for label, d in cache_diff.items() if d}
            idle = all(reg.pending == 0 for _, _, reg in regs)
            if not cache_diff and idle:
                break
            if loop.time() > deadline:
                out = [f"cache of {label} differs from the server: {d}" for label, d in cache_diff.items()]
                out += [f"handler {name} still has {reg.pending} pending" for _, name, reg in regs if reg.pending]
                return out or ["did not converge"]
            await asyncio.sleep(0.005)
        problems = []
        for label, name, reg in regs:
            problems += logs[name].problems(expected[label], name)
            if reg.errors:
                problems.append(f"handler {name} raised {reg.errors} times")
        stats = {label: informers[label].stats.reflector for label in informers}
        for s in stats.values():
            self.reflector.update({"lists": s.lists, "relists": s.relists, "watches": s.watches,
                                   "watch_restarts": s.watch_restarts, "errors": s.watch_errors + s.list_errors,
                                   "events": s.added + s.modified + s.deleted})
        self.log.append("reflectors: " + "; ".join(
            f"{label}: lists={s.lists} relists={s.relists} watches={s.watches} restarts={s.watch_restarts} "
            f"errors={s.watch_errors + s.list_errors}" for label, s in stats.items()))
        return problems


# ---------------------------------------------------------------------------------------------------- the test


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    return float(value) if value.strip() else default


def _report(outcome: Outcome) -> str:
    lines = [f"--- seed {outcome.seed} diverged (replay: KINFORMER_CHAOS_SEED={outcome.seed} "
             f"python3 -m pytest tests/chaos/test_convergence.py)", *outcome.problems[:30], "fault log:",
             *(f"  {line}" for line in outcome.log)]
    return "\n".join(lines)


@pytest.mark.timeout(0)
async def test_chaos_convergence(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory,
                                 caplog: pytest.LogCaptureFixture) -> None:
    replay = os.environ.get("KINFORMER_CHAOS_SEED", "").strip()
    if replay:
        seeds = [int(replay)]
        budget = float("inf")
    else:
        seeds = list(range(1, _env_int("KINFORMER_CHAOS_SCHEDULES", 200) + 1))
        budget = _env_float("KINFORMER_CHAOS_BUDGET", 150.0)
    # Faults make routine warnings; the checks decide. (caplog restores the level after the test.)
    caplog.set_level(logging.CRITICAL, logger="kinformer")
    totals: Counter[str] = Counter()
    reflectors: Counter[str] = Counter()
    failures: list[Outcome] = []
    durations: list[float] = []
    started = time.perf_counter()
    run = restarts = 0
    for seed in seeds:
        if time.perf_counter() - started > budget:
            break
        outcome = await Schedule(seed, tmp_path).run()
        run += 1
        restarts += outcome.restarts
        durations.append(outcome.seconds)
        totals.update(outcome.faults)
        reflectors.update(outcome.reflector)
        if outcome.problems:
            failures.append(outcome)
            print(_report(outcome))
        elif replay:
            print("\n".join(outcome.log))
    elapsed = time.perf_counter() - started
    durations.sort()
    summary = {
        "schedules_run": run, "schedules_planned": len(seeds), "budget_seconds": budget if replay == "" else None,
        "elapsed_seconds": round(elapsed, 2), "server_restarts": restarts,
        "faults_by_kind": dict(sorted(totals.items())), "faults_total": sum(
            v for k, v in totals.items() if not k.startswith("inject_")),
        "reflector_totals": dict(sorted(reflectors.items())),
        "divergences": len(failures), "diverged_seeds": [f.seed for f in failures],
        "schedule_seconds_median": round(durations[len(durations) // 2], 3) if durations else None,
        "schedule_seconds_max": round(durations[-1], 3) if durations else None,
    }
    out = tmp_path_factory.getbasetemp() / "chaos-totals.json"
    out.write_text(json.dumps(summary, indent=2))
    print(f"\nchaos: {run} schedules in {elapsed:.1f}s, {summary['faults_total']} faults "
          f"{summary['faults_by_kind']}, {restarts} restarts; informers: {summary['reflector_totals']}; "
          f"{len(failures)} divergences -> {out}")
    assert not failures, "\n".join(_report(f) for f in failures[:5])

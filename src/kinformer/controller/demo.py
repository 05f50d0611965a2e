"""``kinformer demo``: Kubernetes' sample-controller in Python, on an embedded API server, under faults.

A ``Foo`` (samplecontroller.k8s.io/v1alpha1; ``spec.deploymentName``, ``spec.replicas``) is reconciled
into an owned Deployment, and the Deployment's ``status.availableReplicas`` is copied back to the
Foo. The embedded server runs no kube-controller-manager, so a second controller stands in for it
and reports every Deployment's replicas as available.

While Foos are created, scaled and deleted, the demo injects faults: dropped watch connections (a
proxy between client and server cuts them), a forced 410 relist (the proxy stalls, objects change
and are deleted, the server compacts its history, then the connections drop), reconciles that fail
a few times before succeeding, and a deliberately slow event handler. It ends by checking, through
the API, that every Foo converged; it exits non-zero if any did not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GROUP, VERSION = "samplecontroller.k8s.io", "v1alpha1"
FOOS = f"{GROUP}/{VERSION}/foos"
DEPLOYMENTS = "apps/v1/deployments"
NAMESPACES = ("demo-a", "demo-b")

FOO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"foos.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList"},
        "versions": [{
            "name": VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "deploymentName": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 0}}},
                    "status": {"type": "object", "properties": {
                        "availableReplicas": {"type": "integer"}}},
                }}},
        }],
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--foos", type=int, default=24, help="how many Foos to create (default 24)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the workload and the faults")
    parser.add_argument("--storage", default=None,
                        help="server storage URL (default: a SQLite file in a temporary directory)")
    parser.add_argument("--duration", type=float, default=50.0,
                        help="roughly how long the workload runs, in seconds (default 50)")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds allowed to converge")
    parser.add_argument("--keep", action="store_true",
                        help="leave the server running at the end (Ctrl-C to stop)")
    parser.add_argument("--plain", action="store_true", help="log lines instead of the live view")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    # Reconcile failures are part of the show: they are counted in the live view, not logged.
    logging.getLogger("kinformer.controller.controller").setLevel(logging.CRITICAL)
    try:
        return asyncio.run(Demo(args).run())
    except KeyboardInterrupt:
        return 130


@dataclass
class Faults:
    """Which faults fired, for the live view and the summary."""

    counts: Counter[str] = field(default_factory=Counter)
    fail_first: dict[str, int] = field(default_factory=dict)  # key -> failures still to inject

    def should_fail(self, key: str) -> bool:
        left = self.fail_first.get(key, 0)
        if left > 0:
            self.fail_first[key] = left - 1
            self.counts["reconcile failures"] += 1
            return True
        return False


class FooReconciler:
    """sample-controller's syncHandler: Foo -> owned Deployment, status copied back."""

    def __init__(self, client: Any, foos: Any, deployments: Any, faults: Faults) -> None:
        self.client, self.foos, self.deployments, self.faults = client, foos, deployments, faults

    async def reconcile(self, request: Any) -> Any:
        from kinformer.controller import Result, TerminalError
        from kinformer.errors import AlreadyExists

        foo = self.foos.indexer.get_by_key(request.key)
        if foo is None:
            return Result()  # deleted: the server's garbage collector removes its Deployment
        spec = foo.get("spec") or {}
        name = spec.get("deploymentName")
        if not name:
            raise TerminalError(f"{request}: spec.deploymentName must be set")
        if self.faults.should_fail(request.key):
            raise RuntimeError(f"injected failure reconciling {request}")
        replicas = int(spec.get("replicas") or 0)
        dep = self.deployments.indexer.get_by_key(f"{request.namespace}/{name}")
        if dep is None:
            with contextlib.suppress(AlreadyExists):
                await self.client.create(DEPLOYMENTS, new_deployment(foo, name, replicas), namespace=request.namespace)
            return Result()
        if not owned_by(dep, foo):
            raise TerminalError(f'Resource "{name}" already exists and is not managed by Foo')
        if (dep.get("spec") or {}).get("replicas") != replicas:
            await self.client.patch(DEPLOYMENTS, name, {"spec": {"replicas": replicas}}, namespace=request.namespace)
        available = ((dep.get("status") or {}).get("availableReplicas")) or 0
        if ((foo.get("status") or {}).get("availableReplicas")) != available:
            await self.client.patch_status(FOOS, request.name, {"status": {"availableReplicas": available}},
                                           namespace=request.namespace)
        return Result()


class DeploymentStatusReconciler:
    """Stands in for kube-controller-manager and kubelets: reports a Deployment's replicas as available."""

    def __init__(self, client: Any, deployments: Any) -> None:
        self.client, self.deployments = client, deployments

    async def reconcile(self, request: Any) -> None:
        dep = self.deployments.indexer.get_by_key(request.key)
        if dep is None:
            return
        replicas = (dep.get("spec") or {}).get("replicas") or 0
        status = dep.get("status") or {}
        if status.get("availableReplicas") != replicas or status.get("replicas") != replicas:
            await self.client.patch_status(DEPLOYMENTS, request.name, {"status": {
                "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                "updatedReplicas": replicas, "observedGeneration": dep["metadata"].get("generation")}},
                namespace=request.namespace)


def new_deployment(foo: Any, name: str, replicas: int) -> dict[str, Any]:
    meta = foo["metadata"]
    labels = {"app": "nginx", "controller": meta["name"]}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels, "ownerReferences": [{
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Foo", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}},
    }


def owned_by(dep: Any, foo: Any) -> bool:
    uid = foo["metadata"].get("uid")
    return any(ref.get("uid") == uid and ref.get("controller") for ref in dep["metadata"].get("ownerReferences") or ())


class Demo:
    """The whole run: server, proxy, manager, workload with faults, live view, verification."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.faults = Faults()
        self.phase = "starting"
        self.log: list[str] = []
        self.expected: dict[str, int | None] = {}  # key -> replicas (None: deleted)
        self.slow_seen = 0
        self.started = time.monotonic()

    def say(self, line: str) -> None:
        stamp = f"{time.monotonic() - self.started:5.1f}s"
        self.log.append(f"{stamp}  {line}")
        if self.args.plain:
            print(f"{stamp}  {line}", flush=True)

    async def run(self) -> int:
        from kinformer.server import APIServer

        tmp = tempfile.TemporaryDirectory(prefix="kinformer-demo-")
        storage = self.args.storage or f"sqlite:///{Path(tmp.name) / 'demo.db'}"
        try:
            async with APIServer(storage=storage, watch_cache_size=100) as server:
                return await self._run_with_server(server, Path(tmp.name))
        finally:
            tmp.cleanup()

    async def _run_with_server(self, server: Any, data: Path) -> int:
        from kinformer.client import Client
        from kinformer.testing import FaultProxy

        self.server = server
        self.say(f"embedded API server at {server.url}")
        async with FaultProxy.for_url(server.url) as proxy, Client(proxy.url) as client, \
                Client(server.url) as direct:
            # The controllers talk through the fault proxy; the workload and the checks go direct.
            self.proxy, self.client, self.direct = proxy, client, direct
            await self._install_crd()
            manager, registrations = await self._manager()
            self.manager = manager
            run = asyncio.create_task(manager.run())
            view = asyncio.create_task(self._view())
            try:
                await self._wait(lambda: manager.ready(), 30, "caches to sync")
                await self._workload()
                converged = await self._converge()
            finally:
                manager.stop()
                await asyncio.gather(run, return_exceptions=True)
                view.cancel()
                await asyncio.gather(view, return_exceptions=True)
            self._summary(converged, registrations)
            if self.args.keep:
                await self._keep(server, data)
            return 0 if converged else 1

    async def _install_crd(self) -> None:
        from kinformer.errors import NotFound

        await self.direct.create("apiextensions.k8s.io/v1/customresourcedefinitions", FOO_CRD)
        for ns in NAMESPACES:
            await self.direct.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while True:
            try:
                self.client.invalidate_discovery()
                await self.client.resolve(FOOS)
                break
            except NotFound:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.05)
        self.say("installed CRD foos.samplecontroller.k8s.io and namespaces " + ", ".join(NAMESPACES))

    async def _manager(self) -> tuple[Any, dict[str, Any]]:
        from kinformer.controller import Manager

        mgr = Manager(self.client, resync=10.0, cache_sync_timeout=30.0, graceful_shutdown_timeout=5.0)
        foos, deployments = mgr.informer(FOOS), mgr.informer(DEPLOYMENTS)
        mgr.controller(FooReconciler(self.client, foos, deployments, self.faults), name="foo") \
            .for_(FOOS).owns(DEPLOYMENTS).workers(2)
        mgr.controller(DeploymentStatusReconciler(self.client, deployments), name="deployment-status") \
            .for_(DEPLOYMENTS).workers(2)

        async def slow(*_: Any) -> None:
            self.slow_seen += 1
            await asyncio.sleep(0.2)

        async def slow_update(old: Any, new: Any) -> None:
            await slow()

        registrations = {"slow handler": foos.add_event_handler(on_add=slow, on_update=slow_update, on_delete=slow)}
        self.informers = {"foos": foos, "deployments": deployments}
        return mgr, registrations

    # -- workload ---------------------------------------------------------------------------------

    async def _pause(self, fraction: float) -> None:
        await asyncio.sleep(self.args.duration * fraction)

    async def _workload(self) -> None:
        n = self.args.foos
        keys = [(NAMESPACES[i % len(NAMESPACES)], f"foo-{i:02d}") for i in range(n)]
        for ns, name in keys[::4]:
            self.faults.fail_first[f"{ns}/{name}"] = 2
        self.phase = "create"
        for i, (ns, name) in enumerate(keys):
            replicas = self.rng.randint(1, 3)
            await self._create_foo(ns, name, replicas)
            if i == n // 2:
                self._drop("mid-create")
            await self._pause(0.1 / n)
        await self._pause(0.15)

        self.phase = "scale"
        for round_ in range(3):
            for ns, name in self.rng.sample(keys, k=max(1, n // 3)):
                await self._scale(ns, name, self.rng.randint(1, 5))
            self._drop(f"scale round {round_ + 1}")
            await self._pause(0.1)

        self.phase = "forced relist"
        await self._forced_relist(keys)
        await self._pause(0.15)

        self.phase = "delete"
        live = [k for k in keys if self.expected.get(f"{k[0]}/{k[1]}") is not None]
        for ns, name in self.rng.sample(live, k=max(1, len(live) // 5)):
            await self._delete_foo(ns, name)
        self._drop("during deletes")
        await self._pause(0.1)
        self.phase = "steady (resyncs replay the cache)"
        self.say("steady state: periodic resyncs (every 10 s) reach the reconciler with nothing changed")
        await self._pause(0.2)

    async def _create_foo(self, ns: str, name: str, replicas: int) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Foo", "metadata": {"name": name, "namespace": ns},
                "spec": {"deploymentName": f"{name}-deploy", "replicas": replicas}}
        await self.direct.create(FOOS, body, namespace=ns)
        self.expected[f"{ns}/{name}"] = replicas

    async def _scale(self, ns: str, name: str, replicas: int) -> None:
        if self.expected.get(f"{ns}/{name}") is None:
            return
        await self.direct.patch(FOOS, name, {"spec": {"replicas": replicas}}, namespace=ns)
        self.expected[f"{ns}/{name}"] = replicas

    async def _delete_foo(self, ns: str, name: str) -> None:
        await self.direct.delete(FOOS, name, namespace=ns)
        self.expected[f"{ns}/{name}"] = None

    def _drop(self, why: str) -> None:
        dropped = self.proxy.drop_connections()
        self.faults.counts["dropped connections"] += dropped
        self.say(f"fault: dropped {dropped} connections ({why})")

    async def _forced_relist(self, keys: list[tuple[str, str]]) -> None:
        """Stall the watches, change and delete objects, compact history, then cut the connections."""
        self.proxy.stall()
        self.say("fault: watches stalled; changing objects behind the informers' back")
        for ns, name in self.rng.sample(keys, k=max(1, len(keys) // 4)):
            await self._direct_write(ns, name, delete=self.rng.random() < 0.4)
        # Push the watch cache window past the informers' resourceVersion, then compact history.
        for i in range(120):
            ns, name = keys[i % len(keys)]
            if self.expected.get(f"{ns}/{name}") is not None:
                await self._direct_annotate(ns, name, i)
        storage = self.server.storage
        await storage.compact(await storage.current_revision())
        self.faults.counts["compactions"] += 1
        self.say("fault: server history compacted; cutting connections -> informers must relist (410)")
        self._drop("forced relist")
        self.proxy.resume()

    async def _direct_write(self, ns: str, name: str, *, delete: bool) -> None:
        """Writes the stalled informers cannot see until they relist."""
        if delete:
            await self._delete_foo(ns, name)
        else:
            await self._scale(ns, name, self.rng.randint(1, 5))

    async def _direct_annotate(self, ns: str, name: str, i: int) -> None:
        await self.direct.patch(FOOS, name, {"metadata": {"annotations": {"demo/touch": str(i)}}}, namespace=ns)

    # -- verification -----------------------------------------------------------------------------

    async def _converge(self) -> bool:
        self.phase = "converging"
        self.say("workload done; waiting for every Foo to converge")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.args.timeout
        while True:
            problems = await self._check()
            if not problems:
                self.say(f"converged: {sum(v is not None for v in self.expected.values())} Foos match their "
                         f"Deployments, {sum(v is None for v in self.expected.values())} deleted Foos are gone")
                self.phase = "converged"
                return True
            if loop.time() > deadline:
                for p in problems[:20]:
                    self.say(f"NOT CONVERGED: {p}")
                self.phase = "failed"
                return False
            await asyncio.sleep(0.5)

    async def _check(self) -> list[str]:
        """Compare the server's state (read through the API, not the cache) with what was asked for."""
        problems = []
        foos = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
                for o in (await self.direct.list(FOOS)).items}
        deps = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
                for o in (await self.direct.list(DEPLOYMENTS)).items}
        for key, replicas in sorted(self.expected.items()):
            ns, name = key.split("/")
            dep = deps.get(f"{ns}/{name}-deploy")
            if replicas is None:
                if key in foos:
                    problems.append(f"{key} should be deleted")
                if dep is not None:
                    problems.append(f"{key}: its Deployment still exists")
                continue
            foo = foos.get(key)
            if foo is None:
                problems.append(f"{key} is missing")
            elif dep is None:
                problems.append(f"{key}: no Deployment")
            elif (dep.get("spec") or {}).get("replicas") != replicas:
                problems.append(f"{key}: Deployment has {(dep.get('spec') or {}).get('replicas')} replicas, "
                                f"want {replicas}")
            elif ((foo.get("status") or {}).get("availableReplicas")) != replicas:
                problems.append(f"{key}: status.availableReplicas="
                                f"{(foo.get('status') or {}).get('availableReplicas')}, want {replicas}")
        return problems

    async def _wait(self, cond: Any, timeout: float, what: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not cond():
            if loop.time() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            await asyncio.sleep(0.05)

    # -- display ----------------------------------------------------------------------------------

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"kinformer demo — phase: {self.phase}", show_lines=False, expand=False)
        table.add_column("what", style="cyan")
        table.add_column("foos informer / foo controller", justify="right")
        table.add_column("deployments informer / status controller", justify="right")
        rows: dict[str, list[str]] = {}
        for inf in self.informers.values():
            r = inf.stats.reflector
            vals = {
                "cache size": len(inf.indexer),
                "events ADDED": r.added if r else 0,
                "events MODIFIED": r.modified if r else 0,
                "events DELETED": r.deleted if r else 0,
                "watch restarts": r.watch_restarts if r else 0,
                "relists (after 410)": r.relists if r else 0,
            }
            for k, v in vals.items():
                rows.setdefault(k, []).append(str(v))
        for k, v in rows.items():
            table.add_row(k, *v)
        ctrls = {c.name: c for c in getattr(self, "manager", None).controllers} if hasattr(self, "manager") else {}
        foo, dep = ctrls.get("foo"), ctrls.get("deployment-status")
        for kind in ("add", "update", "delete", "resync"):
            table.add_row(f"handler events: {kind}", *(str(c.stats.events[kind]) if c else "-" for c in (foo, dep)))
        for label, attr in (("reconciles", "reconciles"), ("reconcile errors (retried)", "errors"),
                            ("requeues", "requeues")):
            table.add_row(label, *(str(getattr(c.stats, attr)) if c else "-" for c in (foo, dep)))
        table.add_row("queue depth", *(str(len(c.queue)) if c else "-" for c in (foo, dep)))
        faults = ", ".join(f"{k}: {v}" for k, v in sorted(self.faults.counts.items())) or "none yet"
        table.caption = f"faults — {faults}; slow handler saw {self.slow_seen} events"
        return table

    async def _view(self) -> None:
        if self.args.plain or not sys.stdout.isatty():
            while True:
                await asyncio.sleep(5)
                if hasattr(self, "informers"):
                    self._print_plain()
        from rich.console import Group
        from rich.live import Live
        from rich.text import Text

        with Live(refresh_per_second=4, transient=False) as live:
            while True:
                if hasattr(self, "informers"):
                    live.update(Group(self._table(), Text("\n".join(self.log[-8:]))))
                await asyncio.sleep(0.25)

    def _print_plain(self) -> None:
        from rich.console import Console

        Console(width=110).print(self._table())

    def _summary(self, converged: bool, registrations: dict[str, Any]) -> None:
        from rich.console import Console

        console = Console(width=110)
        console.print(self._table())
        if not self.args.plain:
            for line in self.log:
                console.print(line)
        for name, reg in registrations.items():
            console.print(f"{name}: processed {reg.processed}, still pending {reg.pending}")
        verdict = "[bold green]every Foo converged[/]" if converged else "[bold red]some Foos did not converge[/]"
        console.print(verdict)

    async def _keep(self, server: Any, data: Path) -> None:
        from kinformer.server.cli import write_kubeconfig

        path = Path.cwd() / "kinformer-demo.kubeconfig"
        write_kubeconfig(path, server.url, None, None)
        print(f"\nThe server keeps running at {server.url}. Try:\n"
              f"  kubectl --kubeconfig {path} get foos -A\n"
              f"  kubectl --kubeconfig {path} get deployments -A\nCtrl-C to stop.", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()

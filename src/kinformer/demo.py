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

With ``--replicas N`` (and ``--storage etcd://...``) the same workload runs against N API server
replicas sharing the etcd cluster and N manager replicas, each talking to a different server replica
through its own proxy and campaigning for one Lease; mid-run the demo kills the leading manager and
then the server replica the new leader talks to (its proxy fails over to a surviving replica, as a
load balancer would), and the Foos must still converge (see :class:`ReplicatedDemo`).
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
from typing import Any, ClassVar

from kinformer.meta import object_key

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
    parser.add_argument("--plain", action="store_true",
                        help="log lines only, no live view (the figures once, as summary lines at the end)")
    parser.add_argument("--replicas", type=int, default=1,
                        help="API server and manager replicas (default 1); more than 1 needs --storage etcd://...")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    # Reconcile failures are part of the show: they are counted in the live view, not logged.
    logging.getLogger("kinformer.controller.controller").setLevel(logging.CRITICAL)
    replicas = getattr(args, "replicas", 1)
    if replicas < 1:
        print("kinformer demo: --replicas must be >= 1", file=sys.stderr)
        return 2
    if replicas > 1 and not (args.storage or "").startswith("etcd://"):
        print("kinformer demo: --replicas > 1 needs shared storage: --storage etcd://HOST:PORT[,HOST:PORT...]",
              file=sys.stderr)
        return 2
    try:
        return asyncio.run((ReplicatedDemo(args) if replicas > 1 else Demo(args)).run())
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
        dep = self.deployments.indexer.get_by_key(object_key(request.namespace, name))
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
        self.proxy: Any = None  # the fault proxy (a ProxyGroup of them when replicated)
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
        await self.direct.create("apiextensions.k8s.io/v1/customresourcedefinitions", FOO_CRD)
        for ns in NAMESPACES:
            await self.direct.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await self._wait_served(self.client)
        self.say("installed CRD foos.samplecontroller.k8s.io and namespaces " + ", ".join(NAMESPACES))

    @staticmethod
    async def _wait_served(client: Any) -> None:
        """Wait (bounded) until the server ``client`` talks to serves the Foo resource."""
        from kinformer.client.discovery import ResourceNotFound
        from kinformer.errors import NotFound

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while True:
            try:
                client.invalidate_discovery()
                await client.resolve(FOOS)
                return
            except (NotFound, ResourceNotFound):
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.05)

    async def _manager(self) -> tuple[Any, dict[str, Any]]:
        mgr, registrations, self.informers = self._build_manager(self.client)
        return mgr, registrations

    def _build_manager(self, client: Any, leader_election: Any = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """A Manager running both controllers through ``client``: (manager, handler registrations, informers)."""
        from kinformer.controller import Manager

        mgr = Manager(client, resync=10.0, cache_sync_timeout=30.0, graceful_shutdown_timeout=5.0,
                      leader_election=leader_election)
        foos, deployments = mgr.informer(FOOS), mgr.informer(DEPLOYMENTS)
        mgr.controller(FooReconciler(client, foos, deployments, self.faults), name="foo") \
            .for_(FOOS).owns(DEPLOYMENTS).workers(2)
        mgr.controller(DeploymentStatusReconciler(client, deployments), name="deployment-status") \
            .for_(DEPLOYMENTS).workers(2)

        async def slow(*_: Any) -> None:
            self.slow_seen += 1
            await asyncio.sleep(0.2)

        async def slow_update(old: Any, new: Any) -> None:
            await slow()

        registrations = {"slow handler": foos.add_event_handler(on_add=slow, on_update=slow_update, on_delete=slow)}
        return mgr, registrations, {"foos": foos, "deployments": deployments}

    # -- workload ---------------------------------------------------------------------------------

    async def _pause(self, fraction: float) -> None:
        await asyncio.sleep(self.args.duration * fraction)

    async def _workload(self) -> None:
        n = self.args.foos
        keys = [(NAMESPACES[i % len(NAMESPACES)], f"foo-{i:02d}") for i in range(n)]
        for ns, name in keys[::4]:
            self.faults.fail_first[object_key(ns, name)] = 2
        self.phase = "create"
        for i, (ns, name) in enumerate(keys):
            replicas = self.rng.randint(1, 3)
            await self._create_foo(ns, name, replicas)
            if i == n // 2:
                self._drop("mid-create")
            await self._pause(0.1 / n)
        await self._pause(0.15)
        await self._on_phase("created")

        self.phase = "scale"
        for round_ in range(3):
            for ns, name in self.rng.sample(keys, k=max(1, n // 3)):
                await self._scale(ns, name, self.rng.randint(1, 5))
            self._drop(f"scale round {round_ + 1}")
            await self._pause(0.1)
            await self._on_phase(f"scaled {round_ + 1}")

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

    async def _on_phase(self, phase: str) -> None:
        """Called as the workload passes ``phase`` ("created", "scaled 1".."scaled 3"); replicated runs kill here."""

    async def _create_foo(self, ns: str, name: str, replicas: int) -> None:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Foo", "metadata": {"name": name, "namespace": ns},
                "spec": {"deploymentName": f"{name}-deploy", "replicas": replicas}}
        await self.direct.create(FOOS, body, namespace=ns)
        self.expected[object_key(ns, name)] = replicas

    async def _scale(self, ns: str, name: str, replicas: int) -> None:
        if self.expected.get(object_key(ns, name)) is None:
            return
        await self.direct.patch(FOOS, name, {"spec": {"replicas": replicas}}, namespace=ns)
        self.expected[object_key(ns, name)] = replicas

    async def _delete_foo(self, ns: str, name: str) -> None:
        await self.direct.delete(FOOS, name, namespace=ns)
        self.expected[object_key(ns, name)] = None

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
            if self.expected.get(object_key(ns, name)) is not None:
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

    #: (column heading, informer (its key in ``self.informers``), controller) of the two columns of figures
    COLUMNS = (("foos informer / foo controller (watches foos and its deployments)", "foos", "foo"),
               ("deployments informer / status controller", "deployments", "deployment-status"))

    def _figures(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """The rows of the live view and of the summary (one source, so the two always agree): each
        informer's cache and watch figures, then each controller's (its events come from every informer it
        watches, so the foo controller counts deployment events too). A row is (label, [(whose, value)])."""
        manager = getattr(self, "manager", None)
        ctrls = {c.name: c for c in manager.controllers} if manager is not None else {}
        informers = getattr(self, "informers", {})
        rows: list[tuple[str, list[tuple[str, str]]]] = []

        def row(label: str, value: Any, *, of_informer: bool = True) -> None:
            rows.append((label, [(informer if of_informer else controller, value(heading, informer, controller))
                                 for heading, informer, controller in self.COLUMNS]))

        def of_reflector(attr: str) -> Any:
            def get(_: str, resource: str, __: str) -> str:
                inf = informers.get(resource)
                r = inf.stats.reflector if inf is not None else None
                return str(getattr(r, attr)) if r is not None else "-"
            return get

        row("cache size", lambda _, res, __: str(len(informers[res].indexer)) if res in informers else "-")
        for label, attr in (("watch events ADDED", "added"), ("watch events MODIFIED", "modified"),
                            ("watch events DELETED", "deleted"), ("watch restarts", "watch_restarts"),
                            ("relists (after 410)", "relists")):
            row(label, of_reflector(attr))

        def of_controller(value: Any) -> Any:
            def get(_: str, __: str, name: str) -> str:
                c = ctrls.get(name)
                return str(value(c)) if c is not None else "-"
            return get

        for kind in ("add", "update", "delete", "resync"):
            row(f"controller events: {kind}", of_controller(lambda c, kind=kind: c.stats.events[kind]),
                of_informer=False)
        row("reconciles", of_controller(lambda c: c.stats.reconciles), of_informer=False)
        row("reconcile errors (retried)", of_controller(lambda c: c.stats.errors), of_informer=False)
        row("requeues", of_controller(lambda c: c.stats.requeues), of_informer=False)
        row("queue depth", of_controller(lambda c: len(c.queue)), of_informer=False)
        return rows

    def _faults_line(self) -> str:
        faults = ", ".join(f"{k}: {v}" for k, v in sorted(self.faults.counts.items())) or "none yet"
        injected = self.faults.counts["reconcile failures"]
        return (f"faults — {faults} (injected reconcile failures are among the reconcile errors: "
                f"{injected} of them); slow handler saw {self.slow_seen} events")

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"kinformer demo — phase: {self.phase}", show_lines=False, expand=False)
        table.add_column("what", style="cyan")
        for heading, *_ in self.COLUMNS:
            table.add_column(heading, justify="right")
        for label, values in self._figures():
            table.add_row(label, *(value for _, value in values))
        table.caption = self._faults_line()
        return table

    async def _view(self) -> None:
        if self.args.plain:
            return  # --plain: the log lines only (say() prints them); figures once, in the summary
        if not sys.stdout.isatty():
            while True:
                await asyncio.sleep(5)
                if hasattr(self, "informers"):
                    self._print_table()
        from rich.console import Group
        from rich.live import Live
        from rich.text import Text

        with Live(refresh_per_second=4, transient=False) as live:
            while True:
                if hasattr(self, "informers"):
                    live.update(Group(self._table(), Text("\n".join(self.log[-8:]))))
                await asyncio.sleep(0.25)

    def _print_table(self) -> None:
        from rich.console import Console

        Console(width=110).print(self._table())

    def _summary(self, converged: bool, registrations: dict[str, Any]) -> None:
        verdict = "every Foo converged" if converged else "some Foos did not converge"
        handlers = [f"{name}: processed {reg.processed}, still pending {reg.pending}"
                    for name, reg in registrations.items()]
        hint = ("To look at it with kubectl: `kinformer demo --keep` leaves the server running and writes "
                "./kinformer-demo.kubeconfig (then: kubectl --kubeconfig kinformer-demo.kubeconfig get foos -A).")
        if self.args.plain:
            self.phase = "summary"
            for label, values in self._figures():
                self.say(f"summary: {label}: {', '.join(f'{whose} {value}' for whose, value in values)}")
            for line in (self._faults_line(), *handlers, verdict, *([] if self.args.keep else [hint])):
                self.say(f"summary: {line}")
            return
        from rich.console import Console

        console = Console(width=110)
        console.print(self._table())
        for line in self.log:
            console.print(line)
        for line in handlers:
            console.print(line)
        console.print(f"[bold green]{verdict}[/]" if converged else f"[bold red]{verdict}[/]")
        if not self.args.keep:
            console.print(hint)

    async def _keep(self, server: Any, data: Path) -> None:
        from kinformer.server.cli import write_kubeconfig

        path = Path.cwd() / "kinformer-demo.kubeconfig"
        write_kubeconfig(path, server.url, None, None)
        print(f"\nThe server keeps running at {server.url}. Try:\n"
              f"  kubectl --kubeconfig {path} get foos -A\n"
              f"  kubectl --kubeconfig {path} get deployments -A\nCtrl-C to stop.", flush=True)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()


# -- replicated: several API servers over etcd, several managers with leader election ------------------


class ProxyGroup:
    """The fault proxies of every manager replica, driven as one (the workload's faults hit them all)."""

    def __init__(self, proxies: list[Any]) -> None:
        self.proxies = proxies

    def drop_connections(self) -> int:
        return sum(p.drop_connections() for p in self.proxies)

    def stall(self) -> None:
        for p in self.proxies:
            p.stall()

    def resume(self) -> None:
        for p in self.proxies:
            p.resume()


def _retarget(proxy: Any, url: str) -> None:
    """Point ``proxy`` at the server at ``url`` (what a load balancer does when a backend dies)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    proxy.target = (parts.hostname or "127.0.0.1", parts.port or 80)
    proxy.drop_connections()


def run_prefix_url(storage: str, run_id: str) -> str:
    """``storage`` with a key prefix of its own for this run: ``etcd://h:p[/p]`` -> ``etcd://h:p[/p]/<run_id>``."""
    return f"{storage.rstrip('/')}/{run_id}"


class ReplicatedDemo(Demo):
    """The demo on ``--replicas`` API servers sharing one etcd and as many manager replicas.

    Each run stores its objects under an etcd key prefix of its own (removed at the end unless
    ``--keep``). Manager ``i`` talks to server ``i`` through proxy ``i``; the managers campaign for the
    Lease ``default/kinformer-demo`` (3 s lease, 2 s renew deadline) and only the leader reconciles. A
    killed manager does not release its Lease (a crash), so a standby takes over once it expires.
    The workload and the checks go through their own proxy to the last server replica.
    """

    LEASE: ClassVar[dict[str, Any]] = dict(lease_name="kinformer-demo", lease_namespace="default", lease_duration=3.0,
                                           renew_deadline=2.0, retry_period=0.5, release_on_cancel=False)

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.n = args.replicas
        self.servers: list[Any] = []
        self.alive: list[bool] = []
        self.proxies: list[Any] = []
        self.clients: list[Any] = []
        self.managers: list[Any] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.leaders: list[int] = []
        self.killed: set[int] = set()
        self.stopping = False
        self.storage_url = ""
        self._replica_state: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}

    async def run(self) -> int:
        import uuid

        from kinformer.server import APIServer

        url = self.storage_url = run_prefix_url(self.args.storage, f"kinformer-demo-{uuid.uuid4().hex[:8]}")
        self.say(f"etcd storage {url} shared by {self.n} API server replicas")
        stack = contextlib.AsyncExitStack()
        async with stack:
            for _ in range(self.n):
                server = await stack.enter_async_context(APIServer(storage=url, watch_cache_size=100))
                self.servers.append(server)
                self.alive.append(True)
            try:
                return await self._run_replicated(stack)
            finally:
                if not self.args.keep:
                    await self._remove_keys()

    async def _run_replicated(self, stack: contextlib.AsyncExitStack) -> int:
        from kinformer.client import Client
        from kinformer.testing import FaultProxy

        for server in self.servers:
            self.say(f"API server replica at {server.url}")
        direct_proxy = await stack.enter_async_context(FaultProxy.for_url(self.servers[-1].url))
        self.direct_proxy = direct_proxy
        self.direct = await stack.enter_async_context(Client(direct_proxy.url))
        for server in self.servers:
            proxy = await stack.enter_async_context(FaultProxy.for_url(server.url))
            self.proxies.append(proxy)
            self.clients.append(await stack.enter_async_context(Client(proxy.url)))
        self.proxy = ProxyGroup(self.proxies)
        self.client = self.clients[0]
        self.server = self.servers[-1]
        await self._install_crd()
        self.managers = [None] * self.n
        self.tasks = [asyncio.create_task(self._replica(i), name=f"demo-manager-{i}") for i in range(self.n)]
        view = asyncio.create_task(self._view())
        try:
            await self._wait(lambda: bool(self.leaders) and self.manager.ready(), 30, "a leader with synced caches")
            await self._workload()
            converged = await self._converge()
        finally:
            self.stopping = True
            for mgr in self.managers:
                if mgr is not None:
                    mgr.stop()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            view.cancel()
            await asyncio.gather(view, return_exceptions=True)
        self.say("leaders in turn: " + " -> ".join(f"manager-{i}" for i in self.leaders))
        self._summary(converged, self.registrations)
        if self.args.keep:
            await self._keep(self.server, Path("."))
        return 0 if converged else 1

    async def _install_crd(self) -> None:
        await super()._install_crd()
        for client in self.clients[1:]:  # every replica serves the CRD once its watch cache has it
            await self._wait_served(client)

    # -- manager replicas -------------------------------------------------------------------------

    async def _replica(self, i: int) -> None:
        """Run manager ``i``; one that loses its Lease is rebuilt as a standby (a restarted process)."""
        from kinformer.controller.leaderelection import LeaderElectionConfig
        from kinformer.controller.manager import LeaderElectionLost

        while not self.stopping:
            started = self._started_leading(i)
            cfg = LeaderElectionConfig(identity=f"manager-{i}", on_started_leading=started, **self.LEASE)
            mgr, registrations, informers = self._build_manager(self.clients[i], leader_election=cfg)
            self.managers[i] = mgr
            self._replica_state[i] = (registrations, informers)
            try:
                await mgr.run()
                return
            except LeaderElectionLost:
                self.say(f"manager-{i} lost the Lease; restarting it as a standby")

    def _started_leading(self, i: int) -> Any:
        async def started() -> None:
            self.registrations, self.informers = self._replica_state[i]
            self.manager = self.managers[i]
            self.leaders.append(i)
            self.say(f"manager-{i} is the leader (talks to API server replica {self._server_of(i)})")

        return started

    def _server_of(self, i: int) -> int:
        target = self.proxies[i].target
        return next(j for j, s in enumerate(self.servers) if s.port == target[1])

    def _leader(self) -> int | None:
        for i, mgr in enumerate(self.managers):
            if i not in self.killed and mgr is not None and mgr.elector is not None and mgr.elector.leading.is_set():
                return i
        return None

    # -- the kills --------------------------------------------------------------------------------

    async def _on_phase(self, phase: str) -> None:
        if phase == "created":
            await self._kill_leader()
        elif phase == "scaled 2":
            await self._kill_server()

    async def _kill_leader(self) -> None:
        leader = self._leader()
        if leader is None:
            return
        self.killed.add(leader)
        self.tasks[leader].cancel()  # a crash: the Lease is not released
        self.proxies[leader].drop_connections()
        self.faults.counts["manager killed"] += 1
        self.say(f"fault: killed the leading manager-{leader}; a standby takes over when its Lease expires")

    async def _kill_server(self) -> None:
        with contextlib.suppress(TimeoutError):  # let the standby take over first, so the kill hits the leader
            await self._wait(lambda: self._leader() is not None, 3 * self.LEASE["lease_duration"], "a new leader")
        leader = self._leader()
        victim = self._server_of(leader) if leader is not None else 0
        survivors = [j for j in range(self.n) if self.alive[j] and j != victim]
        if not survivors:
            return
        self.alive[victim] = False
        dead_port = self.servers[victim].port
        await self.servers[victim].stop()
        to = self.servers[survivors[0]]
        for proxy in [*self.proxies, self.direct_proxy]:
            if proxy.target[1] == dead_port:
                _retarget(proxy, to.url)
        if self.server is self.servers[victim]:
            self.server = to
        self.faults.counts["API server killed"] += 1
        self.say(f"fault: killed API server replica {victim}; its clients fail over to replica {survivors[0]}")

    async def _remove_keys(self) -> None:
        """Delete this run's keys from etcd (best effort)."""
        from kinformer.server.storage import open_storage

        store = open_storage(self.storage_url)
        with contextlib.suppress(Exception):
            await store.start()
            for kv in (await store.list("/")).kvs:
                with contextlib.suppress(Exception):
                    await store.delete(kv.key)
        with contextlib.suppress(Exception):
            await store.close()

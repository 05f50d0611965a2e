"""One run of the demo: server, fault proxy, manager, workload with faults, live view, verification."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kinformer.demo.sample_controller import (
    DEPLOYMENTS,
    FOO_CRD,
    FOOS,
    GROUP,
    NAMESPACES,
    VERSION,
    DeploymentStatusReconciler,
    Faults,
    FooReconciler,
)
from kinformer.meta import object_key


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
        self.registrations: dict[str, Any] = {}  # the handlers whose figures are shown, by name
        self.handlers_at_end: list[str] | None = None  # their figures once they went idle at the end
        self.started = time.monotonic()
        # Live tables only on a terminal; piped or redirected, the log lines and a plain summary.
        self.plain = args.plain or not sys.stdout.isatty()

    def say(self, line: str) -> None:
        stamp = f"{time.monotonic() - self.started:5.1f}s"
        self.log.append(f"{stamp}  {line}")
        if self.plain:
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
            manager = self.manager = await self._manager()
            run = asyncio.create_task(manager.run())
            view = asyncio.create_task(self._view())
            try:
                await self._wait(lambda: manager.ready(), 30, "caches to sync")
                await self._workload()
                converged = await self._converge()
                await self._settle_handlers()
            finally:
                manager.stop()
                await asyncio.gather(run, return_exceptions=True)
                view.cancel()
                await asyncio.gather(view, return_exceptions=True)
            self._summary(converged)
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

    async def _manager(self) -> Any:
        mgr, self.registrations, self.informers = self._build_manager(self.client)
        return mgr

    def _build_manager(self, client: Any, leader_election: Any = None, *, sharding: Any = None,
                       lease_client: Any = None, wrap: Any = None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        """A Manager running both controllers through ``client``: (manager, handler registrations, informers).

        With ``lease_client`` the Manager's own requests (its Leases) go through that client while the
        informers and the reconcilers keep ``client``; ``wrap(controller name, reconciler)`` may wrap each
        reconciler (the sharded demo's overlap detector)."""
        from kinformer.cache import SharedInformerFactory
        from kinformer.controller import Manager

        options: dict[str, Any] = dict(resync=10.0) if lease_client is None else dict(
            factory=SharedInformerFactory(client, resync=10.0))
        mgr = Manager(lease_client or client, cache_sync_timeout=30.0, graceful_shutdown_timeout=5.0,
                      leader_election=leader_election, sharding=sharding, **options)
        wrap = wrap or (lambda _name, reconciler: reconciler)
        foos, deployments = mgr.informer(FOOS), mgr.informer(DEPLOYMENTS)
        mgr.controller(wrap("foo", FooReconciler(client, foos, deployments, self.faults)), name="foo") \
            .for_(FOOS).owns(DEPLOYMENTS).workers(2)
        mgr.controller(wrap("deployment-status", DeploymentStatusReconciler(client, deployments)),
                       name="deployment-status").for_(DEPLOYMENTS).workers(2)

        async def slow(*_: Any) -> None:
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
        """Compare the server's state (read through the API, not the cache) with what was asked for, and the
        informers' caches with the server (the summary reports the caches: they must have caught up)."""
        problems = []
        foos = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
                for o in (await self.direct.list(FOOS)).items}
        deps = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o
                for o in (await self.direct.list(DEPLOYMENTS)).items}
        for resource, on_server in (("foos", foos), ("deployments", deps)):
            informer = getattr(self, "informers", {}).get(resource)
            if informer is not None and set(informer.indexer.list_keys()) != set(on_server):
                problems.append(f"the {resource} informer's cache holds {len(informer.indexer)} objects, "
                                f"the server {len(on_server)}")
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

    async def _settle_handlers(self, timeout: float = 10.0) -> None:
        """Wait (at most ``timeout`` s) until no shown handler has a notification queued or in progress, and
        keep their figures of that moment: stopping the managers then interrupts none of their calls, so the
        summary's counts add up (a call cut short by the stop is neither processed nor pending)."""
        with contextlib.suppress(TimeoutError):  # still busy: the figures say how much was pending
            await self._wait(lambda: not any(reg.pending for reg in self.registrations.values()), timeout,
                             "the event handlers to go idle")
        self.handlers_at_end = self._handler_lines()

    def _handler_lines(self) -> list[str]:
        """The shown handlers' figures (once settled at the end, those of that moment)."""
        if self.handlers_at_end is not None:
            return self.handlers_at_end
        return [f"{name}: processed {reg.processed} events, still pending {reg.pending}"
                for name, reg in self.registrations.items()]

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
        ctrls: dict[str, list[Any]] = {}
        for manager in self._managers():
            for c in manager.controllers:
                ctrls.setdefault(c.name, []).append(c)
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
                cs = ctrls.get(name)
                return str(sum(value(c) for c in cs)) if cs else "-"
            return get

        for kind in ("add", "update", "delete", "resync"):
            row(f"controller events: {kind}", of_controller(lambda c, kind=kind: c.stats.events[kind]),
                of_informer=False)
        row("reconciles", of_controller(lambda c: c.stats.reconciles), of_informer=False)
        row("reconcile errors (retried)", of_controller(lambda c: c.stats.errors), of_informer=False)
        row("requeues", of_controller(lambda c: c.stats.requeues), of_informer=False)
        row("queue depth", of_controller(lambda c: len(c.queue)), of_informer=False)
        return rows

    def _managers(self) -> list[Any]:
        """The managers whose controllers' figures are shown (summed): the one running them."""
        manager = getattr(self, "manager", None)
        return [manager] if manager is not None else []

    def _faults_line(self) -> str:
        faults = ", ".join(f"{k}: {v}" for k, v in sorted(self.faults.counts.items())) or "none yet"
        injected = self.faults.counts["reconcile failures"]
        return (f"faults — {faults} (injected reconcile failures are among the reconcile errors: "
                f"{injected} of them)")

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(title=f"kinformer demo — phase: {self.phase}", show_lines=False, expand=False)
        table.add_column("what", style="cyan")
        for heading, *_ in self.COLUMNS:
            table.add_column(heading, justify="right")
        for label, values in self._figures():
            table.add_row(label, *(value for _, value in values))
        table.caption = "\n".join([self._faults_line(), *self._handler_lines()])
        return table

    async def _view(self) -> None:
        if self.plain:
            return  # the log lines only (say() prints them); figures once, in the summary
        from rich.console import Group
        from rich.live import Live
        from rich.text import Text

        with Live(refresh_per_second=4, transient=False) as live:
            while True:
                if hasattr(self, "informers"):
                    live.update(Group(self._table(), Text("\n".join(self.log[-8:]))))
                await asyncio.sleep(0.25)

    def _summary(self, converged: bool) -> None:
        verdict = "every Foo converged" if converged else "some Foos did not converge"
        handlers = self._handler_lines()
        hint = ("To look at it with kubectl: `kinformer demo --keep` leaves the server running and writes "
                "./kinformer-demo.kubeconfig (then: kubectl --kubeconfig kinformer-demo.kubeconfig get foos -A).")
        if self.plain:
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

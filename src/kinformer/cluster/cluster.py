"""``Cluster``: one Manager running kube-controller-manager's controllers and the simulated nodes' kubelets
(:mod:`.nodes`, :mod:`.kubelet`) against an API server's URL, with the nodes' faults (``stop_node``,
``start_node``, ``fail_container``) and logs (``pod_log``).

Invariants:

* The cluster is a client like any other: every read comes from the Manager's shared informers and every
  write goes through the HTTP API, so admission, RBAC and the watch cache see it as they see a user.
* One task owns everything the cluster runs (the Manager and each background loop, in one task group);
  :meth:`Cluster.stop` cancels it and awaits it, and re-raises what made it fail, if anything did.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kinformer.aio import first_completed, task_group
from kinformer.clock import REAL_CLOCK, Clock

from .controllers import CONTROLLERS
from .options import ClusterOptions

if TYPE_CHECKING:
    from kinformer.client import Client
    from kinformer.controller import Manager
    from kinformer.controller.events import EventRecorder
    from kinformer.controller.legacyevents import LegacyEventRecorder

    from .kubelet import Kubelets
    from .nodes import NodeAgents

log = logging.getLogger(__name__)


class ControllerContext:
    """What a controller's ``setup`` receives: the shared Manager (one informer per resource for every
    controller), the admin client, the options and the clock."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.manager: Manager = cluster.manager
        self.client: Client = cluster.client
        self.options: ClusterOptions = cluster.options
        self.clock: Clock = cluster.clock

    def run(self, loop: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """Run ``loop()`` beside the controllers for as long as the cluster runs (it is cancelled at stop)."""
        self.cluster.loops.append((name, loop))

    def recorder(self, component: str, **options: Any) -> LegacyEventRecorder:
        """The core/v1 event recorder kube-controller-manager's controllers use (client-go's ``tools/record``,
        source ``component``, e.g. "deployment-controller"): one Event per distinct message, counts on repeats."""
        return self.manager.event_recorder(component, legacy=True, **options)

    def events_recorder(self, component: str, **options: Any) -> EventRecorder:
        """An events.k8s.io/v1 recorder (client-go's ``tools/events``), as kube-scheduler records."""
        return self.manager.event_recorder(component, **options)


def _setup_function(name: str) -> Callable[[ControllerContext], None]:
    try:
        target = CONTROLLERS[name]
    except KeyError:
        raise ValueError(f"unknown controller {name!r}; known: {', '.join(sorted(CONTROLLERS))}") from None
    module, _, attr = target.partition(":")
    setup: Callable[[ControllerContext], None] = getattr(importlib.import_module(module), attr)
    return setup


def controller_names(controllers: bool | Iterable[str]) -> tuple[str, ...]:
    """``True`` -> every controller, ``False`` -> none, else the names given (each checked)."""
    if controllers is True:
        return tuple(CONTROLLERS)
    if controllers is False:
        return ()
    names = tuple(controllers)
    unknown = sorted(set(names) - set(CONTROLLERS))
    if unknown:
        raise ValueError(f"unknown controllers {', '.join(unknown)}; known: {', '.join(sorted(CONTROLLERS))}")
    return names


class Cluster:
    """kube-controller-manager's ``controllers`` and ``nodes`` simulated kubelets against the server at ``url``."""

    def __init__(self, url: str, *, token: str | None = None, ca: str | None = None,
                 controllers: bool | Iterable[str] = True, nodes: int = 0,
                 options: ClusterOptions | None = None, clock: Clock = REAL_CLOCK) -> None:
        if nodes < 0:
            raise ValueError(f"nodes must be >= 0, got {nodes}")
        self.url, self.token, self.ca = url, token, ca
        self.controller_names = controller_names(controllers)
        self.node_count = nodes
        self.options = options or ClusterOptions()
        self.clock = clock
        self.node_agents: NodeAgents | None = None
        self.kubelets: Kubelets | None = None
        self.loops: list[tuple[str, Callable[[], Coroutine[Any, Any, None]]]] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Register every controller, start the Manager and the loops, and wait until the caches synced."""
        from kinformer.client import Client
        from kinformer.controller import Manager

        self.client = Client(self.url, token=self.token, ca=self.ca, clock=self.clock,
                             max_in_flight=self.options.client_max_in_flight)
        self.manager = Manager(self.client, clock=self.clock, stale_after=None, metrics_secure=False)
        ctx = ControllerContext(self)
        for name in self.controller_names:
            _setup_function(name)(ctx)
        if self.node_count:
            from .kubelet import Kubelets
            from .nodes import NodeAgents

            self.node_agents = NodeAgents(ctx, self.node_count)
            self.kubelets = Kubelets(ctx, self.node_agents)
            await self.node_agents.register_all()
        self._task = asyncio.create_task(self._run(), name="kinformer-cluster")
        await self._wait_synced()

    async def _wait_synced(self) -> None:
        """Wait until the Manager started its informers (it builds the controllers first, which may ask the
        server), then until their caches synced; raises what ended the cluster's task if it ended first."""
        task = self._task
        assert task is not None
        if not self.manager.builders:
            return
        await first_completed(self.manager.informers_started.wait(), asyncio.shield(task))
        if task.done():
            await task  # raises what ended it
        synced = await self.manager.factory.wait_for_cache_sync(timeout=self.manager.cache_sync_timeout)
        if task.done():
            await task  # raises what ended it
        unsynced = sorted(name for name, ok in synced.items() if not ok)
        if unsynced:
            raise TimeoutError(f"the cluster's caches did not sync: {', '.join(unsynced)}")

    async def _run(self) -> None:
        async with task_group() as group:
            if self.manager.builders:
                group.create_task(self.manager.run(), name="kinformer-cluster-manager")
            for name, loop in self.loops:
                group.create_task(loop(), name=f"kinformer-cluster-{name}")

    # -- the simulated nodes (``nodes=N``) and their faults ---------------------------------------------------

    def _nodes(self) -> tuple[NodeAgents, Kubelets]:
        if self.node_agents is None or self.kubelets is None:
            raise RuntimeError("this cluster runs no simulated nodes (nodes=0)")
        return self.node_agents, self.kubelets

    async def stop_node(self, name: str) -> None:
        """Stop node ``name``'s kubelet: no more heartbeats nor Lease renewals; its pods stay as they are. It
        annotates the Node ``kinformer.io/stopped: "true"`` (as ``kubectl annotate`` would) and returns once the
        kubelet saw it."""
        await self._annotate_stopped(name, "true")

    async def start_node(self, name: str) -> None:
        """Start node ``name``'s kubelet again (the annotation removed): heartbeats, renewals and its pods
        resume; returns once the kubelet saw it."""
        await self._annotate_stopped(name, None)

    async def _annotate_stopped(self, name: str, value: str | None) -> None:
        from kinformer.errors import NotFound

        from .nodes import STOPPED_ANNOTATION

        agents = self._nodes()[0]
        agents.get(name)  # KeyError naming the known nodes
        patch = {"metadata": {"annotations": {STOPPED_ANNOTATION: value}}}
        try:
            await self.client.patch("nodes", name, patch, "merge")
        except NotFound:
            if value is not None:
                raise  # no Node to stop: its kubelet runs and registers it again
        await agents.wait_running(name, running=value is None)

    async def fail_container(self, namespace: str, pod: str, container: str, exit_code: int = 1) -> None:
        """Make a running container of a pod on a simulated node exit with ``exit_code`` (it restarts per the
        pod's restartPolicy); KeyError when that pod or container is not running here."""
        self._nodes()[1].fail_container(namespace, pod, container, exit_code)

    def pod_log(self, pod: Mapping[str, Any], container: str, previous: bool = False) -> str | None:
        """The simulated log of ``container`` of ``pod``, or None when no simulated node runs the pod;
        :class:`~kinformer.cluster.kubelet.LogError` as a kubelet refuses (e.g. the container has not started)."""
        if self.node_agents is None or self.kubelets is None:
            return None
        if (pod.get("spec") or {}).get("nodeName") not in self.node_agents.nodes:
            return None
        return self.kubelets.log(pod, container, previous)

    async def stop(self) -> None:
        """Cancel everything the cluster runs, wait for it, and close the client. Idempotent."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        client = getattr(self, "client", None)
        if client is not None:
            await client.close()

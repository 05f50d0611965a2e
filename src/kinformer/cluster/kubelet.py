"""Simulated kubelets: run the pods bound to the cluster's nodes, as a kubelet and its container runtime would.

One reconciler over the shared pod informer serves every simulated node (a pod is handled by the kubelet of
``spec.nodeName``; pods of other nodes are left alone). Kube rules carried over (kubelet's
``generateAPIPodStatus``/``getPhase``, its status manager, kwok's pod stages):

* a pod bound to a running node gets a sandbox (``status.podIP`` from the node's CIDR, ``hostIP``,
  ``startTime``), its init containers complete in order, then its containers start: ``containerStatuses``
  sorted by name with ``state``, ``lastState``, ``started``, ``ready``, ``restartCount``, ``image``
  (normalized as a runtime reports it), ``imageID`` and ``containerID``;
* conditions PodReadyToStartContainers, Initialized, ContainersReady, Ready (False with ContainersNotReady
  and the unready containers named), PodScheduled; lastTransitionTime changes only with the status;
* a container is ready once running for its ``readinessProbe.initialDelaySeconds``;
* a container that exits restarts per ``restartPolicy`` (Always; OnFailure on a non-zero code) after the
  crash-loop back-off (waiting CrashLoopBackOff meanwhile), its last exit in ``lastState.terminated``;
* containers of Never/OnFailure pods exit after ``ClusterOptions.container_run_seconds`` (code 0, reason
  Completed, unless the pod's annotation says otherwise): the phase follows kube's getPhase (Succeeded,
  Failed, Running while restarting); a terminal pod never changes again;
* a pod with ``deletionTimestamp`` is stopped (its containers exit after ``container_stop_seconds`` bounded by
  its deletion grace period, or are killed with 137 at its end), its terminal status written, and it is
  deleted with ``gracePeriodSeconds=0`` and its uid as precondition, as the kubelet does.

Faults (annotations on the pod, and :meth:`Kubelets.fail_container`): ``kinformer.io/unready: "true"`` holds
every container unready; ``kinformer.io/fail-start: "a,b"`` makes those containers exit 1 as they start;
``kinformer.io/exit-code: "N"`` is the code a completing container exits with.

Not simulated: probes other than the readiness delay (liveness, startup), images pulls, volumes, resources,
ephemeral containers, sidecar (restartable init) containers, pod resize, the status report of evicted pods.
Every delay runs on the cluster's clock; each status write is a strategic merge patch of ``pods/status``
carrying only the fields and conditions that changed, as the kubelet's two-way patch does.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kinformer.controller.predicates import Predicate
from kinformer.controller.reconcile import Request, Result
from kinformer.errors import Conflict, NotFound

from .metatime import parse_time, rfc3339
from .nodes import SimulatedNode
from .podutil import is_terminal
from .wakeups import Wakeups

if TYPE_CHECKING:
    from .cluster import ControllerContext
    from .nodes import NodeAgents

log = logging.getLogger(__name__)

UNREADY_ANNOTATION = "kinformer.io/unready"
FAIL_START_ANNOTATION = "kinformer.io/fail-start"
EXIT_CODE_ANNOTATION = "kinformer.io/exit-code"
#: The exit code of a container killed when its grace period ends (SIGKILL).
KILLED_EXIT_CODE = 137


class LogError(ValueError):
    """A log request the kubelet refuses (the API server answers it as 400 Bad Request)."""


def normalize_image(image: str) -> str:
    """The image reference a container runtime reports: a registry and a tag are always named."""
    name, digest = image.partition("@")[::2]
    first = name.split("/", 1)[0]
    if "/" not in name or ("." not in first and ":" not in first and first != "localhost"):
        name = ("docker.io/" if "/" in name else "docker.io/library/") + name
    if not digest and ":" not in name.rsplit("/", 1)[-1]:
        name += ":latest"
    return name + ("@" + digest if digest else "")


@functools.lru_cache(maxsize=1024)  # (a pure function: a pod's status is built again with the same names)
def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Container:
    """One container as the runtime keeps it: the current instance and the last one that exited."""

    name: str
    image: str
    ready_delay: float
    restart_count: int = 0
    state: str = "running"  # running | terminated | waiting (back-off before a restart)
    started: float = 0.0  # clock time of the current instance's start
    started_wall: float = 0.0
    finished_wall: float = 0.0
    exit_code: int = 0
    restart_at: float = 0.0
    last: dict[str, Any] | None = None

    @property
    def container_id(self) -> str:
        return "containerd://" + _sha(f"{self.name}/{self.image}/{self.restart_count}/{self.started_wall}")

    def start(self, now: float, wall: float) -> None:
        self.state, self.started, self.started_wall = "running", now, wall

    def exit(self, code: int, wall: float) -> None:
        self.state, self.exit_code, self.finished_wall = "terminated", code, wall

    def terminated(self) -> dict[str, Any]:
        return {"exitCode": self.exit_code, "reason": "Completed" if self.exit_code == 0 else "Error",
                "startedAt": rfc3339(self.started_wall), "finishedAt": rfc3339(self.finished_wall),
                "containerID": self.container_id}


@dataclass
class PodRuntime:
    """What the runtime knows of one pod's sandbox and containers."""

    uid: str
    node: str
    host: int  # the last byte of the pod's IP in its node's CIDR; 0 once released
    ip: str
    start_wall: float
    init: list[Container]
    containers: dict[str, Container]
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)  # condition -> (status, time)


def _annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    return pod["metadata"].get("annotations") or {}


def _exit_code(pod: Mapping[str, Any]) -> int:
    text = _annotations(pod).get(EXIT_CODE_ANNOTATION, "0")
    try:
        return int(text)
    except ValueError:
        log.warning("pod %s: %s=%r is not an integer; exiting 0", pod["metadata"]["name"], EXIT_CODE_ANNOTATION,
                    text)
        return 0


def _fails_at_start(pod: Mapping[str, Any], name: str) -> bool:
    names = _annotations(pod).get(FAIL_START_ANNOTATION, "")
    return name in {n.strip() for n in names.split(",")}


def _container(spec: Mapping[str, Any]) -> Container:
    probe = spec.get("readinessProbe") or {}
    return Container(str(spec["name"]), normalize_image(str(spec.get("image", ""))),
                     float(probe.get("initialDelaySeconds") or 0))


class OwnPodChanged(Predicate):
    """The pod events a kubelet syncs a pod on (kube's kubelet config source: a pod bound to one of its nodes
    added, changed in spec or metadata, or deleted). A status-only update, such as the kubelet's own status
    write coming back through the watch, is not synced again: the kubelet's own timers move the pod on."""

    def __init__(self, nodes: Mapping[str, SimulatedNode]) -> None:
        self.nodes = nodes

    def ours(self, pod: Mapping[str, Any]) -> bool:
        """Bound to one of the simulated nodes: the ``accepts`` of the kubelets' pods watch (the reconcile of
        any other pod does nothing; a pod deleted from our node still arrives, its last state bound here)."""
        return (pod.get("spec") or {}).get("nodeName") in self.nodes

    @staticmethod
    def _inputs(pod: Mapping[str, Any]) -> tuple[Any, ...]:
        meta = pod["metadata"]
        return (pod.get("spec"), meta.get("uid"), meta.get("labels"), meta.get("annotations"),
                meta.get("deletionTimestamp"), meta.get("deletionGracePeriodSeconds"))

    def create(self, obj: Mapping[str, Any]) -> bool:
        return self.ours(obj)

    def update(self, old: Mapping[str, Any], new: Mapping[str, Any], is_resync: bool = False) -> bool:
        return self.ours(new) and (is_resync or self._inputs(old) != self._inputs(new))


class Kubelets:
    """The pod half of every simulated kubelet: one reconciler over all pods bound to a simulated node."""

    def __init__(self, ctx: ControllerContext, nodes: NodeAgents) -> None:
        self.ctx, self.nodes = ctx, nodes
        self.runtimes: dict[str, PodRuntime] = {}  # pod key -> runtime
        self.used_ips: dict[str, set[int]] = {name: set() for name in nodes.nodes}
        self.requeue = Wakeups()  # pods of a node started again, a container failed on demand
        nodes.on_started.append(self.wake_node)
        self.pods = ctx.manager.informer("pods")
        own = OwnPodChanged(nodes.nodes)
        ctx.manager.controller(self.reconcile, name="kubelet").for_("pods", own, accepts=own.ours) \
            .source(self.requeue) \
            .workers(ctx.options.workers)

    # -- faults and queries ----------------------------------------------------------------------------------

    def wake_node(self, name: str) -> None:
        """Reconcile every pod of node ``name`` (it was started again)."""
        for pod in self.pods.lister().list():
            if pod["spec"].get("nodeName") == name:
                self.requeue.add(pod["metadata"]["namespace"], pod["metadata"]["name"])

    def fail_container(self, namespace: str, pod: str, container: str, exit_code: int = 1) -> None:
        """Make the running ``container`` of ``pod`` exit with ``exit_code`` now; KeyError if it is not running
        on a simulated node."""
        runtime = self.runtimes.get(f"{namespace}/{pod}")
        if runtime is None:
            raise KeyError(f"pod {namespace}/{pod} is not running on a simulated node")
        target = runtime.containers.get(container)
        if target is None:
            raise KeyError(f"pod {namespace}/{pod} has no container {container!r}; it has "
                           f"{', '.join(runtime.containers)}")
        if target.state == "running":
            target.exit(exit_code, self.ctx.clock.wall())
        self.requeue.add(namespace, pod)

    def log(self, pod: Mapping[str, Any], container: str, previous: bool) -> str:
        """The simulated log of ``container`` (already checked to belong to ``pod``); LogError as a kubelet
        refuses."""
        meta = pod["metadata"]
        name, namespace = meta["name"], meta.get("namespace", "")
        runtime = self.runtimes.get(f"{namespace}/{name}")
        every = [*(runtime.init if runtime else ()), *(runtime.containers.values() if runtime else ())]
        found = next((c for c in every if c.name == container), None)
        if found is None:
            raise LogError(f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating')
        restart = found.restart_count
        if previous:
            if found.last is None:
                raise LogError(f'previous terminated container "{container}" in pod "{name}" not found')
            restart -= 1
        node = pod["spec"].get("nodeName", "")
        lines = [f"kinformer: container {container} of pod {namespace}/{name} started on node {node}",
                 f"kinformer: image {found.image}, restart {restart}"]
        if previous or found.state != "running":
            code = found.last["exitCode"] if previous and found.last else found.exit_code
            lines.append(f"kinformer: container {container} exited with code {code}")
        return "".join(line + "\n" for line in lines)

    # -- the reconcile ----------------------------------------------------------------------------------------

    def _node_of(self, pod: Mapping[str, Any]) -> SimulatedNode | None:
        return self.nodes.nodes.get(pod["spec"].get("nodeName") or "")

    async def reconcile(self, request: Request) -> Result | None:
        key = request.key
        try:
            pod = self.pods.lister().get(request.name, request.namespace)
        except NotFound:
            self._forget(key)
            return None
        node = self._node_of(pod)
        if node is None or not node.running.is_set():
            return None
        runtime = self.runtimes.get(key)
        if runtime is not None and runtime.uid != pod["metadata"]["uid"]:
            self._forget(key)  # a new pod of the same name
            runtime = None
        if pod["metadata"].get("deletionTimestamp"):
            return await self._stop(pod, runtime)
        if is_terminal(pod):
            return None  # a terminal pod never changes again
        if runtime is None:
            runtime = self.runtimes[key] = self._sandbox(pod, node)
        wake = self._advance(pod, runtime)
        await self._write_status(pod, runtime)
        if wake is None:
            return None
        delay = wake - self.ctx.clock.now()
        if delay <= 0:  # this step reported (a restart, an exit at start): move on once the cache shows it
            self.requeue.add(request.namespace or "", request.name)
            return None
        return Result(requeue_after=delay)

    def _forget(self, key: str) -> None:
        runtime = self.runtimes.pop(key, None)
        if runtime is not None:
            self._release_ip(runtime)

    def _release_ip(self, runtime: PodRuntime) -> None:
        if runtime.host:
            self.used_ips[runtime.node].discard(runtime.host)
            runtime.host = 0

    def _sandbox(self, pod: Mapping[str, Any], node: SimulatedNode) -> PodRuntime:
        """Create the pod's sandbox: an IP from the node's CIDR (.2-.254), its init containers run to completion
        and its containers started."""
        used = self.used_ips[node.name]
        host = next((h for h in range(2, 255) if h not in used), None)
        if host is None:
            raise RuntimeError(f"node {node.name} has no pod IP left in {node.pod_cidr}")
        used.add(host)
        spec = pod["spec"]
        now, wall = self.ctx.clock.now(), self.ctx.clock.wall()
        init = [_container(c) for c in spec.get("initContainers") or ()]
        for c in init:
            c.start(now, wall)
            c.exit(0, wall)
        containers = {c.name: c for c in map(_container, spec.get("containers") or ())}
        for c in containers.values():
            self._start(pod, c, now, wall)
        return PodRuntime(pod["metadata"]["uid"], node.name, host, node.pod_ip(host), wall, init, containers)

    def _start(self, pod: Mapping[str, Any], c: Container, now: float, wall: float) -> None:
        c.start(now, wall)
        if _fails_at_start(pod, c.name):
            c.exit(1, wall)

    def _advance(self, pod: Mapping[str, Any], runtime: PodRuntime) -> float | None:
        """Move every container on to now (completion, restarts); returns the clock time of the next change."""
        policy = pod["spec"].get("restartPolicy") or "Always"
        clock, opts = self.ctx.clock, self.ctx.options
        now, wall = clock.now(), clock.wall()
        wakes: list[float] = []
        for c in runtime.containers.values():
            if c.state == "running" and policy != "Always":
                end = c.started + opts.container_run_seconds
                if now >= end:
                    c.exit(_exit_code(pod), wall)
                else:
                    wakes.append(end)
            if c.state == "terminated" and (policy == "Always" or (policy == "OnFailure" and c.exit_code != 0)):
                c.last = c.terminated()
                c.state = "waiting"
                c.restart_at = now + min(opts.restart_backoff * 2 ** c.restart_count, opts.restart_backoff_max)
            if c.state == "waiting":
                if now >= c.restart_at:
                    c.restart_count += 1
                    self._start(pod, c, now, wall)
                    wakes.append(now)  # report the start, then move on from there
                else:
                    wakes.append(c.restart_at)
            if c.state == "running" and now < c.started + c.ready_delay:
                wakes.append(c.started + c.ready_delay)
        return min(wakes) if wakes else None

    async def _stop(self, pod: Mapping[str, Any], runtime: PodRuntime | None) -> Result | None:
        """Stop a pod being deleted and delete it once its containers have exited (bounded by its grace); a pod
        this kubelet never started is deleted at once."""
        clock, meta = self.ctx.clock, pod["metadata"]
        if runtime is not None:
            grace = float(meta.get("deletionGracePeriodSeconds") or 0)
            # the grace runs from the delete request (deletionTimestamp - grace), on the clock's wall time
            stop_seconds = min(grace, self.ctx.options.container_stop_seconds)
            stop_wall = parse_time(meta["deletionTimestamp"]) - grace + stop_seconds
            if clock.wall() < stop_wall:
                return Result(requeue_after=stop_wall - clock.wall())
            killed = self.ctx.options.container_stop_seconds > grace
            for c in runtime.containers.values():
                if c.state != "terminated":
                    c.exit(KILLED_EXIT_CODE if killed else 0, clock.wall())
            if not is_terminal(pod):
                await self._write_status(pod, runtime)
        try:
            await self.ctx.client.delete("pods", meta["name"], meta.get("namespace"), grace_period_seconds=0,
                                         preconditions={"uid": meta["uid"]})
        except (NotFound, Conflict):
            pass  # already gone, or a new pod of that name
        return None

    # -- the status ---------------------------------------------------------------------------------------------

    async def _write_status(self, pod: Mapping[str, Any], runtime: PodRuntime) -> None:
        """Patch ``pods/status`` with what the runtime says, when the pod says otherwise; a pod whose containers
        all ended gives its IP back once that is written."""
        status = self._status(pod, runtime)
        current = pod.get("status") or {}
        if status["phase"] in ("Succeeded", "Failed"):
            self._release_ip(runtime)  # its sandbox is gone; its status keeps the IP, as kube's does
        changed = _status_patch(current, status)
        if not changed:
            return
        meta = pod["metadata"]
        try:
            await self.ctx.client.patch_status("pods", meta["name"], {"metadata": {"uid": meta["uid"]},
                                                                      "status": changed},
                                               "strategic", meta.get("namespace"))
        except (NotFound, Conflict):
            pass  # deleted (or replaced) meanwhile: that event reconciles it

    def _status(self, pod: Mapping[str, Any], runtime: PodRuntime) -> dict[str, Any]:
        node = self._node_of(pod)
        assert node is not None
        now = self.ctx.clock.now()
        held = _annotations(pod).get(UNREADY_ANNOTATION) == "true"
        ready = {name: not held and c.state == "running" and now >= c.started + c.ready_delay
                 for name, c in runtime.containers.items()}
        statuses = [self._container_status(c, ready[c.name])
                    for c in sorted(runtime.containers.values(), key=lambda c: c.name)]
        phase = _phase(pod["spec"].get("restartPolicy") or "Always", list(runtime.containers.values()))
        unready = [name for name, ok in ready.items() if not ok]  # in spec order, as kube names them
        status: dict[str, Any] = {
            "phase": phase, "hostIP": node.internal_ip, "hostIPs": [{"ip": node.internal_ip}],
            "podIP": runtime.ip, "podIPs": [{"ip": runtime.ip}], "startTime": rfc3339(runtime.start_wall),
            "containerStatuses": statuses,
            "conditions": self._conditions(pod, runtime, phase, unready),
        }
        if runtime.init:
            status["initContainerStatuses"] = [self._container_status(c, False) for c in runtime.init]
        return status

    @staticmethod
    def _container_status(c: Container, ready: bool) -> dict[str, Any]:
        if c.state == "running":
            state: dict[str, Any] = {"running": {"startedAt": rfc3339(c.started_wall)}}
        elif c.state == "terminated":
            state = {"terminated": c.terminated()}
        else:
            state = {"waiting": {"reason": "CrashLoopBackOff",
                                 "message": f"back-off restarting failed container={c.name}"}}
        return {"name": c.name, "state": state, "lastState": {"terminated": c.last} if c.last else {},
                "ready": ready, "restartCount": c.restart_count, "image": c.image,
                "imageID": c.image.partition("@")[0].rpartition(":")[0] + "@sha256:" + _sha(c.image),
                "containerID": c.container_id, "started": c.state == "running"}

    def _conditions(self, pod: Mapping[str, Any], runtime: PodRuntime, phase: str,
                    unready: list[str]) -> list[dict[str, Any]]:
        terminal, succeeded = phase in ("Succeeded", "Failed"), phase == "Succeeded"
        ready: tuple[str, str, str] = ("True", "", "")
        if succeeded:
            ready = ("False", "PodCompleted", "")
        elif unready:
            ready = ("False", "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        wanted = [("PodReadyToStartContainers", ("False", "", "") if terminal else ("True", "", "")),
                  ("Initialized", ("True", "PodCompleted" if succeeded and runtime.init else "", "")),
                  ("Ready", ready), ("ContainersReady", ready), ("PodScheduled", ("True", "", ""))]
        wall = rfc3339(self.ctx.clock.wall())
        current = {c.get("type"): c for c in (pod.get("status") or {}).get("conditions") or ()}
        out = []
        for kind, (status, reason, message) in wanted:
            # lastTransitionTime moves only with the status: as the pod says, else as this kubelet last wrote
            posted = current.get(kind) or {}
            seen = runtime.transitions.get(kind)
            if posted.get("status") == status and posted.get("lastTransitionTime"):
                seen = (status, posted["lastTransitionTime"])
            elif seen is None or seen[0] != status:
                seen = (status, wall)
            runtime.transitions[kind] = seen
            cond: dict[str, Any] = {"type": kind, "status": status, "lastTransitionTime": seen[1]}
            if reason:
                cond["reason"] = reason
            if message:
                cond["message"] = message
            out.append(cond)
        return out


def _without_nulls(value: Any) -> Any:
    """A JSON value with its null fields dropped (a null field reads as an absent one, as a Go struct decodes)."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _status_patch(current: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
    """The status part of the kubelet's two-way strategic merge patch from ``current`` to ``status``: only the
    fields that differ, and of ``conditions`` (merged by type) only the conditions that differ, a reason or
    message no longer given deleted with a null. Empty when the pod already says all of ``status`` (kubelet's
    isPodStatusByKubeletEqual: compared as decoded, so the ``lastProbeTime: null`` the API server's binding
    gives PodScheduled is no difference)."""
    patch = {k: v for k, v in status.items() if k != "conditions" and _without_nulls(current.get(k)) != v}
    posted = {c.get("type"): _without_nulls(c) for c in current.get("conditions") or ()}
    conditions = [{"reason": None, "message": None, **c} for c in status.get("conditions") or ()
                  if posted.get(c["type"]) != c]
    if conditions:
        patch["conditions"] = conditions
    return patch


def _phase(policy: str, containers: list[Container]) -> str:
    """kubelet's getPhase for a pod whose init containers are done."""
    running = sum(c.state == "running" for c in containers)
    stopped = sum(c.state == "terminated" or (c.state == "waiting" and c.last is not None) for c in containers)
    succeeded = sum(c.state == "terminated" and c.exit_code == 0 for c in containers)
    if running or stopped < len(containers):
        return "Running"
    if policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    return "Failed" if policy == "Never" else "Running"

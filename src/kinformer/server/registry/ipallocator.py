"""ClusterIP and NodePort allocation for Services, as kube-apiserver's allocators hand them out.

Defaults follow the common cluster setup (kubeadm, kind, minikube): service CIDR
:data:`DEFAULT_SERVICE_CIDR` (the ``default/kubernetes`` Service takes its first address) and node
ports :data:`DEFAULT_NODE_PORTS`. Dynamic ClusterIPs are drawn at random from the upper band of the
range, leaving the lower band for addresses clients ask for (kube's split since 1.24); dynamic node
ports likewise.

Invariants: an address is in use while a stored Service holds it (``used_ips``/``used_ports`` read the
watch cache) or while a recent allocation is still on its way to the cache (:data:`PENDING_SECONDS`, or
until the Service holding it is deleted: :meth:`ServiceAllocator.written`);
nothing else is persisted, so deleting a Service releases what it held, and a restart or another
replica over the same storage sees the same set. An exhausted range or a taken/out-of-range request
is an :class:`AllocationError`, answered as 422 Invalid.
"""

from __future__ import annotations

import ipaddress
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
DEFAULT_NODE_PORTS = (30000, 32767)
PENDING_SECONDS = 10.0
_MAX_RANDOM_TRIES = 64


class AllocationError(ValueError):
    """The requested address or port cannot be had (taken, out of range, or the range is full)."""


def parse_port_range(text: str) -> tuple[int, int]:
    """``"30000-32767"`` (or a single port) as an inclusive (low, high) pair."""
    low, _, high = text.partition("-")
    lo, hi = int(low), int(high or low)
    if not 0 < lo <= hi <= 65535:
        raise ValueError(f"invalid port range {text!r}")
    return lo, hi


def _static_band(size: int) -> int:
    """How many low offsets kube keeps for requested values: size/16 clamped to [16, 256]."""
    return min(max(16, size // 16), 256)


class _Pending:
    """Recent allocations not yet visible in the cache, each kept for :data:`PENDING_SECONDS`."""

    def __init__(self) -> None:
        self._at: dict[object, float] = {}

    def add(self, value: object) -> None:
        self._at[value] = time.monotonic()

    def values(self) -> set[object]:
        now = time.monotonic()
        for value in [v for v, t in self._at.items() if now - t > PENDING_SECONDS]:
            del self._at[value]
        return set(self._at)

    def discard(self, values: Iterable[object]) -> None:
        for value in values:
            self._at.pop(value, None)


def _pick(low: int, high: int, taken: Callable[[int], bool], band: int) -> int | None:
    """A free value in [low, high]: random tries in the upper band, then a scan of the whole range."""
    upper = low + band if high - low + 1 > band else low
    for _ in range(_MAX_RANDOM_TRIES):
        candidate = random.randint(upper, high)
        if not taken(candidate):
            return candidate
    for candidate in (*range(upper, high + 1), *range(low, upper)):
        if not taken(candidate):
            return candidate
    return None


class ServiceAllocator:
    """Hands out ClusterIPs from ``cidr`` and node ports from ``node_ports`` (see the module invariants)."""

    def __init__(self, used_ips: Callable[[], set[str]], used_ports: Callable[[], set[int]], *,
                 cidr: str = DEFAULT_SERVICE_CIDR, node_ports: tuple[int, int] = DEFAULT_NODE_PORTS) -> None:
        self.network = ipaddress.ip_network(cidr, strict=False)
        if self.network.num_addresses < 8:
            raise ValueError(f"service CIDR {cidr} is too small")
        self.node_ports = node_ports
        self._used_ips = used_ips
        self._used_ports = used_ports
        self._pending_ips = _Pending()
        self._pending_ports = _Pending()

    @property
    def family(self) -> str:
        return "IPv6" if self.network.version == 6 else "IPv4"

    @property
    def first_ip(self) -> str:
        """The address of the ``default/kubernetes`` Service."""
        return str(self.network.network_address + 1)

    @property
    def range_text(self) -> str:
        return str(self.network)

    def _ips_in_use(self) -> set[str]:
        used = self._used_ips()
        self._pending_ips.discard(used)
        return used | {str(v) for v in self._pending_ips.values()}

    def allocate_ip(self, requested: str | None = None) -> str:
        """``requested`` when free and in range, else a random free address."""
        used = self._ips_in_use()
        if requested:
            try:
                addr = ipaddress.ip_address(requested)
            except ValueError:
                raise AllocationError(f"failed to allocate IP {requested}: the provided IP is not a valid IP "
                                      "address") from None
            if addr not in self.network or addr in (self.network.network_address, self.network.broadcast_address):
                raise AllocationError(f"failed to allocate IP {requested}: the provided IP ({requested}) is not in "
                                      f"the valid range. The range of valid IPs is {self.network}")
            if str(addr) in used:
                raise AllocationError(f"failed to allocate IP {requested}: provided IP is already allocated")
            self._pending_ips.add(str(addr))
            return str(addr)
        base = int(self.network.network_address)
        size = self.network.num_addresses - 2  # neither the network nor the broadcast address
        offset = _pick(1, size, lambda off: str(ipaddress.ip_address(base + off)) in used, _static_band(size))
        if offset is None:
            raise AllocationError("failed to allocate a serviceIP: range is full")
        ip = str(ipaddress.ip_address(base + offset))
        self._pending_ips.add(ip)
        return ip

    def written(self, info: Any, obj: Mapping[str, Any], deleted: bool) -> None:
        """An ObjectStore after-write hook: a deleted Service's addresses and ports are no longer pending (a
        Service created and deleted before any other allocation would otherwise hold them for
        :data:`PENDING_SECONDS`)."""
        if not deleted or info.group or info.plural != "services":
            return
        spec = obj.get("spec") or {}
        self._pending_ips.discard(spec.get("clusterIPs") or [spec.get("clusterIP")])
        ports = [p.get("nodePort") for p in spec.get("ports") or () if isinstance(p, Mapping)]
        self._pending_ports.discard([*ports, spec.get("healthCheckNodePort")])

    def allocate_node_port(self, requested: int | None = None, *, also_taken: Iterable[int] = ()) -> int:
        """``requested`` when free and in range, else a random free port (never one of ``also_taken``)."""
        used = self._used_ports()
        self._pending_ports.discard(used)
        used = used | {int(v) for v in self._pending_ports.values()} | set(also_taken)  # type: ignore[call-overload]
        low, high = self.node_ports
        if requested:
            if not low <= requested <= high:
                raise AllocationError(f"provided port is not in the valid range. The range of valid ports is "
                                      f"{low}-{high}")
            if requested in used:
                raise AllocationError("provided port is already allocated")
            self._pending_ports.add(requested)
            return requested
        port = _pick(low, high, lambda p: p in used, _static_band(high - low + 1))
        if port is None:
            raise AllocationError("range is full")
        self._pending_ports.add(port)
        return port

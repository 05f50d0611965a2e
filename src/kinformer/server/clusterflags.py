"""``kinformer serve``'s node-failure timings, named as kube's flags: what a kubectl user of the server needs to
see a stopped node (``kubectl annotate node NAME kinformer.io/stopped=true``) turn Unknown, get tainted and lose
its pods in seconds.

* kube-controller-manager: ``--node-monitor-period``, ``--node-monitor-grace-period`` and
  ``--node-startup-grace-period`` (Go durations: ``500ms``, ``8s``, ``1m``) set the node lifecycle controller's
  :class:`~kinformer.cluster.ClusterOptions` fields of the same names;
* kubelet: ``--node-status-update-frequency`` (a duration) sets how often each simulated kubelet posts its Ready
  heartbeat (and renews its Lease at least as often);
* kube-apiserver: ``--default-not-ready-toleration-seconds`` and ``--default-unreachable-toleration-seconds``
  (whole seconds, kube's 300 each) are what the DefaultTolerationSeconds admission gives every new pod.

Invariant: a flag not given leaves its ClusterOptions default; a value out of range is refused by argparse (exit
2 naming the flag) and :func:`check` refuses what ClusterOptions refuses and combinations under which a healthy
node would be seen as failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from typing import Any

from kinformer.cluster.options import ClusterOptions

__all__ = ["add_arguments", "check", "cluster_options", "go_duration", "server_kwargs", "toleration_seconds"]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
#: flag name (without ``--``) -> the ClusterOptions field it sets.
_DURATION_FLAGS = {
    "node-monitor-period": "node_monitor_period",
    "node-monitor-grace-period": "node_monitor_grace_period",
    "node-startup-grace-period": "node_startup_grace_period",
    "node-status-update-frequency": "node_status_update_frequency",
}
_HELP = {
    "node-monitor-period": "kube-controller-manager's: how often node health is checked",
    "node-monitor-grace-period": "kube-controller-manager's: a node that neither renews its Lease nor posts Ready "
                                 "this long is marked Unknown and tainted unreachable",
    "node-startup-grace-period": "kube-controller-manager's: the same for a node that never posted Ready",
    "node-status-update-frequency": "the kubelet's: how often each simulated node posts its Ready heartbeat",
}


def go_duration(text: str) -> float:
    """A positive Go duration (``1m30s``, ``500ms``; a bare ``0`` is refused) in seconds, for argparse."""
    if not text or _PART.sub("", text) != "":
        raise argparse.ArgumentTypeError(f"invalid duration {text!r}: expected a Go duration such as 500ms, 8s, 1m")
    seconds = sum(float(num) * _UNITS[unit] for num, unit in _PART.findall(text))
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be greater than 0")
    return seconds


def toleration_seconds(text: str) -> int:
    """Whole seconds >= 0, for argparse."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected whole seconds >= 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: expected whole seconds >= 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The node-failure timing flags (each defaults to None: the ClusterOptions default)."""
    defaults = ClusterOptions()
    for flag, field in _DURATION_FLAGS.items():
        parser.add_argument(f"--{flag}", type=go_duration, default=None, metavar="DURATION",
                            help=f"{_HELP[flag]} (default: {getattr(defaults, field):g}s)")
    for taint in ("not-ready", "unreachable"):
        parser.add_argument(f"--default-{taint}-toleration-seconds", type=toleration_seconds, default=300,
                            metavar="S", help=f"the tolerationSeconds of the {taint}:NoExecute toleration every new "
                                              "pod is given, unless it has one (default: 300)")


def cluster_options(args: argparse.Namespace) -> ClusterOptions:
    """ClusterOptions with the duration flags given (the others at their defaults)."""
    given = {field: value for flag, field in _DURATION_FLAGS.items()
             if (value := getattr(args, flag.replace("-", "_"))) is not None}
    return dataclasses.replace(ClusterOptions(), **given)


def check(args: argparse.Namespace) -> str | None:
    """Why the timings cannot be used together, or None: a grace period must outlast a heartbeat period (kube
    documents N times; one is the least that keeps a healthy node Ready)."""
    try:
        options = cluster_options(args)
    except ValueError as exc:  # a rule of ClusterOptions' own
        return str(exc)
    beat = max(options.node_status_update_frequency, options.node_lease_renew_interval)
    for flag in ("node-monitor-grace-period", "node-startup-grace-period"):
        grace = getattr(options, _DURATION_FLAGS[flag])
        if grace <= beat:
            return (f"--{flag} ({grace:g}s) must be longer than the simulated kubelet's heartbeat period "
                    f"({beat:g}s: the longer of --node-status-update-frequency and its Lease renewal, "
                    f"{options.node_lease_renew_interval:g}s); a healthy node would turn Unknown")
    return None


def server_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """APIServer keyword arguments: the cluster's options and the DefaultTolerationSeconds pair."""
    return {"cluster_options": cluster_options(args),
            "default_toleration_seconds": (args.default_not_ready_toleration_seconds,
                                           args.default_unreachable_toleration_seconds)}

"""Schema validation of built-in kinds alone, CPU µs per call, baseline vs current.

What a create of a built-in spends in :mod:`kinformer.server.registry.validation`, on a fresh decoded body each call:
the decode-time checks (``unknown_fields`` for ``fieldValidation`` then ``prune_builtin``, on the same body, as
the write path calls them), ``validate_object`` (schema, metadata and kind rules) on a fresh body, and the two
together as a create has them (validation sees a shallow copy of the checked body with its own metadata). Objects:
the realistic pod (``bench/pod-realistic.json``, 7.5 KB with managedFields) and a Deployment with a
two-container template. Best of 7 batches (``--batches``) of 300 calls (``--calls``), CPU time, each source tree in a
fresh interpreter, the trees alternating for ``--rounds`` runs (the best figure of each kept); ratios
baseline / current. Prints figures, no verdicts.

    python3 bench/bench_validation.py --baseline /tmp/before/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchlib import FIXTURE, parse_args

HERE = Path(__file__).resolve().parent
CASES = ("decode-time checks (unknown fields + pruning)", "validate_object", "both (one create)")

CHILD = r"""
import copy, json, sys, time
from kinformer.server.registry.resources import Registry
from kinformer.server.registry.validation import prune_builtin, unknown_fields, validate_object

registry = Registry()
pod = json.load(open(sys.argv[1]))
BATCHES, CALLS = int(sys.argv[2]), int(sys.argv[3])
pod["metadata"].pop("resourceVersion", None)
container = {"name": "web", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
             "ports": [{"containerPort": 80, "protocol": "TCP", "name": "http"}],
             "env": [{"name": "MODE", "value": "prod"}], "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}},
             "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 5},
             "volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg"}]}
deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web", "tier": "front"}},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
                       "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
                                    "spec": {"containers": [container, {**container, "name": "sidecar"}],
                                             "volumes": [{"name": "cfg", "configMap": {"name": "cfg"}}]}}}}
objects = [(registry.get("", "v1", "pods"), pod), (registry.get("apps", "v1", "deployments"), deployment)]


def decode_checks(info, obj):
    unknown_fields(info, obj)
    prune_builtin(info, obj)


def both(info, obj):  # as a create: managedFields are recorded on a shallow copy with its own metadata
    decode_checks(info, obj)
    validate_object(info, {**obj, "metadata": dict(obj["metadata"])})


def cpu(info, obj, fn):
    best = float("inf")
    for _ in range(BATCHES):
        args = [copy.deepcopy(obj) for _ in range(CALLS)]
        t = time.process_time()
        for o in args:
            fn(info, o)
        best = min(best, (time.process_time() - t) / CALLS)
    return best * 1e6


print(json.dumps([[cpu(info, obj, fn) for fn in (decode_checks, validate_object, both)] for info, obj in objects]))
"""
OBJECTS = ("realistic pod", "Deployment")


def measure(src: str, batches: int, calls: int) -> list[list[float]]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(FIXTURE), str(batches), str(calls)], capture_output=True,
                         text=True, check=True,
                         env={**os.environ, "PYTHONPATH": src})
    figures: list[list[float]] = json.loads(out.stdout)
    return figures


def best(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    return [[min(x, y) for x, y in zip(ra, rb, strict=True)] for ra, rb in zip(a, b, strict=True)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", metavar="SRC", help="another source tree (its src/ directory)")
    p.add_argument("--rounds", type=int, default=3, help="alternating runs per tree; the best of each figure")
    p.add_argument("--batches", type=int, default=7, help="timed batches; the best is reported")
    p.add_argument("--calls", type=int, default=300, help="calls per batch")
    args = parse_args(p, rounds=1, batches=1, calls=10)
    current, base = measure(str(HERE.parent / "src"), args.batches, args.calls), None
    for i in range(args.rounds):
        if i:
            current = best(current, measure(str(HERE.parent / "src"), args.batches, args.calls))
        if args.baseline:
            again = measure(os.path.abspath(args.baseline), args.batches, args.calls)
            base = again if base is None else best(base, again)
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| object | call | " + ("baseline µs | " if base else "") + "current µs |" + (" ratio |" if base else ""))
    print("|---|---|" + ("---:|" if base else "") + "---:|" + ("---:|" if base else ""))
    for i, name in enumerate(OBJECTS):
        for j, case in enumerate(CASES):
            row = f"| {name} | {case} | " + (f"{base[i][j]:.0f} | " if base else "") + f"{current[i][j]:.0f} |"
            print(row + (f" {base[i][j] / current[i][j]:.1f}x less |" if base else ""))


if __name__ == "__main__":
    main()

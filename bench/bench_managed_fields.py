"""managedFields bookkeeping alone (``update_managed_fields``), CPU µs per call, baseline vs current.

On the realistic pod (``bench/pod-realistic.json``): a create carrying the client's
managedFields, a create without them (both repeating one shape, as a controller's pods do), a create
of a new shape each time (a label value differs: nothing remembered applies), an update of two fields
(a label and an image) and a no-op update, each on objects decoded afresh as the server has them.
Best of 7 batches (``--batches``) of 200 calls (``--calls``), CPU time, each source tree in a fresh interpreter;
ratios baseline / current. Prints figures, no verdicts.

    python3 bench/bench_managed_fields.py --baseline /tmp/before/src
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
CASES = ("create with the client's managedFields", "create without managedFields",
         "create with the client's managedFields, a new shape each time", "update of two fields", "no-op update")

CHILD = r"""
import copy, json, sys, time
try:
    from kinformer.server.registry.managedfields import update_managed_fields
except ImportError:  # trees from before the managedfields module
    from kinformer.server.registry.apply import update_managed_fields
from kinformer.server.registry.resources import Registry

info = Registry().get("", "v1", "pods")
pod = json.load(open(sys.argv[1]))
BATCHES, CALLS = int(sys.argv[2]), int(sys.argv[3])
pod["metadata"].pop("resourceVersion", None)
bare = copy.deepcopy(pod)
bare["metadata"].pop("managedFields", None)
stored = json.dumps(update_managed_fields(None, copy.deepcopy(pod), manager="kubectl", info=info, now="T"))
changed = json.loads(stored)
changed["metadata"].setdefault("labels", {})["x"] = "y"
changed["spec"]["containers"][0]["image"] = "new:2"
edited = json.dumps(changed)
shapes = iter(range(10**9))


def new_shape():
    obj = copy.deepcopy(pod)
    obj["metadata"].setdefault("labels", {})["shape"] = str(next(shapes))
    return obj


def cpu(make):
    best = float("inf")
    for _ in range(BATCHES):
        args = [make() for _ in range(CALLS)]
        t = time.process_time()
        for old, new in args:
            update_managed_fields(old, new, manager="ctrl", info=info, now="T")
        best = min(best, (time.process_time() - t) / CALLS)
    return best * 1e6


print(json.dumps([cpu(lambda: (None, copy.deepcopy(pod))), cpu(lambda: (None, copy.deepcopy(bare))),
                  cpu(lambda: (None, new_shape())),
                  cpu(lambda: (json.loads(stored), json.loads(edited))),
                  cpu(lambda: (json.loads(stored), json.loads(stored)))]))
"""


def measure(src: str, batches: int, calls: int) -> list[float]:
    out = subprocess.run([sys.executable, "-c", CHILD, str(FIXTURE), str(batches), str(calls)], capture_output=True,
                         text=True, check=True,
                         env={**os.environ, "PYTHONPATH": src})
    figures: list[float] = json.loads(out.stdout)
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", metavar="SRC", help="another source tree (its src/ directory)")
    p.add_argument("--batches", type=int, default=7, help="timed batches; the best is reported")
    p.add_argument("--calls", type=int, default=200, help="calls per batch")
    args = parse_args(p, batches=1, calls=10)
    current = measure(str(HERE.parent / "src"), args.batches, args.calls)
    base = measure(os.path.abspath(args.baseline), args.batches, args.calls) if args.baseline else None
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| call | " + ("baseline µs | " if base else "") + "current µs |" + (" ratio |" if base else ""))
    print("|---|" + ("---:|" if base else "") + "---:|" + ("---:|" if base else ""))
    for i, case in enumerate(CASES):
        row = f"| {case} | " + (f"{base[i]:.0f} | " if base else "") + f"{current[i]:.0f} |"
        print(row + (f" {base[i] / current[i]:.1f}x less |" if base else ""))


if __name__ == "__main__":
    main()

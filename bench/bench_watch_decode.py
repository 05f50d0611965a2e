"""Decoding realistic watch events: full orjson dicts vs kinformer's lazy objects; memory per cached pod.

    python bench/bench_watch_decode.py [--events 50000] [--memory 50000]

Each measurement runs in a fresh subprocess so RSS deltas are not polluted by earlier runs.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import orjson
from benchlib import FIXTURE, parse_args


def line_maker() -> tuple[bytes, bytes, bytes, str]:
    pod = json.loads(FIXTURE.read_text())
    name = pod["metadata"]["name"]
    pod["metadata"]["name"] = "@@NAME@@"
    pod["metadata"]["resourceVersion"] = "@@RV@@"
    template = orjson.dumps({"type": "MODIFIED", "object": pod})
    a, rest = template.split(b"@@NAME@@", 1)
    b, c = rest.split(b"@@RV@@", 1)
    return a, b, c, name


def iter_lines(n: int):
    """``n`` MODIFIED events of the realistic pod with distinct names and resourceVersions, made one by one."""
    a, b, c, name = line_maker()
    for i in range(n):
        yield b"".join((a, f"{name}-{i}".encode(), b, str(100000 + i).encode(), c))


def make_lines(n: int) -> list[bytes]:
    return list(iter_lines(n))


def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def _decoders():
    from kinformer.client.watch import decode_watch_line

    def orjson_full(line: bytes):
        return orjson.loads(line)

    def orjson_stripped(line: bytes):
        ev = orjson.loads(line)
        ev["object"]["metadata"].pop("managedFields", None)
        return ev

    def lazy(line: bytes):
        return decode_watch_line(line)

    def lazy_stripped(line: bytes):
        ev = decode_watch_line(line)
        return ev.object.without_managed_fields()

    return {"orjson-dict": orjson_full, "orjson-dict-stripped": orjson_stripped,
            "lazy": lazy, "lazy-stripped": lazy_stripped}


def run_speed(kind: str, n: int) -> dict:
    lines = make_lines(n)
    fn = _decoders()[kind]
    keep = []
    gc.collect()
    t0 = time.perf_counter()
    for line in lines:
        keep.append(fn(line))
    dt = time.perf_counter() - t0
    return {"kind": kind, "events": n, "rate": n / dt}


def run_memory(kind: str, n: int) -> dict:
    """RSS growth per object while decoding ``n`` events one by one and keeping what the decoder returns (the
    event lines themselves are transient, unless the decoded object references them)."""
    fn = _decoders()[kind]
    gen = iter_lines(n)
    gc.collect()
    before = rss_kb()
    keep = [fn(line) for line in gen]
    gc.collect()
    after = rss_kb()
    sample = keep[-1]
    obj = sample["object"] if isinstance(sample, dict) and "object" in sample else getattr(sample, "object", sample)
    assert obj["metadata"]["name"].endswith(str(n - 1))  # the cached objects are intact (and metadata decoded)
    return {"kind": kind, "objects": n, "kb_per_object": (after - before) / n}


def _child(args: argparse.Namespace) -> None:
    fn = run_speed if args.child == "speed" else run_memory
    print(json.dumps(fn(args.kind, args.n)))


def _spawn(mode: str, kind: str, n: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--kind", kind, "--n", str(n)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=50000)
    p.add_argument("--memory", type=int, default=50000)
    p.add_argument("--child", choices=["speed", "memory"])
    p.add_argument("--kind")
    p.add_argument("--n", type=int)
    args = parse_args(p, events=500, memory=500)
    if args.child:
        _child(args)
        return
    pod_size = len(make_lines(1)[0])
    print(f"watch line size: {pod_size} bytes; decode {args.events} events, memory over {args.memory} objects")
    print(f"{'decoder':24s} {'events/s':>10s} {'KB/object':>10s}")
    rates = {}
    for kind in ("orjson-dict", "orjson-dict-stripped", "lazy", "lazy-stripped"):
        speed = _spawn("speed", kind, args.events)
        mem = _spawn("memory", kind, args.memory)
        rates[kind] = speed["rate"]
        print(f"{kind:24s} {speed['rate']:10.0f} {mem['kb_per_object']:10.2f}")
    print(f"lazy-stripped / orjson-dict-stripped: {rates['lazy-stripped'] / rates['orjson-dict-stripped']:.2f}x")


if __name__ == "__main__":
    main()

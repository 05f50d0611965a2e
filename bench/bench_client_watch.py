"""Watch throughput side by side: kinformer vs the official ``kubernetes`` client vs ``kubectl get -w``.

A small aiohttp server (its own process) streams realistic ~7.7 KB pods (bench/pod-realistic.json,
names and resourceVersions varied) as chunked MODIFIED watch events from pre-encoded bytes. Each consumer
reads the whole stream in this one run:

  kinformer-watch      Client.watch -> LazyObject events
  kinformer-watch-kept Client.watch, managedFields cut while decoding (as the informer's default transform), each
                       object kept in a dict by name: the transport plus holding what it received, the floor of any
                       cache (on this machine, memory touched for the first time costs the kernel's page zeroing)
  kinformer-informer   SharedInformerFactory(client): list, watch, decode, RealFIFO, indexer, a plain handler
  kinformer-informer-async  the same with an ``async def`` handler
  kinformer-informer-meta   the same, metadata_only=True (PartialObjectMetadata cut from the full objects sent)
  kinformer-informer[-async|-meta]-steady  the same three once their list has filled the cache with the pods the
                       events then modify (label selector bench=steady): only the watch's events are timed, each
                       replacing a cached object, as in an informer's life after its sync (the three above add
                       every event's pod to a cache that grows from empty, paying for memory touched first)
  official-dict        kubernetes 37 Watch().stream(CustomObjectsApi...) -> dicts (its default dict path:
                       each line parsed, re-dumped and parsed again)
  official-raw         kubernetes 37 Watch().stream(..., deserialize=False) -> dicts (one json.loads per line)
  official-models      kubernetes 37 Watch().stream(CoreV1Api.list_namespaced_pod) -> V1Pod models
  kubectl              kubectl get pods -w -o json (stdout counted)

    python bench/bench_client_watch.py [--events 50000] [--slow-events 10000] [--models-events 5000] [--json]

The event count is encoded in the namespace (``n<count>``) so each consumer gets its own stream length. Each
consumer runs in a fresh interpreter (the server keeps running), so none pays for another's heap.
Prints events/s per consumer, the ratios of the kinformer informer to each peer, and memory per cached pod.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib import FIXTURE, parse_args

BASE_RV = 100000
STEADY = "bench=steady"  # the label selector of a steady stream: its list holds the pods its events modify
CHUNK = 64 * 1024


# ---------------------------------------------------------------------------------------------------- server

def _announce(port_file: str, port: int) -> None:
    tmp = f"{port_file}.tmp"
    Path(tmp).write_text(str(port))
    os.replace(tmp, port_file)  # atomic: the parent never reads a partial port


def _serve(port_file: str) -> None:
    import orjson
    from aiohttp import web

    pod = json.loads(FIXTURE.read_text())
    name = pod["metadata"]["name"]
    pod["metadata"]["name"] = "@@NAME@@"
    pod["metadata"]["resourceVersion"] = "@@RV@@"
    pod["metadata"]["namespace"] = "@@NS@@"
    template = orjson.dumps({"type": "MODIFIED", "object": pod})
    a, rest = template.split(b"@@NAME@@", 1)
    b, rest = rest.split(b"@@NS@@", 1) if b"@@NS@@" in rest else (rest, b"")
    c, d = rest.split(b"@@RV@@", 1)
    streams: dict[str, list[bytes]] = {}
    lists: dict[str, bytes] = {}
    triggers: dict[str, list[asyncio.Future[None]]] = {}  # steady watches waiting for their burst, per stream

    def chunks(ns: str) -> list[bytes]:
        if ns not in streams:
            count = int(ns[1:])
            nsb = ns.encode()
            out, buf, size = [], [], 0
            for i in range(count):
                line = b"".join((a, f"{name}-{i}".encode(), b, nsb, c, str(BASE_RV + 1 + i).encode(), d, b"\n"))
                buf.append(line)
                size += len(line)
                if size >= CHUNK:
                    out.append(b"".join(buf))
                    buf, size = [], 0
            if buf:
                out.append(b"".join(buf))
            streams[ns] = out
        return streams[ns]

    def steady_list(ns: str) -> bytes:
        """A PodList of the stream's pods (the names its MODIFIED events carry), at resourceVersion BASE_RV."""
        if ns not in lists:
            obj_a = orjson.dumps(pod).split(b"@@NAME@@", 1)[0]
            tail = template[len(a) + len(b"@@NAME@@"):-1]  # the object's JSON after its name, envelope's "}" cut
            items = b",".join(b"".join((obj_a, f"{name}-{i}".encode(), tail)) for i in range(int(ns[1:])))
            body = items.replace(b"@@NS@@", ns.encode()).replace(b"@@RV@@", str(BASE_RV).encode())
            head = orjson.dumps({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(BASE_RV)}})
            lists[ns] = head[:-1] + b',"items":[' + body + b"]}"
        return lists[ns]

    def js(doc: Any) -> web.Response:
        return web.Response(body=orjson.dumps(doc), content_type="application/json")

    async def version(_: web.Request) -> web.Response:
        return js({"major": "1", "minor": "32", "gitVersion": "v1.32.0-bench", "platform": "linux/amd64"})

    async def api(_: web.Request) -> web.Response:
        return js({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})

    async def apis(_: web.Request) -> web.Response:
        return js({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})

    async def api_v1(_: web.Request) -> web.Response:
        return js({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "shortNames": ["po"],
             "verbs": ["get", "list", "watch"]}]})

    async def pods(request: web.Request) -> web.StreamResponse:
        ns = request.match_info["ns"]
        q = request.query
        steady = q.get("labelSelector") == STEADY
        if q.get("watch", "false") in ("", "0", "false", "False"):
            if steady:
                return web.Response(body=steady_list(ns), content_type="application/json")
            return js({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(BASE_RV)},
                       "items": []})
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        rv = q.get("resourceVersion") or ""
        count = int(ns[1:])
        if rv in ("", "0") or int(rv) < BASE_RV + count:
            if steady:  # the cache is full: the burst waits for its consumer's /trigger
                burst = asyncio.get_running_loop().create_future()
                triggers.setdefault(ns, []).append(burst)
                await burst
            for chunk in chunks(ns):
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        await asyncio.sleep(float(q.get("timeoutSeconds") or 600))  # caught up: hold the watch open
        await resp.write_eof()
        return resp

    async def trigger(request: web.Request) -> web.Response:
        for burst in triggers.pop(request.match_info["ns"], []):
            burst.set_result(None)
        return web.Response(text="ok")

    async def main() -> None:
        app = web.Application()
        app.router.add_get("/trigger/{ns}", trigger)
        app.router.add_get("/version", version)
        app.router.add_get("/api", api)
        app.router.add_get("/apis", apis)
        app.router.add_get("/api/v1", api_v1)
        app.router.add_get("/api/v1/namespaces/{ns}/pods", pods)
        app.router.add_get("/apis/bench.example/v1/namespaces/{ns}/pods", pods)  # for CustomObjectsApi
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        for ns in sys.argv[3:]:
            chunks(ns)  # pre-encode before announcing readiness
        _announce(port_file, port)
        await asyncio.Event().wait()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------------- peers

def rss_kb() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


async def kinformer_watch(url: str, count: int) -> tuple[float, float]:
    """Events/s of ``Client.watch`` alone, wall clock and per CPU second of this process."""
    from kinformer.client import Client, Resource

    pods = Resource("", "v1", "pods", "Pod")
    n = 0
    async with Client(url) as client:
        t0, c0 = time.perf_counter(), time.process_time()
        async for ev in client.watch(pods, f"n{count}", resource_version=str(BASE_RV)):
            if ev.object.resource_version:
                n += 1
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert n == count, n
    return count / dt, count / cpu


async def kinformer_watch_kept(url: str, count: int) -> tuple[float, float]:
    """Events/s of ``Client.watch`` whose objects (managedFields cut while decoding, as the informer caches them)
    are kept in a dict by name, wall clock and per CPU second: what holding the objects costs, without a cache."""
    from kinformer.client import Client, Resource
    from kinformer.listwatch import ListOptions

    pods = Resource("", "v1", "pods", "Pod")
    kept: dict[str, Any] = {}
    async with Client(url) as client:
        t0, c0 = time.perf_counter(), time.process_time()
        async for ev in client.watch_stream(pods, ListOptions(resource_version=str(BASE_RV)), f"n{count}",
                                            drop_managed_fields=True):
            kept[ev.object.name] = ev.object
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert len(kept) == count, len(kept)
    return count / dt, count / cpu


async def kinformer_informer(url: str, count: int, handler: str = "plain", metadata_only: bool = False,
                             steady: bool = False) -> tuple[float, float, float]:
    """Events/s end to end (list + watch + FIFO + indexer + one no-op ``handler``, "plain" or "async"), wall
    clock and per CPU second of this process (all its threads), and RSS KiB per cached pod.
    ``metadata_only`` caches PartialObjectMetadata cut from the full objects this server sends (it ignores
    ``as=``). ``steady``: the list fills the cache with the ``count`` pods first, and only the watch's ``count``
    MODIFIED events of those pods are timed (each replaces a cached object, as in an informer's life after
    its sync; without it every event adds a pod to a cache that grows from empty)."""
    import aiohttp

    from kinformer.cache.factory import SharedInformerFactory
    from kinformer.client import Client

    gc.collect()
    before = rss_kb()
    seen = {"add": 0, "update": 0}
    listed, done = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def count_one(kind: str) -> bool:
        seen[kind] += 1
        return seen[kind] == count if steady else seen["add"] + seen["update"] == count

    def on_add(*args: Any, **kwargs: Any) -> None:
        # a plain handler runs on its worker thread: asyncio.Event.set from there would not wake an idle loop
        # (the clock then ran on until some timer woke it: up to 15 s added to a run)
        if count_one("add"):
            loop.call_soon_threadsafe((listed if steady else done).set)

    def on_update(*args: Any, **kwargs: Any) -> None:
        if count_one("update"):
            loop.call_soon_threadsafe(done.set)

    async def on_add_async(*args: Any, **kwargs: Any) -> None:
        if count_one("add"):
            (listed if steady else done).set()

    async def on_update_async(*args: Any, **kwargs: Any) -> None:
        if count_one("update"):
            done.set()

    plain = handler != "async"
    async with Client(url) as client, aiohttp.ClientSession() as session:
        factory = SharedInformerFactory(client)
        informer = factory.informer("pods", namespace=f"n{count}", metadata_only=metadata_only,
                                    label_selector=STEADY if steady else None)
        informer.add_event_handler(on_add=on_add if plain else on_add_async,
                                   on_update=on_update if plain else on_update_async)
        t0, c0 = time.perf_counter(), time.process_time()
        factory.start()
        if steady:
            await asyncio.wait_for(listed.wait(), 600)
            t0, c0 = time.perf_counter(), time.process_time()
            async with session.get(f"{url}/trigger/n{count}") as resp:
                resp.raise_for_status()
        await asyncio.wait_for(done.wait(), 600)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        cached = len(informer.indexer.list())
        gc.collect()
        per_pod = (rss_kb() - before) / max(cached, 1)
        await factory.shutdown()
    assert cached == count, cached
    return count / dt, count / cpu, per_pod


def official(url: str, count: int, mode: str) -> float:
    """kubernetes 37 watch. ``mode``: "raw" (deserialize=False: one json.loads per line), "dict" (the
    CustomObjectsApi path that hands out dicts by default) or "models" (CoreV1Api -> V1Pod)."""
    from kubernetes import client as kclient
    from kubernetes import watch as kwatch

    cfg = kclient.Configuration()
    cfg.host = url
    api_client = kclient.ApiClient(cfg)
    w = kwatch.Watch()
    n = 0
    kwargs: dict[str, Any] = {"resource_version": str(BASE_RV), "_request_timeout": 600}
    ns = f"n{count}"
    if mode == "dict":
        func, args = kclient.CustomObjectsApi(api_client).list_namespaced_custom_object, (
            "bench.example", "v1", ns, "pods")
    else:
        func, args = kclient.CoreV1Api(api_client).list_namespaced_pod, (ns,)
        if mode == "raw":
            kwargs["deserialize"] = False
    t0 = time.perf_counter()
    for ev in w.stream(func, *args, **kwargs):
        obj = ev["object"]
        rv = obj.metadata.resource_version if mode == "models" else obj["metadata"]["resourceVersion"]
        if rv:
            n += 1
        if n >= count:
            w.stop()
            break
    dt = time.perf_counter() - t0
    assert n == count, n
    return count / dt


def kubectl(url: str, count: int) -> float | None:
    binary = shutil.which("kubectl")
    if binary is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        kc = Path(tmp) / "kubeconfig"
        kc.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "bench",
            "clusters": [{"name": "bench", "cluster": {"server": url}}],
            "users": [{"name": "bench", "user": {}}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}]}))
        env = {**os.environ, "KUBECONFIG": str(kc), "HOME": tmp}
        t0 = time.perf_counter()
        proc = subprocess.Popen([binary, "get", "pods", "-n", f"n{count}", "-w", "-o", "json"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        n, tail = 0, b""
        while n < count:
            data = proc.stdout.read1(1 << 20)
            if not data:
                break
            window = tail + data
            n += window.count(b"\n}\n")
            tail = window[-2:]
        dt = time.perf_counter() - t0
        proc.kill()
        proc.wait()
    if n < count:
        raise RuntimeError(f"kubectl printed {n} of {count} objects: {proc.stderr.read().decode()[:500]}")
    return count / dt


# ---------------------------------------------------------------------------------------------------- main

KINFORMER = ("kinformer-informer", "kinformer-watch", "kinformer-watch-kept", "kinformer-informer-async",
             "kinformer-informer-meta", "kinformer-informer-steady", "kinformer-informer-async-steady",
             "kinformer-informer-meta-steady")


def measure(events: int, slow_events: int, models_events: int, skip: frozenset[str] | set[str] = frozenset(),
            baseline_src: str | None = None, rotate: int = 0) -> dict[str, float]:
    """Run every consumer not in ``skip`` against one bench server; events/s per consumer and, under
    ``kb_per_pod``, the informer's RSS per cached pod (KiB). With ``baseline_src`` (another kinformer source
    tree, e.g. ``git archive main src | tar -x -C /tmp/base``), each kinformer consumer also runs on it right
    after running on this tree, its figures suffixed ``@baseline``: before and after in one run. kinformer's
    consumers run first, in their order rotated by ``rotate`` (a caller running rounds passes the round's
    index, so no consumer always runs first, after the peers' heaps are freed, or last)."""
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        namespaces = sorted({f"n{events}", f"n{slow_events}", f"n{models_events}"})
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file), *namespaces])
        try:
            deadline = time.monotonic() + 120
            while not port_file.exists() or not port_file.read_text():
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("bench server did not start")
                time.sleep(0.1)
            url = f"http://127.0.0.1:{port_file.read_text()}"
            turn = rotate % len(KINFORMER)
            for consumer, count in ([(name, events) for name in KINFORMER[turn:] + KINFORMER[:turn]]
                                    + [("official-dict", events), ("official-raw", events),
                                       ("official-models", models_events), ("kubectl", slow_events)]):
                if consumer not in skip:
                    results.update(_in_child(consumer, url, count))
                if consumer not in skip and baseline_src and consumer in KINFORMER:
                    base = _in_child(consumer, url, count, baseline_src)
                    results.update({f"{key}@baseline": value for key, value in base.items()})
        finally:
            server.kill()
            server.wait()
    return results


#: the consumers whose RSS per cached pod is reported, and under which key
_RSS_KEYS = {"kinformer-informer": "kb_per_pod", "kinformer-informer-meta": "kb_per_pod_meta"}


def consume(consumer: str, url: str, count: int) -> dict[str, float]:
    """Run one consumer over ``count`` events (in this process); kinformer's also report ``<consumer> cpu``,
    events per CPU second (on a loaded machine the steadier figure: waiting for a core does not count)."""
    if consumer.startswith("kinformer-informer"):
        kind = consumer.removesuffix("-steady")
        rate, cpu, per_pod = asyncio.run(kinformer_informer(
            url, count, "async" if kind.endswith("-async") else "plain", metadata_only=kind.endswith("-meta"),
            steady=consumer.endswith("-steady")))
        out = {consumer: rate, f"{consumer} cpu": cpu}
        if consumer in _RSS_KEYS:
            out[_RSS_KEYS[consumer]] = per_pod
        return out
    if consumer == "kinformer-watch":
        rate, cpu = asyncio.run(kinformer_watch(url, count))
        return {consumer: rate, f"{consumer} cpu": cpu}
    if consumer == "kinformer-watch-kept":
        rate, cpu = asyncio.run(kinformer_watch_kept(url, count))
        return {consumer: rate, f"{consumer} cpu": cpu}
    if consumer.startswith("official-"):
        return {consumer: official(url, count, consumer.removeprefix("official-"))}
    rate = kubectl(url, count)
    return {} if rate is None else {consumer: rate}


def _in_child(consumer: str, url: str, count: int, src: str | None = None) -> dict[str, float]:
    """:func:`consume` in a fresh interpreter, so no consumer pays for another's heap (or RSS baseline); with
    ``src``, kinformer is imported from that source tree (a baseline) instead."""
    env = None
    if src is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((src, str(Path(__file__).resolve().parent)))}
    proc = subprocess.run([sys.executable, __file__, "--consume", consumer, url, str(count)], capture_output=True,
                          text=True, timeout=1800, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{consumer} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pod_json_size() -> int:
    """Bytes of the fixture pod as compact JSON (with managedFields)."""
    return len(json.dumps(json.loads(FIXTURE.read_text()), separators=(",", ":")))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        _serve(sys.argv[2])
        return
    if len(sys.argv) == 5 and sys.argv[1] == "--consume":
        print(json.dumps(consume(sys.argv[2], sys.argv[3], int(sys.argv[4]))))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--events", type=int, default=50000, help="events for kinformer and official-dict/raw")
    p.add_argument("--slow-events", type=int, default=10000, help="events for kubectl")
    p.add_argument("--models-events", type=int, default=5000, help="events for official-models")
    p.add_argument("--skip", default="", help="comma-separated consumers to skip")
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument("--baseline-src", help="also run kinformer's consumers on this source tree (before/after)")
    args = parse_args(p, events=2000, slow_events=300, models_events=200)
    skip = set(filter(None, args.skip.split(",")))
    load = os.getloadavg()[0]
    results = measure(args.events, args.slow_events, args.models_events, skip, args.baseline_src)
    if args.json:
        print(json.dumps({"load": load, **results}))
        return
    print(f"pod JSON {pod_json_size()} bytes; load average {load:.2f}")
    per_pod = results.pop("kb_per_pod", None)
    per_pod_meta = results.pop("kb_per_pod_meta", None)
    print(f"{'consumer':36s} {'events/s':>10s}")
    for name, rate in results.items():
        print(f"{name:36s} {rate:10.0f}")
    for suffix in ("", " cpu", "@baseline", " cpu@baseline"):
        for base_name in ("kinformer-watch", "kinformer-watch-kept"):
            watch = results.get(f"{base_name}{suffix}")
            for informer in (name for name in KINFORMER if name.startswith("kinformer-informer")):
                if watch and f"{informer}{suffix}" in results:
                    print(f"{informer}{suffix} / {base_name}{suffix}: {results[informer + suffix] / watch:.2f}x")
    base = results.get("kinformer-informer")
    if base:
        for peer in ("official-dict", "official-raw", "official-models", "kubectl"):
            if peer in results:
                print(f"kinformer-informer / {peer}: {base / results[peer]:.1f}x")
    if per_pod is not None:
        print(f"informer RSS per cached pod (default transform): {per_pod:.2f} KiB")
    if per_pod_meta is not None:
        print(f"metadata-only informer RSS per cached pod: {per_pod_meta:.2f} KiB")


if __name__ == "__main__":
    main()

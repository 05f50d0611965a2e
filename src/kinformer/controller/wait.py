"""Waiting for one object to reach a condition (client-go ``tools/watch.UntilWithSync``).

``obj = await wait_for(client, "pods", "web-0", lambda p: p and p["status"].get("phase") == "Running",
timeout=60)`` lists and watches just that object (a ``metadata.name`` field selector) through an informer,
so it survives what an informer survives: a dropped or silent watch is reopened from the last
resourceVersion, a 410 Gone relists. ``condition`` sees the object after every change, in order, or None
while the object does not exist (so ``lambda o: o is None`` waits for a deletion); it may be a coroutine
function. The first object (or None) it accepts is returned; TimeoutError after ``timeout`` seconds.

The informer is private to the call and stopped before it returns.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from kinformer.cache.shared_informer import SharedIndexInformer

__all__ = ["wait_for"]

Condition = Callable[[Mapping[str, Any] | None], bool | Awaitable[bool]]


async def _accepts(condition: Condition, obj: Mapping[str, Any] | None) -> bool:
    result = condition(obj)
    if inspect.isawaitable(result):
        result = await result
    return bool(result)


async def wait_for(client: Any, resource: str, name: str, condition: Condition, *,
                   namespace: str | None = None, timeout: float | None = 60.0) -> Mapping[str, Any] | None:
    """Wait until ``condition`` accepts the object ``name`` of ``resource`` (see the module doc)."""
    info = await client.resolve(resource)
    if info.namespaced:
        namespace = namespace or getattr(client, "default_namespace", None) or "default"
    else:
        namespace = None
    key = f"{namespace}/{name}" if namespace else name
    lw = client.lister_watcher(info, namespace=namespace, field_selector=f"metadata.name={name}")
    informer: SharedIndexInformer[Any] = SharedIndexInformer(lw, name=f"wait-for:{info}:{key}", resource=str(info),
                                   namespaced=info.namespaced)
    seen: asyncio.Queue[Any] = asyncio.Queue()

    async def on_add(obj: Any) -> None:
        seen.put_nowait(obj)

    async def on_update(old: Any, new: Any) -> None:
        seen.put_nowait(new)

    async def on_delete(obj: Any) -> None:
        seen.put_nowait(None)

    informer.add_event_handler(on_add=on_add, on_update=on_update, on_delete=on_delete)
    try:
        async with asyncio.timeout(timeout):
            informer.start()
            await informer.wait_for_sync()
            if informer.indexer.get_by_key(key) is None:
                seen.put_nowait(None)  # absent after the first list
            while True:
                obj = await seen.get()
                if await _accepts(condition, obj):
                    return obj
    except TimeoutError:
        raise TimeoutError(f"wait_for {info} {key}: condition not met within {timeout}s") from None
    finally:
        await informer.stop()

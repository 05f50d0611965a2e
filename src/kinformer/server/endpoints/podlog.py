"""``GET pods/<name>/log``, answered from the server's simulated kubelets (``APIServer(nodes=N)``).

kube-apiserver checks the request and the container (its ``validateContainer``: with no ``container`` a pod of
one container means that one, otherwise 400 "a container name must be specified for pod <name>, choose one
of: [a b]"; an unknown name is 400 "container <c> is not valid for pod <name>"), then proxies to the kubelet
of ``spec.nodeName``; a pod not yet on a node answers an empty log. Here the kubelet is the cluster's
(:meth:`kinformer.cluster.Cluster.pod_log`); its refusals (a container not started yet, no previous instance)
are 400s as kube's. ``tailLines`` and ``limitBytes`` trim the text; ``follow`` answers what is there and ends;
``timestamps``, ``sinceSeconds`` and ``sinceTime`` are accepted and change nothing (the simulated log has no
line times).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from ..machinery import status as st
from .query import truthy

#: (pod, container, previous) -> the log text, or None when no simulated kubelet runs that pod; raises
#: ValueError (kinformer.cluster.kubelet.LogError) for what a kubelet refuses.
PodLogSource = Callable[[Mapping[str, Any], str, bool], "str | None"]


def container_names(spec: Mapping[str, Any]) -> list[str]:
    """Every container of the pod, init, regular then ephemeral (kube's VisitContainers order)."""
    return [str(c.get("name")) for key in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(key) or ()]


def pick_container(pod: Mapping[str, Any], container: str) -> str:
    """kube's validateContainer."""
    spec: Mapping[str, Any] = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    if not container:
        regular: list[Any] = list(spec.get("containers") or ())
        if len(regular) == 1:
            return str(regular[0]["name"])
        if not regular:
            raise st.bad_request(f"a container name must be specified for pod {name}")
        raise st.bad_request(f"a container name must be specified for pod {name}, choose one of: "
                             f"[{' '.join(container_names(spec))}]")
    if container not in container_names(spec):
        raise st.bad_request(f"container {container} is not valid for pod {name}")
    return container


def _bounded(query: Mapping[str, str], key: str, name: str) -> int | None:
    """``tailLines`` (>= 0) or ``limitBytes`` (> 0) as kube's ValidatePodLogOptions bounds them."""
    text = query.get(key)
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise st.bad_request(f'invalid {key}: strconv.ParseInt: parsing "{text}": invalid syntax') from None
    least = 0 if key == "tailLines" else 1
    if value < least:
        message = f"Invalid value: {value}: must be greater than {'or equal to 0' if least == 0 else '0'}"
        raise st.StatusError(422, "Invalid", f'PodLogOptions "{name}" is invalid: {key}: {message}',
                             details={"name": name, "kind": "PodLogOptions",
                                      "causes": [{"reason": "FieldValueInvalid", "message": message,
                                                  "field": key}]})
    return value


def trim(text: str, tail: int | None, limit: int | None) -> str:
    """The last ``tail`` lines of ``text``, then at most ``limit`` bytes of them."""
    if tail is not None:
        lines = text.splitlines(keepends=True)
        text = "".join(lines[len(lines) - tail:]) if tail else ""
    if limit is not None:
        text = text.encode()[:limit].decode("utf-8", errors="ignore")
    return text


def pod_log_response(pod: Mapping[str, Any], query: Mapping[str, str], source: PodLogSource | None,
                     info: Any) -> web.Response:
    """The answer to ``GET pods/<name>/log`` for ``pod`` (already read and authorized)."""
    name = pod["metadata"]["name"]
    tail = _bounded(query, "tailLines", name)
    limit = _bounded(query, "limitBytes", name)
    container = pick_container(pod, query.get("container", ""))
    if not (pod.get("spec") or {}).get("nodeName"):
        return web.Response(body=b"", content_type="text/plain")
    from kinformer.cluster.kubelet import LogError

    try:
        text = source(pod, container, truthy(query.get("previous"))) if source is not None else None
    except LogError as e:
        raise st.bad_request(str(e)) from None
    if text is None:
        raise st.subresource_not_served(info, name, "log")
    return web.Response(body=trim(text, tail, limit).encode(), content_type="text/plain")

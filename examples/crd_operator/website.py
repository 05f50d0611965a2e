"""A CRD operator: each Website (example.com/v1) gets a ConfigMap holding its page, and a Ready condition.

The Website API is defined in Python types only; ``CRD`` is generated from them.

    kinformer crd website:CRD | kubectl apply -f -
    kinformer rbac website:manager --service-account website-system/website-operator
    kinformer run website:manager --leader-elect

``python website.py`` (against ``$KUBECONFIG``: ``kinformer serve`` or a cluster) installs the CRD, creates a
sample Website and runs the operator until it is Ready (``--timeout`` bounds the wait). ``Dockerfile`` and
``deploy/operator.yaml`` run it in a cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import html
from collections.abc import Mapping
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import kinformer as ki
from kinformer.kinds.apimachinery import ObjectMeta
from kinformer.kinds.core_v1 import ConfigMap

WEBSITES = "websites.example.com"


class WebsiteSpec(TypedDict):
    """The desired state of a Website."""

    title: Annotated[str, ki.MinLength(1), ki.MaxLength(63), ki.Doc("The page's title.")]
    replicas: NotRequired[Annotated[int, ki.Minimum(0), ki.Maximum(5), ki.Default(1),
                                    ki.Doc("How many replicas serve the page.")]]
    hostname: NotRequired[Annotated[str, ki.Pattern(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
                                    ki.Rule("size(self) <= 253", message="hostname is at most 253 characters"),
                                    ki.Doc("The DNS name the page is served at.")]]
    theme: NotRequired[Annotated[Literal["light", "dark"], ki.Default("light")]]


class Condition(TypedDict):
    """One observation of the Website's state (metav1.Condition)."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    lastTransitionTime: Annotated[str, ki.Format("date-time")]
    observedGeneration: NotRequired[int]


class WebsiteStatus(TypedDict, total=False):
    """The observed state of a Website."""

    observedGeneration: int
    conditions: Annotated[list[Condition], ki.ListType("map", ("type",))]


class Website(TypedDict, total=False):
    """A Website object as the client returns it (read-only)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: WebsiteSpec
    status: WebsiteStatus


CRD = ki.crd(WebsiteSpec, group="example.com", version="v1", kind="Website", status=WebsiteStatus,
             short_names=["ws"], categories=["examples"],
             printer_columns=[ki.PrinterColumn("Title", ".spec.title"),
                              ki.PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status')])


def page(site: Website) -> ConfigMap:
    """The ConfigMap serving ``site``'s page, owned by it."""
    meta, spec = site["metadata"], site["spec"]
    body = f"<html data-theme={spec.get('theme', 'light')}><title>{html.escape(spec['title'])}</title></html>"
    cm: ConfigMap = {"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": f"{meta['name']}-page", "namespace": meta["namespace"]},
                     "data": {"index.html": body}}
    ki.set_controller_reference(site, cm)  # type: ignore[arg-type]
    return cm


class WebsiteReconciler(ki.ObjectReconciler[Website]):
    """Writes the page, then reports Ready for the generation it wrote."""

    async def reconcile(self, site: Website) -> ki.Result | None:
        meta = site["metadata"]
        wanted = page(site)

        def mutate(cm: dict[str, object]) -> None:
            cm["data"] = wanted["data"]
            cm["metadata"] = wanted["metadata"]

        await ki.create_or_update(self.client, "configmaps", wanted, mutate)
        observed = site.get("status", {})
        status: dict[str, Any] = {"conditions": [dict(c) for c in observed.get("conditions", [])]}
        generation = meta.get("generation", 0)
        changed = ki.set_condition(status, type="Ready", status="True", reason="PageWritten",
                                   message=f"ConfigMap {wanted['metadata']['name']} holds the page",
                                   observed_generation=generation)
        if changed or observed.get("observedGeneration") != generation:
            status["observedGeneration"] = generation
            await self.client.patch_status(WEBSITES, meta["name"], {"status": status}, namespace=meta["namespace"])
        return None


def manager(client: ki.Client) -> ki.Manager:
    """The operator: one controller for Websites, owning their ConfigMaps and writing their status."""
    mgr = ki.Manager(client)
    mgr.controller(WebsiteReconciler()).for_(WEBSITES).owns("configmaps").writes_status()
    return mgr


def has_condition(obj: Mapping[str, Any] | None, type_: str) -> bool:
    """Whether ``obj`` exists and its condition ``type_`` is True."""
    conditions = ((obj or {}).get("status") or {}).get("conditions", [])
    return any(c.get("type") == type_ and c.get("status") == "True" for c in conditions)


async def install_crd(client: ki.Client) -> None:
    """Create (or replace) the CRD and wait until the server serves it."""
    try:
        await client.create("customresourcedefinitions", CRD)
    except ki.AlreadyExists:
        live = await client.get("customresourcedefinitions", CRD["metadata"]["name"])
        await client.replace("customresourcedefinitions", {**CRD, "metadata": {
            **CRD["metadata"], "resourceVersion": live["metadata"]["resourceVersion"]}})
    await ki.wait_for(client, "customresourcedefinitions", CRD["metadata"]["name"],
                      lambda crd: has_condition(crd, "Established"), timeout=30)
    client.invalidate_discovery()


async def demo(client: ki.Client, timeout: float) -> None:
    """Install the CRD, create a Website, run the operator until the Website is Ready."""
    await install_crd(client)
    site = {"apiVersion": "example.com/v1", "kind": "Website", "metadata": {"name": "hello", "namespace": "default"},
            "spec": {"title": "Hello, kinformer"}}
    try:
        await client.create(WEBSITES, site, namespace="default")
    except ki.AlreadyExists:
        pass
    mgr = manager(client)
    running = asyncio.create_task(mgr.run())
    try:
        await ki.wait_for(client, WEBSITES, "hello", lambda w: has_condition(w, "Ready"), namespace="default",
                          timeout=timeout)
        ready = await client.get(Website, "hello", namespace="default")
        cm = await client.get(ConfigMap, "hello-page", namespace="default")
        print(f"website hello: Ready, replicas {ready['spec'].get('replicas')}, page {cm['data']['index.html']!r}")
    finally:
        mgr.stop()
        await running


async def main(timeout: float) -> None:
    async with await ki.Client.from_kubeconfig() as client:
        await demo(client, timeout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    asyncio.run(main(parser.parse_args().timeout))

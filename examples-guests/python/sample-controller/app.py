"""kubernetes/sample-controller as a kubewasm plugin (contract 0.2.2), in Python.

A Foo (`samplecontroller.k8s.io/v1alpha1`, CRD in examples/manifests/50-foo-crd.yaml) owns a
Deployment named `spec.deploymentName` running `spec.replicas` nginx pods; its
`status.availableReplicas` follows the Deployment's. A Deployment of that name the Foo does not
control is left alone, and a Warning Event on the Foo says so.

Subscription 0 (Foo) queues each Foo's own key when its generation changes (its spec: the status
this controller writes does not bring it back); subscription 1 (Deployment) queues the Foo that
controls it on every change (the Foo's status follows the Deployment's), so a Deployment changed
or deleted by hand brings its Foo back to reconcile.

Built with componentize-py, which generates the `wit_world` package from contract 0.2.2's
`reconciler` world (wit/0.2.2, on wit/0.2 and wit/0.2.1) at build time.
"""

from typing import NotRequired, TypedDict

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import plugin, reconcile
from wit_world.imports import types

import kube
from kube import Predicate

PLUGIN_NAME = "sample-controller-python"
FOO = types.Gvk(group="samplecontroller.k8s.io", version="v1alpha1", kind="Foo")
DEPLOYMENT = types.Gvk(group="apps", version="v1", kind="Deployment")
FOOS, DEPLOYMENTS = 0, 1  # subscription handles: positions in init's subscriptions


class FooSpec(TypedDict, total=False):
    deploymentName: str
    replicas: int


class FooStatus(TypedDict):
    availableReplicas: int


class Foo(TypedDict):
    metadata: kube.ObjectMeta
    spec: FooSpec
    status: NotRequired[FooStatus]


class DeploymentSpec(TypedDict, total=False):
    replicas: int


class DeploymentStatus(TypedDict, total=False):
    availableReplicas: int


class Deployment(TypedDict):
    """The fields of apps/v1 Deployment this controller reads; the dict holds them all."""

    metadata: kube.ObjectMeta
    spec: DeploymentSpec
    status: NotRequired[DeploymentStatus]


def new_deployment(foo: Foo, name: str, replicas: int) -> dict:
    """The Deployment a Foo asks for, controlled by it."""
    meta = foo["metadata"]
    labels = {"app": "nginx", "controller": meta["name"]}
    owner: kube.OwnerReference = {
        "apiVersion": "samplecontroller.k8s.io/v1alpha1",
        "kind": "Foo",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": meta["namespace"], "ownerReferences": [owner]},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]},
            },
        },
    }


def sync(foo: Foo) -> None:
    """Brings the Foo's Deployment and status in line with its spec; raises to be retried."""
    meta = foo["metadata"]
    name = foo["spec"].get("deploymentName")
    if not name:
        kube.record_event(FOO, meta, True, "InvalidSpec", "spec.deploymentName is empty")
        return
    replicas = foo["spec"].get("replicas", 1)

    deployment: Deployment | None = kube.get(DEPLOYMENTS, meta["namespace"], name)
    if deployment is None:
        deployment = kube.create(new_deployment(foo, name, replicas))
        kube.record_event(FOO, meta, False, "Synced", f"created Deployment {name}")
    elif not kube.controlled_by(deployment["metadata"], meta["uid"]):
        kube.record_event(
            FOO, meta, True, "ErrResourceExists",
            f"Resource {name!r} already exists and is not managed by Foo",
        )
        return
    elif deployment["spec"].get("replicas") != replicas:
        deployment["spec"]["replicas"] = replicas
        deployment = kube.update(deployment)

    available = deployment.get("status", {}).get("availableReplicas", 0)
    if foo.get("status", {}).get("availableReplicas") != available:
        kube.merge_patch_status(FOO, meta, {"status": {"availableReplicas": available}})


class Plugin(exports.Plugin):
    def init(self, config: str) -> plugin.PluginInfo:
        def subscribe(gvk: types.Gvk, queue: plugin.QueueSpec) -> plugin.Subscription:
            return plugin.Subscription(
                gvk=gvk, namespace=None, label_selector=None, field_selector=None,
                resync_seconds=None, events=False, queue=[queue],
            )

        return plugin.PluginInfo(
            name=PLUGIN_NAME,
            subscriptions=[
                subscribe(FOO, kube.when(types.QueueRule_OwnKey(), Predicate.GENERATION)),
                subscribe(DEPLOYMENT, kube.when(types.QueueRule_ControllingOwner(FOOS))),
            ],
            indexes=[],
        )


class Reconcile(exports.Reconcile):
    def reconcile(self, key: types.Key) -> reconcile.Action:
        try:
            foo: Foo | None = kube.get(FOOS, key.namespace, key.name)
            if foo is not None:  # gone: the garbage collector removes its Deployment
                sync(foo)
        except Exception as error:  # the host logs it and retries the key with backoff
            raise Err(f"{type(error).__name__}: {error}") from error
        return reconcile.Action_Done()


"""allowed-registries: a context-aware validating admission policy (contract 0.3), in Python.

A Pod (created or updated) may run only images from the registries listed in a ConfigMap,
`kubewasm-system/allowed-registries` by default, key `registries`, one entry per line (what an
entry admits: `registries.py`). The ConfigMap is read from the host's shared cache, a cache-only
subscription declared in `init`, never from the API server during a review: a change to it
takes effect once the host's informer has it, without a restart or a reload.

- A denial names each image not admitted, its container, and the allowed list (code 403).
- An update checks only the images the old Pod did not have: a Pod admitted before keeps
  taking updates (labels, finalizers, status) after the list shrinks.
- No ConfigMap, or one without the key: every Pod is denied, saying so. A policy whose job is to
  keep unknown images out fails closed; an empty list would admit nothing either.
- Fails closed (`failurePolicy: Fail`): a review the policy cannot answer (cache not synced,
  a malformed Pod) is denied.
- Namespaces `kube-system` and the ConfigMap's own are left out (a namespace selector on
  `kubernetes.io/metadata.name`): a missing list must not stop the cluster's own Pods or the
  host's.

Config (JSON, optional): `{"name": "allowed-registries", "configMap":
"kubewasm-system/allowed-registries", "key": "registries", "timeoutSeconds": 5}`.
"""

import json
from typing import Optional

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import types

import kube
from registries import admitted, image_name, parse_allowed

CONFIG_MAPS = 0  # the subscription handle: the only subscription
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


class Settings:
    name = "allowed-registries"
    namespace = "kubewasm-system"
    config_map = "allowed-registries"
    key = "registries"
    timeout_seconds = 5


def _configure(text: str) -> None:
    config = json.loads(text) if text.strip() else {}
    if not isinstance(config, dict):
        raise Err("config: not a JSON object")
    name = config.get("name", Settings.name)
    where = config.get("configMap", f"{Settings.namespace}/{Settings.config_map}")
    key = config.get("key", Settings.key)
    timeout = config.get("timeoutSeconds", Settings.timeout_seconds)
    if not isinstance(name, str) or not name:
        raise Err("config: `name` must be a non-empty string")
    if not isinstance(where, str) or where.count("/") != 1 or "" in where.split("/"):
        raise Err("config: `configMap` must be NAMESPACE/NAME")
    if not isinstance(key, str) or not key:
        raise Err("config: `key` must be a non-empty string")
    if not isinstance(timeout, int) or isinstance(timeout, bool) or not 1 <= timeout <= 30:
        raise Err("config: `timeoutSeconds` must be 1 to 30")
    Settings.name, Settings.key, Settings.timeout_seconds = name, key, timeout
    Settings.namespace, Settings.config_map = where.split("/")


class Plugin(exports.Plugin):
    def init(self, config: str) -> types.PluginInfo:
        try:
            _configure(config)
        except ValueError as error:
            raise Err(f"config: {error}") from None
        only_the_list = types.Subscription(
            gvk=types.Gvk(group="", version="v1", kind="ConfigMap"),
            namespace=Settings.namespace,
            label_selector=None,
            field_selector=f"metadata.name={Settings.config_map}",
            resync_seconds=None,
            events=False,
            queue=[],
        )
        return types.PluginInfo(name=Settings.name, subscriptions=[only_the_list], indexes=[])


def _images(pod: Optional[dict]) -> list[tuple[str, str]]:
    """(container name, image) of every container of the Pod, checked to be strings."""
    if pod is None:
        return []
    spec = pod.get("spec", {})
    if not isinstance(spec, dict):
        raise kube.ReviewError("spec is not an object")
    out = []
    for field in CONTAINER_LISTS:
        containers = spec.get(field) or []
        if not isinstance(containers, list):
            raise kube.ReviewError(f"spec.{field} is not a list")
        for container in containers:
            if not isinstance(container, dict):
                raise kube.ReviewError(f"spec.{field} holds a non-object")
            name, image = container.get("name", ""), container.get("image", "")
            if not isinstance(name, str) or not isinstance(image, str):
                raise kube.ReviewError(f"spec.{field}: a name or image is not a string")
            out.append((name, image))
    return out


def _allowed() -> Optional[list[str]]:
    """The allowed entries from the cached ConfigMap, or None when it (or its key) is missing."""
    if not kube.has_synced(CONFIG_MAPS):
        raise kube.ReviewError("the ConfigMap cache has not synced yet")
    found = kube.get(CONFIG_MAPS, Settings.namespace, Settings.config_map)
    data = (found or {}).get("data") or {}
    value = data.get(Settings.key) if isinstance(data, dict) else None
    return parse_allowed(value) if isinstance(value, str) else None


class Admission(kube.Policy):
    def declare(self):
        self.validating = kube.webhook(
            kube.rule(["pods"], operations=("CREATE", "UPDATE")),
            fail=True,
            timeout_seconds=Settings.timeout_seconds,
            namespace_selector=kube.not_in(
                "kubernetes.io/metadata.name", "kube-system", Settings.namespace
            ),
        )
        return super().declare()

    def check(self, review: kube.Review):
        if review.object is None:
            raise kube.ReviewError("no Pod to check")
        already = {image for _, image in _images(review.old_object)}
        new = [(c, image) for c, image in _images(review.object) if image not in already]
        if not new:
            return kube.allow()
        where = f"ConfigMap {Settings.namespace}/{Settings.config_map}"
        allowed = _allowed()
        if allowed is None:
            return kube.deny(
                f"no allowed registries: {where} with key {Settings.key!r} "
                "(one registry prefix per line) does not exist"
            )
        refused = []
        for container, image in new:
            name = image_name(image)
            if name is None or not admitted(name, allowed):
                refused.append(f"image {image!r} (container {container!r})")
        if not refused:
            return kube.allow()
        listed = ", ".join(allowed) if allowed else "none"
        return kube.deny(
            f"not from an allowed registry: {', '.join(refused)}; allowed: {listed} ({where})"
        )

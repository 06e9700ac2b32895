"""configmap-counter (Python): on every ConfigMap event, logs how many ConfigMaps the event's
namespace holds and how many ConfigMaps share the object's `app` label, both answered by the host's
shared cache (`list-objects` and `by-index` on the declared index `app`).

Built with componentize-py, which generates the `wit_world` package from `wit/` at build time.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import cache, log, types

PLUGIN_NAME = "configmap-counter-python"
APP_INDEX = "app"
CONFIGMAPS = types.Gvk(group="", version="v1", kind="ConfigMap")


def cache_error_text(error: types.CacheError) -> str:
    kinds = {
        types.CacheError_NotGranted: "not granted",
        types.CacheError_NotSubscribed: "not subscribed",
        types.CacheError_UnknownIndex: "unknown index",
        types.CacheError_Invalid: "invalid request",
    }
    return f"{kinds.get(type(error), 'cache error')}: {error.value}"


def report(event: str, raw: str) -> None:
    """Logs `event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M` for one object
    (`app=- app_peers=0` when the object has no `app` label); raises `Err(reason)` on failure,
    which the host logs and counts."""
    try:
        metadata = json.loads(raw)["metadata"]
        ns = metadata["namespace"]
        name = metadata["name"]
    except (ValueError, KeyError, TypeError) as error:
        raise Err(f"object without metadata.namespace or metadata.name: {error!r}")
    app = (metadata.get("labels") or {}).get("app")
    try:
        ns_count = len(cache.list_objects(CONFIGMAPS, ns, None))
        app_peers = len(cache.by_index(CONFIGMAPS, APP_INDEX, app)) if app is not None else 0
    except Err as error:
        raise Err(f"cache query failed: {cache_error_text(error.value)}")
    log.log(
        log.Level.INFO,
        f"event={event} ns={ns} name={name} ns_count={ns_count} "
        f"app={app if app is not None else '-'} app_peers={app_peers}",
    )


class Handler(exports.Handler):
    def init(self, config: str) -> types.PluginInfo:
        return types.PluginInfo(
            name=PLUGIN_NAME,
            subscriptions=[
                types.Subscription(
                    gvk=CONFIGMAPS,
                    namespace=None,
                    label_selector=None,
                    field_selector=None,
                    resync_seconds=None,
                    delivery=types.Delivery.EVENTS,
                )
            ],
            indexes=[
                types.IndexDecl(
                    name=APP_INDEX,
                    gvk=CONFIGMAPS,
                    source=types.IndexSource_Label("app"),
                )
            ],
        )

    def on_add(self, gvk: types.Gvk, object: str, in_initial_list: bool) -> None:
        report("add", object)

    def on_update(self, gvk: types.Gvk, old: str, new: str) -> None:
        report("update", new)

    def on_delete(self, gvk: types.Gvk, object: str, final_state_unknown: bool) -> None:
        report("delete", object)

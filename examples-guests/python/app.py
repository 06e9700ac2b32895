"""configmap-counter (Python): on every ConfigMap event, logs how many ConfigMaps the event's
namespace holds and how many ConfigMaps share the object's `app` label.

Both counts are kept from the events themselves, so each event costs O(1) whatever the number of
ConfigMaps: asking the host's cache (`list-objects`, `by-index`) on every event would copy every
matching object into the guest each time, O(n) per event and O(n^2) for the initial list. The
replay of the initial list arrives as adds (a fresh instance starts from zero and counts them),
a delete (also one whose final state is unknown, after a relist) subtracts, and an update moves
the object between `app` counts when its label changed.

Built with componentize-py, which generates the `wit_world` package from `wit/` at build time.
"""

import json
from collections import Counter

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import log, types

PLUGIN_NAME = "configmap-counter-python"
CONFIGMAPS = types.Gvk(group="", version="v1", kind="ConfigMap")

# ConfigMaps per namespace and per `app` label value, from the events seen so far.
per_namespace: Counter = Counter()
per_app: Counter = Counter()


def identity(raw: str) -> tuple[str, str, str | None]:
    """The object's namespace, name and `app` label (None without one); raises `Err(reason)`
    on an object without them, which the host logs and counts."""
    try:
        metadata = json.loads(raw)["metadata"]
        ns = metadata["namespace"]
        name = metadata["name"]
    except (ValueError, KeyError, TypeError) as error:
        raise Err(f"object without metadata.namespace or metadata.name: {error!r}")
    return ns, name, (metadata.get("labels") or {}).get("app")


def count(ns: str, app: str | None, delta: int) -> None:
    """Adds `delta` to the object's counts; a count back at zero is dropped, so the counters
    hold only namespaces and labels that have ConfigMaps."""
    for counter, key in ((per_namespace, ns), (per_app, app)):
        if key is None:
            continue
        counter[key] += delta
        if counter[key] == 0:
            del counter[key]


def report(event: str, ns: str, name: str, app: str | None) -> None:
    """Logs `event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M` for one object
    (`app=- app_peers=0` when the object has no `app` label)."""
    app_peers = per_app[app] if app is not None else 0
    log.log(
        log.Level.INFO,
        f"event={event} ns={ns} name={name} ns_count={per_namespace[ns]} "
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
            indexes=[],
        )

    def on_add(self, gvk: types.Gvk, object: str, in_initial_list: bool) -> None:
        ns, name, app = identity(object)
        count(ns, app, 1)
        report("add", ns, name, app)

    def on_update(self, gvk: types.Gvk, old: str, new: str) -> None:
        old_ns, _, old_app = identity(old)
        ns, name, app = identity(new)
        count(old_ns, old_app, -1)
        count(ns, app, 1)
        report("update", ns, name, app)

    def on_delete(self, gvk: types.Gvk, object: str, final_state_unknown: bool) -> None:
        ns, name, app = identity(object)
        count(ns, app, -1)
        report("delete", ns, name, app)

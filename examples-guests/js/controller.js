// configmap-counter (JavaScript): on every ConfigMap event, logs how many ConfigMaps the event's
// namespace holds and how many ConfigMaps share the object's `app` label.
//
// Both counts are kept from the events themselves, so each event costs O(1) whatever the number
// of ConfigMaps: asking the host's cache (`list-objects`, `by-index`) on every event would copy
// every matching object into the guest each time, O(n) per event and O(n^2) for the initial
// list. The replay of the initial list arrives as adds (a fresh instance starts from zero and
// counts them), a delete (also one whose final state is unknown, after a relist) subtracts, and
// an update moves the object between `app` counts when its label changed.
//
// componentize-js conventions: a handler returns normally for `ok`; throwing an Error makes
// `err(message)`.
import { log } from 'kubewasm:controller/log@0.1.0';

const PLUGIN_NAME = 'configmap-counter-js';
const CONFIGMAPS = { group: '', version: 'v1', kind: 'ConfigMap' };

// ConfigMaps per namespace and per `app` label value, from the events seen so far.
const perNamespace = new Map();
const perApp = new Map();

// The object's namespace, name and `app` label (undefined without one).
function identity(raw) {
  const metadata = JSON.parse(raw).metadata ?? {};
  const { namespace: ns, name } = metadata;
  if (typeof ns !== 'string' || typeof name !== 'string') {
    throw new Error('object without metadata.namespace or metadata.name');
  }
  return { ns, name, app: metadata.labels?.app };
}

// Adds `delta` to the object's counts; a count back at zero is dropped, so the maps hold only
// namespaces and labels that have ConfigMaps.
function count({ ns, app }, delta) {
  for (const [counts, key] of [
    [perNamespace, ns],
    [perApp, app],
  ]) {
    if (key === undefined) continue;
    const next = (counts.get(key) ?? 0) + delta;
    if (next === 0) counts.delete(key);
    else counts.set(key, next);
  }
}

// Logs `event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M` for one object
// (`app=- app_peers=0` when the object has no `app` label).
function report(event, { ns, name, app }) {
  const nsCount = perNamespace.get(ns) ?? 0;
  const appPeers = app === undefined ? 0 : (perApp.get(app) ?? 0);
  log(
    'info',
    `event=${event} ns=${ns} name=${name} ns_count=${nsCount} app=${app ?? '-'} app_peers=${appPeers}`,
  );
}

export const handler = {
  init(_config) {
    return {
      name: PLUGIN_NAME,
      subscriptions: [
        {
          gvk: CONFIGMAPS,
          namespace: undefined,
          labelSelector: undefined,
          fieldSelector: undefined,
          resyncSeconds: undefined,
          delivery: 'events',
        },
      ],
      indexes: [],
    };
  },
  onAdd(_gvk, object, _inInitialList) {
    const added = identity(object);
    count(added, 1);
    report('add', added);
  },
  onUpdate(_gvk, old, object) {
    const before = identity(old);
    const after = identity(object);
    count(before, -1);
    count(after, 1);
    report('update', after);
  },
  onDelete(_gvk, object, _finalStateUnknown) {
    const deleted = identity(object);
    count(deleted, -1);
    report('delete', deleted);
  },
};

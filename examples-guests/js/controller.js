// configmap-counter (JavaScript): on every ConfigMap event, logs how many ConfigMaps the event's
// namespace holds and how many ConfigMaps share the object's `app` label, both answered by the
// host's shared cache (`list-objects` and `by-index` on the declared index `app`).
//
// componentize-js conventions: a handler returns normally for `ok`; throwing an Error makes
// `err(message)`. An import that returns `err(e)` throws an error whose `payload` is `e`
// (variants look like `{ tag: 'not-granted', val: '...' }`).
import { listObjects, byIndex } from 'kubewasm:controller/cache@0.1.0';
import { log } from 'kubewasm:controller/log@0.1.0';

const PLUGIN_NAME = 'configmap-counter-js';
const APP_INDEX = 'app';
const CONFIGMAPS = { group: '', version: 'v1', kind: 'ConfigMap' };

function cacheQuery(what, query) {
  try {
    return query();
  } catch (error) {
    const reason = error && error.payload ? `${error.payload.tag}: ${error.payload.val}` : String(error);
    throw new Error(`${what} failed: ${reason}`);
  }
}

// Logs `event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M` for one object
// (`app=- app_peers=0` when the object has no `app` label).
function report(event, raw) {
  const metadata = JSON.parse(raw).metadata ?? {};
  const { namespace: ns, name } = metadata;
  if (typeof ns !== 'string' || typeof name !== 'string') {
    throw new Error('object without metadata.namespace or metadata.name');
  }
  const app = metadata.labels?.app;
  const nsCount = cacheQuery('list-objects', () => listObjects(CONFIGMAPS, ns, undefined)).length;
  const appPeers =
    app === undefined ? 0 : cacheQuery('by-index', () => byIndex(CONFIGMAPS, APP_INDEX, app)).length;
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
      indexes: [{ name: APP_INDEX, gvk: CONFIGMAPS, source: { tag: 'label', val: 'app' } }],
    };
  },
  onAdd(_gvk, object, _inInitialList) {
    report('add', object);
  },
  onUpdate(_gvk, _old, object) {
    report('update', object);
  },
  onDelete(_gvk, object, _finalStateUnknown) {
    report('delete', object);
  },
};

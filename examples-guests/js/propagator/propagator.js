// configmap-propagator (JavaScript, contract 0.2): copies every ConfigMap labelled
// `kubewasm.io/propagate=true` into every other namespace and keeps the copies equal to it.
//
// A copy has the source's name, data and binaryData, the label `kubewasm.io/propagated=true`
// and the annotation `kubewasm.io/propagated-from: NAMESPACE/NAME`. It has no ownerReference:
// an owner in another namespace is invalid, so the copies are found through an index on that
// annotation instead, and deleted by the propagator itself when the source goes away or loses
// its label.
//
// The workqueue holds sources only. The guest queues them from events (not by a queue rule):
// a source's own changes queue it, a change to a copy queues the source it names, and a new
// namespace queues every source. One reconcile brings every copy of one source in line,
// reading everything from the cache and writing only what differs, so a settled source costs
// no write at all.
import { DONE, GuestError, Resource, guarded, log, requeueAfter } from './kube.js';

const PLUGIN_NAME = 'configmap-propagator-js';
const PROPAGATE = 'kubewasm.io/propagate';
const COPY_LABEL = 'kubewasm.io/propagated';
const SOURCE_ANNOTATION = 'kubewasm.io/propagated-from';
/** The index of copies by their source, `NAMESPACE/NAME`. */
const BY_SOURCE = 'propagated-from';
/** How long a copy blocked by someone else's ConfigMap of the same name waits to be tried again. */
const BLOCKED_RETRY_MS = 60_000;

const configMaps = new Resource(0, { group: '', version: 'v1', kind: 'ConfigMap' });
const namespaces = new Resource(1, { group: '', version: 'v1', kind: 'Namespace' });

/** The source a ConfigMap is a copy of (`NAMESPACE/NAME`), or undefined. */
const copiedFrom = (cm) => cm.metadata.annotations?.[SOURCE_ANNOTATION];

/** A ConfigMap to propagate: labelled, alive, and not itself a copy. */
const isSource = (cm) =>
  cm.metadata.labels?.[PROPAGATE] === 'true' && copiedFrom(cm) === undefined && !cm.metadata.deletionTimestamp;

/** Which source keys a change to `cm` concerns: its own if it is (or was) a source, its source's if it is a copy. */
function queueFor(cm) {
  const from = copiedFrom(cm);
  if (from !== undefined) {
    const slash = from.indexOf('/');
    if (slash > 0) configMaps.enqueue(from.slice(0, slash), from.slice(slash + 1));
  } else if (cm.metadata.labels?.[PROPAGATE] === 'true') {
    configMaps.enqueue(cm.metadata.namespace, cm.metadata.name);
  }
}

const sameMap = (a = {}, b = {}) => {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
};

/** One source ConfigMap and what its copies must look like. */
class Propagation {
  constructor(source) {
    this.source = source;
    this.namespace = source.metadata.namespace;
    this.name = source.metadata.name;
    this.ref = `${this.namespace}/${this.name}`;
  }

  /** Whether a copy belongs in `namespace`: any live namespace but the source's own. */
  wantedIn(namespace) {
    if (namespace === this.namespace) return false;
    const ns = namespaces.get(undefined, namespace);
    return ns !== undefined && !ns.metadata.deletionTimestamp;
  }

  /** The copy for `namespace`; with `resourceVersion`, as the replacement of the current one. */
  copyIn(namespace, resourceVersion) {
    const { data, binaryData } = this.source;
    return {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: this.name,
        namespace,
        resourceVersion,
        labels: { [COPY_LABEL]: 'true' },
        annotations: { [SOURCE_ANNOTATION]: this.ref },
      },
      data,
      binaryData,
    };
  }

  /** Whether `copy` already carries the source's content and the copy's marks. */
  isCurrent(copy) {
    return (
      sameMap(copy.data, this.source.data) &&
      sameMap(copy.binaryData, this.source.binaryData) &&
      copy.metadata.labels?.[COPY_LABEL] === 'true'
    );
  }
}

/** Runs each write of a reconcile, keeping the failures to report them all at the end. */
class Writes {
  failures = [];
  written = 0;

  /** `write` returns false when there was nothing to do (a delete of an object already gone). */
  attempt(write) {
    try {
      if (write() !== false) this.written++;
    } catch (e) {
      if (e.reason === undefined) throw e;
      this.failures.push(e.message);
    }
  }
}

/** Brings every copy of the source `namespace/name` in line with it (or removes them all). */
function propagate({ namespace, name }) {
  const found = configMaps.get(namespace, name);
  const propagation = found !== undefined && isSource(found) ? new Propagation(found) : undefined;
  const writes = new Writes();
  let blocked = 0;

  if (propagation !== undefined) {
    for (const ns of namespaces.list()) {
      const target = ns.metadata.name;
      if (!propagation.wantedIn(target)) continue;
      const copy = configMaps.get(target, name);
      if (copy === undefined) {
        writes.attempt(() => configMaps.create(propagation.copyIn(target)));
      } else if (copiedFrom(copy) !== propagation.ref) {
        blocked++;
        configMaps.recordEvent(
          found,
          'warning',
          'CopyBlocked',
          `${target}/${name} exists and is not a copy of ${propagation.ref}: left alone`,
        );
      } else if (!propagation.isCurrent(copy)) {
        writes.attempt(() => configMaps.update(propagation.copyIn(target, copy.metadata.resourceVersion)));
      }
    }
  }

  // Copies the source no longer wants: all of them without a source, else those in namespaces
  // that are gone, terminating, or the source's own.
  for (const copy of configMaps.byIndex(BY_SOURCE, `${namespace}/${name}`)) {
    const { namespace: where, uid } = copy.metadata;
    if (propagation?.wantedIn(where)) continue;
    writes.attempt(() => configMaps.delete(where, name, { uid }));
  }

  log.info(
    `reconciled ${namespace}/${name}: ${propagation ? 'source' : 'no source'}, ` +
      `${writes.written} written, ${writes.failures.length} failed, ${blocked} blocked`,
  );
  if (writes.failures.length > 0) {
    // The host retries the key with its exponential backoff.
    throw new GuestError(writes.failures.join('; '));
  }
  return blocked > 0 ? requeueAfter(BLOCKED_RETRY_MS) : DONE;
}

/** Queues every source: a namespace appeared (or went away), so every source has work. */
function queueEverySource() {
  for (const key of configMaps.keys({ labelSelector: `${PROPAGATE}=true` })) {
    const slash = key.indexOf('/');
    configMaps.enqueue(key.slice(0, slash), key.slice(slash + 1));
  }
}

export const plugin = {
  init: guarded((_config) => ({
    name: PLUGIN_NAME,
    subscriptions: [configMaps.subscription({ events: true }), namespaces.subscription({ events: true })],
    indexes: [configMaps.index(BY_SOURCE, { tag: 'annotation', val: SOURCE_ANNOTATION })],
  })),
};

export const handler = {
  onAdd: guarded((subscription, object, _inInitialList) => {
    if (subscription === configMaps.handle) queueFor(JSON.parse(object));
    else queueEverySource();
  }),
  onUpdate: guarded((subscription, old, object) => {
    // Namespaces: a namespace that starts terminating needs nothing (its copies go with it).
    if (subscription !== configMaps.handle) return;
    // Both states: a source that lost its label is queued by its old state, and cleaned up.
    queueFor(JSON.parse(old));
    queueFor(JSON.parse(object));
  }),
  onDelete: guarded((subscription, object, _finalStateUnknown) => {
    if (subscription === configMaps.handle) queueFor(JSON.parse(object));
    else queueEverySource();
  }),
};

export const reconcile = { reconcile: guarded(propagate) };

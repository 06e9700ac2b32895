// A small typed layer over the kubewasm 0.2 imports, for JavaScript guests: objects cross as
// plain objects (not JSON text), paged cache answers are iterators, and every refusal of the API
// server or the host is an `ApiError` whose `reason` says which one. `Resource` is one
// subscribed resource: its declaration (`subscription`, `index` with `byLabel`, `byAnnotation`,
// `byField`, `byOwnerUid`), its cache (`get`, `list`, `keys`, `count`, `byIndex`,
// `indexValues`), its queue (`enqueue`, `enqueueAfter`; `DONE` and `requeueAfter` answer
// `reconcile`) and its writes (`create`, `update`, `updateStatus`, `mergePatch`, `jsonPatch`,
// their `*Status` forms, `apply`, `delete`, `recordEvent`). For contract 0.3's
// admission (world `admission-policy`): `policy`, the `admission` export, and the records of
// `admission.js` (`webhook`, `rule`, `allow`, `deny`, `mutated`).
//
// Types are JSDoc typedefs: editors and `tsc --checkJs` check them, componentize-js ignores them.
import * as cache from 'kubewasm:controller/cache@0.2.0';
import * as client from 'kubewasm:controller/client@0.2.0';
import * as queue from 'kubewasm:controller/queue@0.2.0';
import { log as hostLog } from 'kubewasm:controller/log@0.2.0';

import { review } from './admission.js';
import { applyPatch, gvkOf, jsonPatch, mergePatch, millis } from './patch.js';

/**
 * @typedef {{ group: string, version: string, kind: string }} Gvk
 * @typedef {{
 *   name: string, namespace?: string, uid?: string, resourceVersion?: string,
 *   labels?: Record<string, string>, annotations?: Record<string, string>,
 *   deletionTimestamp?: string,
 * }} ObjectMeta
 * @typedef {{ apiVersion: string, kind: string, metadata: ObjectMeta }} KubeObject
 * @typedef {KubeObject & {
 *   data?: Record<string, string>, binaryData?: Record<string, string>, immutable?: boolean,
 * }} ConfigMap
 * @typedef {{ subscription: number, namespace: string | undefined, name: string }} Key
 * @typedef {{ tag: 'done' } | { tag: 'requeue-after', val: number }} Action
 */

// Queue rules for `subscription({ queue })`, with 0.2.2's predicates (`when`).
export { PREDICATES, controllingOwner, ownKey, when } from './rules.js';
// Index sources for `Resource.index`.
export { byAnnotation, byField, byLabel, byOwnerUid } from './rules.js';
// Patch bodies and the delay check, for code calling `client` or `queue` itself.
export { JSON_PATCH_OPS, applyPatch, gvkOf, jsonPatch, mergePatch, millis } from './patch.js';
// Contract 0.3's admission records and the checked review.
export { ReviewError, allow, deny, mutated, notIn, review, rule, webhook } from './admission.js';

/** What `reconcile` returns when the key is settled. */
export const DONE = Object.freeze({ tag: 'done' });

/** @returns {Action} reconcile the key again after `ms` milliseconds (rounded up). */
export const requeueAfter = (ms) => ({ tag: 'requeue-after', val: millis(ms) });

/** Guest log lines, by level, into the host's log. */
export const log = Object.fromEntries(
  ['trace', 'debug', 'info', 'warn', 'error'].map((level) => [level, (message) => hostLog(level, message)]),
);

/** A refusal of a write: `reason` is the WIT `api-error` case (`conflict`, `not-found`, ...). */
export class ApiError extends Error {
  /** @param {string} what the call, for the message @param {{ tag: string, val: any }} error */
  constructor(what, error) {
    const detail = typeof error.val === 'string' ? error.val : (error.val?.message ?? '');
    super(`${what}: ${error.tag}${detail ? `: ${detail}` : ''}`);
    this.reason = error.tag;
    /** The HTTP status of a `server-error`, else undefined. */
    this.code = error.tag === 'server-error' ? error.val.code : undefined;
  }
}

/**
 * What `reconcile` (or a handler) throws to return `err(message)`: componentize-js returns the
 * `payload` of a thrown value as the error; a thrown plain `Error` has none and traps instead.
 */
export class GuestError extends Error {
  constructor(message) {
    super(message);
    this.payload = message;
  }
}

/**
 * Wraps an exported function so that whatever it throws returns `err(text)`: a `GuestError` as
 * it is, an import's error (its `payload`) or any other exception described in words.
 */
export const guarded =
  (f) =>
  (...args) => {
    try {
      return f(...args);
    } catch (e) {
      if (e instanceof GuestError) throw e;
      const payload = e?.payload;
      const text =
        payload === undefined
          ? String(e?.message ?? e)
          : `${payload.tag ?? 'error'}: ${JSON.stringify(payload.val ?? payload)}`;
      throw new GuestError(text);
    }
  };

/**
 * The `admission` export of a policy (contract 0.3): `validating` / `mutating` are `webhook`s (or
 * functions returning one, called by `declare` after `init`), `check(review)` answers the
 * validating webhook with a verdict (`allow`, `deny`), `change(review)` the mutating one with a
 * mutation (`mutated`). Each gets the review with its objects parsed and checked (`review`);
 * whatever they throw answers `err` with its text, and the webhook's failure policy decides.
 */
export function policy({ validating, mutating, check, change }) {
  const declared = (w) => (typeof w === 'function' ? w() : w);
  return {
    declare: guarded(() => ({ validating: declared(validating), mutating: declared(mutating) })),
    validate: guarded((request) => {
      if (check === undefined) throw new GuestError('this policy declares no validating webhook');
      return check(review(request));
    }),
    mutate: guarded((request) => {
      if (change === undefined) throw new GuestError('this policy declares no mutating webhook');
      return change(review(request));
    }),
  };
}

/**
 * Runs an import call of `client`, turning the error it throws for `err(e)` into an ApiError;
 * for code calling the bindings itself.
 */
export function call(what, f) {
  try {
    return f();
  } catch (e) {
    if (e?.payload?.tag !== undefined) throw new ApiError(what, e.payload);
    throw e;
  }
}

/** Pages through a paged cache query, `query(page)`, yielding its items. */
function* paged(query) {
  let continueToken;
  do {
    const page = query({ limit: 0, continueToken });
    yield* page.objects ?? page.items;
    continueToken = page.continueToken;
  } while (continueToken !== undefined);
}

const ref = (gvk, namespace, name) => ({ gvk, namespace, name });

/**
 * One subscribed resource: its declaration in `init`, its cache, its keys and its writes.
 * `handle` is the subscription's position in `plugin-info.subscriptions`.
 */
export class Resource {
  /** @param {number} handle @param {Gvk} gvk */
  constructor(handle, gvk) {
    this.handle = handle;
    this.gvk = gvk;
  }

  /**
   * The `subscription` record for `init`; every option defaults to "none" / no events. `queue`
   * holds rules (`ownKey()`, `controllingOwner(h)`), or in a 0.2.2 world rules with predicates
   * (`when(ownKey(), 'generation')`).
   */
  subscription({ namespace, labelSelector, fieldSelector, resyncSeconds, events = false, queue = [] } = {}) {
    return { gvk: this.gvk, namespace, labelSelector, fieldSelector, resyncSeconds, events, queue };
  }

  /**
   * An index on this resource for `init`'s `indexes`: `source` is `byLabel(key)`,
   * `byAnnotation(key)`, `byField(path)` or `byOwnerUid()`; `byIndex(name, value)` reads it.
   */
  index(name, source) {
    if (typeof name !== 'string' || name === '') throw new TypeError('an index needs a name');
    if (typeof source?.tag !== 'string') throw new TypeError(`index ${name}: the source is no index source`);
    return { subscription: this.handle, name, source };
  }

  /** @returns {KubeObject | undefined} the cached object. */
  get(namespace, name) {
    const json = cache.get(this.handle, namespace, name);
    return json === undefined ? undefined : JSON.parse(json);
  }

  /** @returns {Generator<KubeObject>} the cached objects, optionally of one namespace / selector. */
  *list({ namespace, labelSelector } = {}) {
    for (const json of paged((page) => cache.listObjects(this.handle, namespace, labelSelector, page))) {
      yield JSON.parse(json);
    }
  }

  /** @returns {Generator<string>} the keys (`namespace/name`) of the same selection as `list`. */
  keys({ namespace, labelSelector } = {}) {
    return paged((page) => cache.listKeys(this.handle, namespace, labelSelector, page));
  }

  /** @returns {number} how many objects `list` would yield. */
  count({ namespace, labelSelector } = {}) {
    return cache.count(this.handle, namespace, labelSelector);
  }

  /** @returns {Generator<KubeObject>} the cached objects whose index `index` holds `value`. */
  *byIndex(index, value) {
    for (const json of paged((page) => cache.byIndex(this.handle, index, value, page))) {
      yield JSON.parse(json);
    }
  }

  /** @returns {Generator<string>} the values the index `index` files objects under. */
  indexValues(index) {
    return paged((page) => cache.indexValues(this.handle, index, page));
  }

  /** @returns {Key} */
  key(namespace, name) {
    return { subscription: this.handle, namespace, name };
  }

  /** Queues the object's key for `reconcile` (queued twice before it runs, it runs once). */
  enqueue(namespace, name) {
    queue.add(this.key(namespace, name));
  }

  /** Queues the object's key after `ms` milliseconds (a key waiting sooner keeps its time). */
  enqueueAfter(namespace, name, ms) {
    queue.addAfter(this.key(namespace, name), millis(ms));
  }

  /** Creates `object` (of this resource). @returns {KubeObject} the created object. */
  create(object) {
    const { namespace, name } = object.metadata;
    return JSON.parse(call(`create ${namespace}/${name}`, () => client.create(JSON.stringify(object))));
  }

  /** Replaces `object`; its metadata.resourceVersion is the precondition. */
  update(object) {
    const { namespace, name } = object.metadata;
    return JSON.parse(call(`update ${namespace}/${name}`, () => client.update(JSON.stringify(object))));
  }

  /** Replaces the status of `object`; its metadata.resourceVersion is the precondition. */
  updateStatus(object) {
    const { namespace, name } = object.metadata;
    return JSON.parse(call(`update status ${namespace}/${name}`, () => client.updateStatus(JSON.stringify(object))));
  }

  /** @returns {KubeObject} the object after `body` (a `patch-body`) patched it or its status. */
  #patch(namespace, name, body, status) {
    const what = `patch${status ? ' status' : ''} ${namespace}/${name}`;
    const target = ref(this.gvk, namespace, name);
    return JSON.parse(call(what, () => (status ? client.patchStatus : client.patch)(target, body)));
  }

  /** Applies a JSON merge patch (`mergePatch`) to the object. @returns {KubeObject} */
  mergePatch(namespace, name, patch) {
    return this.#patch(namespace, name, mergePatch(patch), false);
  }

  /** Applies a JSON merge patch to the object's status subresource. @returns {KubeObject} */
  mergePatchStatus(namespace, name, patch) {
    return this.#patch(namespace, name, mergePatch(patch), true);
  }

  /** Applies a JSON patch (`jsonPatch`: RFC 6902 operations) to the object. @returns {KubeObject} */
  jsonPatch(namespace, name, operations) {
    return this.#patch(namespace, name, jsonPatch(operations), false);
  }

  /** Applies a JSON patch to the object's status subresource. @returns {KubeObject} */
  jsonPatchStatus(namespace, name, operations) {
    return this.#patch(namespace, name, jsonPatch(operations), true);
  }

  /**
   * Server-side apply of `object` (of this resource) as the plugin's field manager; `force`
   * takes over fields another manager owns instead of answering `conflict`.
   * @returns {KubeObject}
   */
  apply(object, { force = false } = {}) {
    const gvk = gvkOf(object);
    if (gvk.group !== this.gvk.group || gvk.kind !== this.gvk.kind) {
      throw new TypeError(`apply: a ${gvk.kind} of group '${gvk.group}' is not a ${this.gvk.kind}`);
    }
    const { namespace, name } = object.metadata ?? {};
    return this.#patch(namespace, name, applyPatch(object, force), false);
  }

  /**
   * Deletes the object, only if it still has `uid` when one is given; `propagation` is
   * `'background'`, `'foreground'` or `'orphan'` (undefined: the resource's default).
   * @returns {boolean} whether it was there to delete.
   */
  delete(namespace, name, { uid, propagation } = {}) {
    try {
      call(`delete ${namespace}/${name}`, () =>
        client.delete(ref(this.gvk, namespace, name), { uid, resourceVersion: undefined, propagation }),
      );
      return true;
    } catch (e) {
      if (e instanceof ApiError && e.reason === 'not-found') return false;
      throw e;
    }
  }

  /** Records an Event about `object` (needs a write grant for `Event`); refusals are logged. */
  recordEvent(object, type, reason, message) {
    const { namespace, name, uid } = object.metadata;
    try {
      call('record-event', () =>
        client.recordEvent({ regarding: ref(this.gvk, namespace, name), uid, eventType: type, reason, message }),
      );
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      log.warn(`event ${reason} about ${namespace}/${name} not recorded: ${e.message}`);
    }
  }
}

// A small typed layer over the kubewasm 0.2 imports, for JavaScript guests: objects cross as
// plain objects (not JSON text), paged cache answers are iterators, and every refusal of the API
// server or the host is an `ApiError` whose `reason` says which one. For contract 0.3's
// admission (world `admission-policy`): `policy`, the `admission` export, and the records of
// `admission.js` (`webhook`, `rule`, `allow`, `deny`, `mutated`).
//
// Types are JSDoc typedefs: editors and `tsc --checkJs` check them, componentize-js ignores them.
import * as cache from 'kubewasm:controller/cache@0.2.0';
import * as client from 'kubewasm:controller/client@0.2.0';
import * as queue from 'kubewasm:controller/queue@0.2.0';
import { log as hostLog } from 'kubewasm:controller/log@0.2.0';

import { review } from './admission.js';

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
// Contract 0.3's admission records and the checked review.
export { ReviewError, allow, deny, mutated, notIn, review, rule, webhook } from './admission.js';

/** What `reconcile` returns when the key is settled. */
export const DONE = Object.freeze({ tag: 'done' });

/** @returns {Action} reconcile the key again after `ms` milliseconds. */
export const requeueAfter = (ms) => ({ tag: 'requeue-after', val: ms });

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

/** Runs an import call, turning the error it throws for `err(e)` into an ApiError. */
function call(what, f) {
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

  /** An index on this resource for `init`: `source` is an `index-source` variant. */
  index(name, source) {
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

  /** @returns {Generator<KubeObject>} the cached objects whose index `index` holds `value`. */
  *byIndex(index, value) {
    for (const json of paged((page) => cache.byIndex(this.handle, index, value, page))) {
      yield JSON.parse(json);
    }
  }

  /** @returns {Key} */
  key(namespace, name) {
    return { subscription: this.handle, namespace, name };
  }

  /** Queues the object's key for `reconcile`. */
  enqueue(namespace, name) {
    queue.add(this.key(namespace, name));
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

  /**
   * Deletes the object, only if it still has `uid` when one is given.
   * @returns {boolean} whether it was there to delete.
   */
  delete(namespace, name, { uid } = {}) {
    try {
      call(`delete ${namespace}/${name}`, () =>
        client.delete(ref(this.gvk, namespace, name), { uid, resourceVersion: undefined, propagation: undefined }),
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

// Queue rules and index sources for `init`'s declaration, as componentize-js lowers them:
// 0.2.0's `queue-rule` and `index-source` (variants: `{ tag, val }`) and 0.2.2's `queue-spec`, a
// rule with predicates (enum cases as strings). Plain data and no imports, so node tests it as
// it is (rules_test.js).

/**
 * @typedef {{ tag: 'own-key' } | { tag: 'controlling-owner', val: number }} QueueRule
 * @typedef {'resource-version' | 'generation' | 'labels' | 'annotations'} Predicate
 * @typedef {{ rule: QueueRule, when: Predicate[] }} QueueSpec
 */

/** The predicates of contract 0.2.2, by the names its WIT gives them. */
export const PREDICATES = Object.freeze(['resource-version', 'generation', 'labels', 'annotations']);

/** @returns {QueueRule} the object's own key (controller-runtime's `For`). */
export const ownKey = () => ({ tag: 'own-key' });

/**
 * @param {number} owner the handle of the owners' subscription
 * @returns {QueueRule} the key of the object's controlling owner (controller-runtime's `Owns`).
 */
export const controllingOwner = (owner) => ({ tag: 'controlling-owner', val: owner });

/**
 * `rule` queueing on the updates that change any of `predicates`; with none, on every update
 * (resyncs included). Adds and deletes always queue. `when(ownKey(), 'generation')` leaves out
 * the controller's own status writes. Contract 0.2.2 only: a 0.2.0 subscription's `queue` takes
 * bare rules. A name that is no predicate throws here, not as a trap inside the host's call.
 * @param {QueueRule} rule @param {...Predicate} predicates @returns {QueueSpec}
 */
export function when(rule, ...predicates) {
  for (const predicate of predicates) {
    if (!PREDICATES.includes(predicate)) {
      throw new TypeError(`no predicate ${JSON.stringify(predicate)}: one of ${PREDICATES.join(', ')}`);
    }
  }
  return { rule, when: predicates };
}

/** @param {string} what @param {unknown} text */
function named(what, text) {
  if (typeof text !== 'string' || text === '') throw new TypeError(`an index by ${what} needs a non-empty ${what}`);
  return text;
}

/** An index source for `Resource.index`: the value of the label `key`. */
export const byLabel = (key) => ({ tag: 'label', val: named('label', key) });

/** An index source for `Resource.index`: the value of the annotation `key`. */
export const byAnnotation = (key) => ({ tag: 'annotation', val: named('annotation', key) });

/**
 * An index source for `Resource.index`: the values at a dotted field path (`spec.nodeName`). A
 * path crosses lists: `spec.containers.image` files a Pod under each container's image, and a
 * list of strings, numbers or bools is filed under each element.
 */
export const byField = (path) => ({ tag: 'field', val: named('field', path) });

/** An index source for `Resource.index`: the UID of every owner reference. */
export const byOwnerUid = () => ({ tag: 'owner-uid' });

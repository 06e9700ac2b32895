// Queue rules for `init`'s subscriptions, as componentize-js lowers them: 0.2.0's `queue-rule`
// (a variant: `{ tag, val }`) and 0.2.2's `queue-spec`, a rule with predicates (enum cases as
// strings). Plain data and no imports, so node tests it as it is (rules_test.js).

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

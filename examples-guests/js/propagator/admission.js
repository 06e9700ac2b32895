// Contract 0.3's admission records, as componentize-js lowers them (records as objects with
// camelCase fields, enum cases as strings, `option` as a value or undefined), and the checked
// reading of a review's objects. Plain data and no imports, so node tests it as it is
// (admission_test.js); `kube.js` re-exports it and adds `policy`, the `admission` export.

/**
 * @typedef {'create' | 'update' | 'delete' | 'connect'} Operation
 * @typedef {{ allowed: boolean, code: number, message: string, warnings: string[] }} Verdict
 * @typedef {{ verdict: Verdict, object: string | undefined }} Mutation
 * @typedef {{ operations: Operation[], apiGroups: string[], apiVersions: string[],
 *   resources: string[], scope: 'cluster' | 'namespaced' | 'any' }} Rule
 * @typedef {{ key: string, operator: 'in' | 'not-in' | 'exists' | 'does-not-exist',
 *   values: string[] }} SelectorRequirement
 * @typedef {{ matchLabels: [string, string][], matchExpressions: SelectorRequirement[] }} LabelSelector
 * @typedef {{ rules: Rule[], failurePolicy: 'fail' | 'ignore', sideEffects: 'none' | 'none-on-dry-run',
 *   timeoutSeconds: number, namespaceSelector: LabelSelector | undefined,
 *   objectSelector: LabelSelector | undefined }} Webhook
 */

export const OPERATIONS = Object.freeze(['create', 'update', 'delete', 'connect']);
const SCOPES = ['cluster', 'namespaced', 'any'];

/** A review the policy cannot answer: the call answers `err`, the failure policy decides. */
export class ReviewError extends Error {}

/** @returns {Verdict} allowed, with warnings for the user (kubectl prints them). */
export const allow = (...warnings) => ({ allowed: true, code: 0, message: '', warnings });

/** @returns {Verdict} denied with `message`, reported with HTTP `code`. */
export const deny = (message, { code = 403, warnings = [] } = {}) => ({ allowed: false, code, message, warnings });

/** @returns {Mutation} allowed, stored as `object` (undefined: unchanged). */
export const mutated = (object, ...warnings) => ({
  verdict: allow(...warnings),
  object: object === undefined ? undefined : JSON.stringify(object),
});

/**
 * Which requests a webhook is sent: `rule(['pods'])` is creates and updates of core v1 Pods. A
 * name that is no operation or scope throws here, not as a refused declaration.
 * @returns {Rule}
 */
export function rule(resources, { operations = ['create', 'update'], groups = [''], versions = ['v1'], scope = 'namespaced' } = {}) {
  for (const op of operations) {
    if (!OPERATIONS.includes(op)) throw new TypeError(`unknown operation ${JSON.stringify(op)}`);
  }
  if (!SCOPES.includes(scope)) throw new TypeError(`unknown scope ${JSON.stringify(scope)}`);
  return { operations, apiGroups: groups, apiVersions: versions, resources, scope };
}

/** @returns {LabelSelector} objects (or namespaces) whose label `key` is none of `values`, or absent. */
export const notIn = (key, ...values) => ({ matchLabels: [], matchExpressions: [{ key, operator: 'not-in', values }] });

/**
 * A webhook declaration: `fail` (default true) denies a review the policy cannot answer, false
 * allows it; `timeoutSeconds` is the API server's (1 to 30); no side effects.
 * @returns {Webhook}
 */
export const webhook = (rules, { fail = true, timeoutSeconds = 10, namespaceSelector, objectSelector } = {}) => ({
  rules,
  failurePolicy: fail ? 'fail' : 'ignore',
  sideEffects: 'none',
  timeoutSeconds,
  namespaceSelector,
  objectSelector,
});

function parseObject(text, what) {
  if (text === undefined) return undefined;
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ReviewError(`the ${what} is not JSON: ${e.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ReviewError(`the ${what} is not a JSON object`);
  }
  return value;
}

/**
 * The host's `admission-request` with its objects parsed and checked to be JSON objects:
 * `object` (undefined for a delete) and `oldObject` (undefined for a create).
 */
export function review(request) {
  return {
    ...request,
    object: parseObject(request.object, 'object'),
    oldObject: parseObject(request.oldObject, 'old object'),
  };
}

// The bodies of 0.2.0's `client.patch` (`patch-body`, as componentize-js lowers the variant:
// `{ tag, val }`), the delays of `queue.add-after` and `reconcile`'s `requeue-after`, and the
// resource an object names. Plain data and no imports, so node tests it as it is
// (patch_test.js); kube.js's `Resource` methods use it.

/** The operations of a JSON patch (RFC 6902). */
export const JSON_PATCH_OPS = Object.freeze(['add', 'remove', 'replace', 'move', 'copy', 'test']);

const isPlainObject = (value) =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * A JSON merge patch (RFC 7386): keys set are replaced, keys set to `null` removed, the rest
 * kept; lists are replaced whole.
 * @param {Record<string, unknown>} patch
 */
export function mergePatch(patch) {
  if (!isPlainObject(patch)) throw new TypeError('a merge patch is an object');
  return { tag: 'merge', val: JSON.stringify(patch) };
}

/**
 * A JSON patch (RFC 6902), each operation checked for what the server would refuse anyway so
 * the mistake is named here: its `op`, a `path` that is empty or starts with `/`, a `value` for
 * add, replace and test, a `from` for move and copy. A `test` operation makes the patch
 * conditional: the server refuses all of it (`invalid`) when the test fails.
 * @param {Array<{ op: string, path: string, value?: unknown, from?: string }>} operations
 */
export function jsonPatch(operations) {
  if (!Array.isArray(operations)) throw new TypeError('a JSON patch is a list of operations');
  operations.forEach((operation, i) => {
    const { op, path } = operation ?? {};
    if (!JSON_PATCH_OPS.includes(op)) {
      throw new TypeError(`JSON patch operation ${i}: op ${JSON.stringify(op)} is not one of ${JSON_PATCH_OPS.join(', ')}`);
    }
    if (typeof path !== 'string' || !(path === '' || path.startsWith('/'))) {
      throw new TypeError(`JSON patch operation ${i}: path ${JSON.stringify(path)} is not a JSON pointer`);
    }
    if (['add', 'replace', 'test'].includes(op) && !Object.hasOwn(operation, 'value')) {
      throw new TypeError(`JSON patch operation ${i}: ${op} needs a value`);
    }
    if (['move', 'copy'].includes(op) && typeof operation.from !== 'string') {
      throw new TypeError(`JSON patch operation ${i}: ${op} needs a \`from\` pointer`);
    }
  });
  return { tag: 'json', val: JSON.stringify(operations) };
}

/**
 * Server-side apply of `object`, as the plugin's field manager; `force` takes over fields
 * another manager owns instead of answering `conflict`.
 */
export function applyPatch(object, force = false) {
  if (!isPlainObject(object) || typeof object.metadata?.name !== 'string') {
    throw new TypeError('an applied object needs metadata.name');
  }
  return { tag: 'apply', val: { object: JSON.stringify(object), force: Boolean(force) } };
}

/** The contract's delays are u32 milliseconds: about 49.7 days at most. */
const MAX_MS = 0xffff_ffff;

/**
 * `ms` as the contract's whole milliseconds (rounded up), refused when it is not a number of
 * them, so a mistake throws here instead of trapping inside the host's call.
 */
export function millis(ms) {
  if (typeof ms !== 'number' || Number.isNaN(ms) || ms < 0) {
    throw new RangeError(`${String(ms)} is not a delay in milliseconds`);
  }
  const whole = Math.ceil(ms);
  if (whole > MAX_MS) throw new RangeError(`a delay of ${ms} ms is longer than the contract's 49.7 days`);
  return whole;
}

/**
 * The group, version and kind an object names (`apiVersion` `apps/v1`: group `apps`; `v1`: the
 * core group, `''`).
 */
export function gvkOf(object) {
  const { apiVersion, kind } = object ?? {};
  if (typeof apiVersion !== 'string' || typeof kind !== 'string' || !apiVersion || !kind) {
    throw new TypeError('the object names no apiVersion and kind');
  }
  const slash = apiVersion.lastIndexOf('/');
  return slash < 0
    ? { group: '', version: apiVersion, kind }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind };
}

// default-requests (JavaScript, contract 0.3): a mutating admission policy, the same as the Rust
// one (examples-guests/rust/default-requests) so the two are interchangeable: every container
// and init container of a Pod being created gets the CPU and memory requests it does not set,
// from the plugin's config, with a warning naming what was set. The host turns the returned
// Pod into the JSONPatch the API server applies.
//
// Config (JSON, optional): `{"name": "default-requests-js", "cpu": "100m", "memory": "128Mi"}`.
// Pods in namespaces labelled `kubewasm.dev/default-requests: off` are left alone (a namespace
// selector, evaluated by the API server). Failure policy Ignore: a Pod without defaults is
// better than no Pod.
import { GuestError, mutated, notIn, policy, rule, webhook } from '../propagator/kube.js';

const settings = { name: 'default-requests-js', cpu: '100m', memory: '128Mi' };

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function configure(text) {
  if (text.trim() === '') return;
  let config;
  try {
    config = JSON.parse(text);
  } catch (e) {
    throw new GuestError(`config: ${e.message}`);
  }
  if (!isObject(config)) throw new GuestError('config: not a JSON object');
  for (const key of ['name', 'cpu', 'memory']) {
    if (config[key] === undefined) continue;
    if (typeof config[key] !== 'string') throw new GuestError(`config: \`${key}\` must be a string`);
    settings[key] = config[key];
  }
}

/** The object at `owner[key]`, made an empty one when absent; anything else is an error. */
function objectAt(owner, key, what) {
  if (!Object.hasOwn(owner, key)) owner[key] = {};
  if (!isObject(owner[key])) throw new GuestError(`${what} is not an object`);
  return owner[key];
}

/** Sets the requests the Pod's containers lack; @returns {string[]} what was set. */
function setDefaults(pod) {
  const defaulted = [];
  for (const list of ['initContainers', 'containers']) {
    const containers = isObject(pod.spec) ? pod.spec[list] : undefined;
    if (!Array.isArray(containers)) continue;
    for (const container of containers) {
      if (!isObject(container)) continue;
      const name = typeof container.name === 'string' ? container.name : '';
      const requests = objectAt(objectAt(container, 'resources', 'resources'), 'requests', 'resources.requests');
      for (const resource of ['cpu', 'memory']) {
        if (Object.hasOwn(requests, resource)) continue;
        requests[resource] = settings[resource];
        defaulted.push(`${name}: ${resource}=${settings[resource]}`);
      }
    }
  }
  return defaulted;
}

export const plugin = {
  init: (config) => {
    configure(config);
    return { name: settings.name, subscriptions: [], indexes: [] };
  },
};

export const admission = policy({
  mutating: () =>
    webhook([rule(['pods'], { operations: ['create'] })], {
      fail: false,
      timeoutSeconds: 5,
      namespaceSelector: notIn('kubewasm.dev/default-requests', 'off'),
    }),
  change: (review) => {
    if (review.object === undefined) throw new GuestError('no Pod to mutate');
    const pod = review.object;
    const defaulted = setDefaults(pod);
    if (defaulted.length === 0) return mutated(undefined);
    return mutated(pod, `default requests set: ${defaulted.join(', ')}`);
  },
});

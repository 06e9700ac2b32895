// Module hooks for kube_test.js: node resolves the contract's imports
// (`kubewasm:controller/cache@0.2.0`, ...) to modules whose functions hand each call to
// `globalThis.kubewasmTestHost.call(name, args)`, the stand-in host the test sets up. Registered
// by kube_test.js itself (`module.register`); componentize-js never sees this file.

/** The functions of each imported interface kube.js calls, by componentize-js's names. */
const INTERFACES = {
  cache: ['get', 'listObjects', 'listKeys', 'count', 'byIndex', 'indexValues', 'hasSynced'],
  client: ['create', 'update', 'updateStatus', 'patch', 'patchStatus', 'delete', 'recordEvent'],
  queue: ['add', 'addAfter'],
  log: ['log'],
};

const PREFIX = 'kubewasm:controller/';

export async function resolve(specifier, context, next) {
  if (specifier.startsWith(PREFIX)) return { url: specifier, shortCircuit: true };
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (!url.startsWith(PREFIX)) return next(url, context);
  const iface = url.slice(PREFIX.length).split('@')[0];
  const functions = INTERFACES[iface];
  if (functions === undefined) throw new Error(`test_host.js has no stand-in for ${url}`);
  // Exported under their names by `export { ... as NAME }`: `delete` is a keyword.
  const source = functions
    .map((f, i) => `const f${i} = (...args) => globalThis.kubewasmTestHost.call('${iface}.${f}', args);
export { f${i} as ${f} };`)
    .join('\n');
  return { format: 'module', source, shortCircuit: true };
}

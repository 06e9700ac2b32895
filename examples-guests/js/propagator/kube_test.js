// Node tests of kube.js's `Resource` over a stand-in host (`node --experimental-default-type=module
// --test kube_test.js`, run by xtask's unit tests): test_host.js resolves the contract's imports
// to functions that record each call here and answer what the test tells them to. What crosses
// into the host (the binding, its arguments as componentize-js lowers them) and what a refusal
// becomes are checked; the real bindings are exercised by the templates' end-to-end tests.
import assert from 'node:assert/strict';
import { register } from 'node:module';
import { beforeEach, test } from 'node:test';

register('./test_host.js', import.meta.url);

const host = {
  made: [],
  answers: new Map(),
  call(name, args) {
    this.made.push([name, args]);
    const queued = this.answers.get(name) ?? [];
    const answer = queued.shift();
    if (answer instanceof Refusal) throw answer;
    return answer;
  },
  answer(name, ...answers) {
    this.answers.set(name, answers);
  },
};
globalThis.kubewasmTestHost = host;

/** What componentize-js throws for an import's `err(payload)`. */
class Refusal extends Error {
  constructor(payload) {
    super('err');
    this.payload = payload;
  }
}

const kube = await import('./kube.js');
const { ApiError, Resource, byField, byOwnerUid, requeueAfter } = kube;

const configMaps = new Resource(2, { group: '', version: 'v1', kind: 'ConfigMap' });
const deployments = new Resource(1, { group: 'apps', version: 'v1', kind: 'Deployment' });
const target = (name) => ({ gvk: configMaps.gvk, namespace: 'default', name });

beforeEach(() => {
  host.made = [];
  host.answers.clear();
});

test('merge and JSON patches go to patch or patch-status with their bodies', () => {
  host.answer('client.patch', '{"data":{"a":"b"}}');
  assert.deepEqual(configMaps.mergePatch('default', 'app', { data: { a: 'b', x: null } }), { data: { a: 'b' } });
  host.answer('client.patchStatus', '{}');
  const ops = [{ op: 'test', path: '/metadata/resourceVersion', value: '7' }, { op: 'remove', path: '/data/x' }];
  configMaps.jsonPatchStatus('default', 'app', ops);
  assert.deepEqual(host.made, [
    ['client.patch', [target('app'), { tag: 'merge', val: '{"data":{"a":"b","x":null}}' }]],
    ['client.patchStatus', [target('app'), { tag: 'json', val: JSON.stringify(ops) }]],
  ]);
});

test('a patch the server would refuse is refused before the host', () => {
  assert.throws(() => configMaps.jsonPatch('default', 'app', [{ op: 'replace', path: '/data/a' }]), /needs a value/);
  assert.throws(() => configMaps.mergePatch('default', 'app', [1]), TypeError);
  assert.deepEqual(host.made, []);
});

test('apply sends the object as the apply body to its own resource only', () => {
  const deployment = { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web', namespace: 'ns' } };
  host.answer('client.patch', JSON.stringify(deployment));
  deployments.apply(deployment, { force: true });
  assert.deepEqual(host.made, [
    [
      'client.patch',
      [
        { gvk: deployments.gvk, namespace: 'ns', name: 'web' },
        { tag: 'apply', val: { object: JSON.stringify(deployment), force: true } },
      ],
    ],
  ]);
  assert.throws(() => configMaps.apply(deployment), /not a ConfigMap/);
});

test('a refused write is an ApiError naming the case', () => {
  host.answer('client.updateStatus', new Refusal({ tag: 'conflict', val: 'stale' }));
  assert.throws(
    () => configMaps.updateStatus({ metadata: { name: 'app', namespace: 'default' } }),
    (e) => e instanceof ApiError && e.reason === 'conflict' && /stale/.test(e.message),
  );
  host.answer('client.patch', new Refusal({ tag: 'server-error', val: { code: 503, reason: 'x', message: 'later' } }));
  assert.throws(
    () => configMaps.mergePatch('default', 'app', {}),
    (e) => e instanceof ApiError && e.code === 503,
  );
});

test('delete passes uid and propagation, and a missing object is false', () => {
  host.answer('client.delete', { tag: 'gone' }, new Refusal({ tag: 'not-found', val: 'gone' }));
  assert.equal(configMaps.delete('default', 'app', { uid: 'u1', propagation: 'foreground' }), true);
  assert.equal(configMaps.delete('default', 'app'), false);
  assert.deepEqual(host.made[0][1][1], { uid: 'u1', resourceVersion: undefined, propagation: 'foreground' });
});

test('byIndex and indexValues page through continue tokens', () => {
  host.answer(
    'cache.byIndex',
    { objects: ['{"n":1}'], continueToken: 't1' },
    { objects: ['{"n":2}'], continueToken: undefined },
  );
  assert.deepEqual([...configMaps.byIndex('image', 'nginx')].map((o) => o.n), [1, 2]);
  assert.deepEqual(
    host.made.map(([, args]) => args),
    [
      [2, 'image', 'nginx', { limit: 0, continueToken: undefined }],
      [2, 'image', 'nginx', { limit: 0, continueToken: 't1' }],
    ],
  );
  host.answer('cache.indexValues', { items: ['a', 'b'], continueToken: undefined });
  assert.deepEqual([...configMaps.indexValues('image')], ['a', 'b']);
  host.answer('cache.count', 7);
  assert.equal(configMaps.count({ namespace: 'ns' }), 7);
  assert.deepEqual(host.made.at(-1), ['cache.count', [2, 'ns', undefined]]);
});

test('index declares an index-decl on this subscription', () => {
  assert.deepEqual(configMaps.index('image', byField('spec.containers.image')), {
    subscription: 2,
    name: 'image',
    source: { tag: 'field', val: 'spec.containers.image' },
  });
  assert.deepEqual(deployments.index('owner', byOwnerUid()).source, { tag: 'owner-uid' });
  assert.throws(() => configMaps.index('', byOwnerUid()), TypeError);
  assert.throws(() => configMaps.index('x', 'spec.nodeName'), TypeError);
});

test('enqueue and enqueueAfter hand the key and whole milliseconds', () => {
  configMaps.enqueue('default', 'app');
  configMaps.enqueueAfter(undefined, 'node', 1500.2);
  assert.deepEqual(host.made, [
    ['queue.add', [{ subscription: 2, namespace: 'default', name: 'app' }]],
    ['queue.addAfter', [{ subscription: 2, namespace: undefined, name: 'node' }, 1501]],
  ]);
  for (const bad of [-1, Number.NaN, 2 ** 32, '5']) {
    assert.throws(() => configMaps.enqueueAfter('default', 'app', bad), RangeError);
    assert.throws(() => requeueAfter(bad), RangeError);
  }
  assert.equal(host.made.length, 2);
  assert.deepEqual(requeueAfter(30_000), { tag: 'requeue-after', val: 30_000 });
});

// Node tests of patch.js (`node --experimental-default-type=module --test patch_test.js`, run by
// xtask's unit tests): the `patch-body` cases componentize-js lowers, the delay check, the
// resource an object names.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { JSON_PATCH_OPS, applyPatch, gvkOf, jsonPatch, mergePatch, millis } from './patch.js';

test('each body is its patch-body case with the JSON text', () => {
  assert.deepEqual(mergePatch({ a: null }), { tag: 'merge', val: '{"a":null}' });
  const ops = [{ op: 'copy', from: '/a', path: '/b' }];
  assert.deepEqual(jsonPatch(ops), { tag: 'json', val: JSON.stringify(ops) });
  assert.deepEqual(applyPatch({ metadata: { name: 'x' } }, 1), {
    tag: 'apply',
    val: { object: '{"metadata":{"name":"x"}}', force: true },
  });
});

test('a JSON patch names the operation that is wrong and why', () => {
  for (const [ops, says] of [
    [[{ op: 'upsert', path: '/a' }], /op "upsert"/],
    [[{ op: 'remove', path: 'a' }], /not a JSON pointer/],
    [[{ op: 'test', path: '/a' }], /test needs a value/],
    [[{ op: 'move', path: '/a' }], /move needs a `from`/],
    [[{ op: 'add', path: '', value: {} }, null], /operation 1/],
    [{ op: 'add' }, /list of operations/],
  ]) {
    assert.throws(() => jsonPatch(ops), says);
  }
  assert.deepEqual([...JSON_PATCH_OPS], ['add', 'remove', 'replace', 'move', 'copy', 'test']);
});

test('delays are whole milliseconds within u32', () => {
  assert.equal(millis(0), 0);
  assert.equal(millis(0.1), 1);
  assert.equal(millis(2 ** 32 - 1), 2 ** 32 - 1);
  for (const bad of [-0.5, Number.NaN, 2 ** 32, Infinity, '1', undefined]) {
    assert.throws(() => millis(bad), RangeError, String(bad));
  }
});

test('an object names its group, version and kind', () => {
  assert.deepEqual(gvkOf({ apiVersion: 'v1', kind: 'ConfigMap' }), { group: '', version: 'v1', kind: 'ConfigMap' });
  assert.deepEqual(gvkOf({ apiVersion: 'apps/v1', kind: 'Deployment' }), {
    group: 'apps',
    version: 'v1',
    kind: 'Deployment',
  });
  assert.throws(() => gvkOf({ kind: 'X' }), TypeError);
  assert.throws(() => applyPatch({ metadata: {} }), TypeError);
});

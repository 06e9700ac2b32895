import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ReviewError, allow, deny, mutated, notIn, review, rule, webhook } from './admission.js';

test('verdicts and mutations are the WIT records', () => {
  assert.deepEqual(allow('w'), { allowed: true, code: 0, message: '', warnings: ['w'] });
  assert.deepEqual(deny('no', { code: 422 }), { allowed: false, code: 422, message: 'no', warnings: [] });
  assert.deepEqual(mutated({ a: 1 }, 'x'), { verdict: allow('x'), object: '{"a":1}' });
  assert.equal(mutated(undefined).object, undefined);
});

test('a webhook declares its rules, failure policy and selectors', () => {
  const hook = webhook([rule(['pods'], { operations: ['create'] })], {
    fail: false,
    timeoutSeconds: 5,
    namespaceSelector: notIn('k', 'off'),
  });
  assert.deepEqual(hook, {
    rules: [{ operations: ['create'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'namespaced' }],
    failurePolicy: 'ignore',
    sideEffects: 'none',
    timeoutSeconds: 5,
    namespaceSelector: { matchLabels: [], matchExpressions: [{ key: 'k', operator: 'not-in', values: ['off'] }] },
    objectSelector: undefined,
  });
  assert.throws(() => rule(['pods'], { operations: ['CREATE'] }), TypeError);
  assert.throws(() => rule(['pods'], { scope: 'everywhere' }), TypeError);
});

test('a review parses its objects and refuses what is not a JSON object', () => {
  const r = review({ uid: 'u', operation: 'update', object: '{"a":1}', oldObject: '{"a":0}' });
  assert.deepEqual([r.uid, r.object, r.oldObject], ['u', { a: 1 }, { a: 0 }]);
  assert.equal(review({ object: undefined, oldObject: '{}' }).object, undefined);
  for (const bad of ['[]', 'null', '7', '"s"', '{']) {
    assert.throws(() => review({ object: bad }), ReviewError, bad);
  }
});

// Node tests of rules.js (`node --experimental-default-type=module --test rules_test.js`, run by
// xtask's unit tests): the records it makes are those componentize-js lowers into 0.2.2's
// `queue-spec`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import {
  PREDICATES,
  byAnnotation,
  byField,
  byLabel,
  byOwnerUid,
  controllingOwner,
  ownKey,
  when,
} from './rules.js';

test('a rule alone queues on every update', () => {
  assert.deepEqual(when(ownKey()), { rule: { tag: 'own-key' }, when: [] });
});

test('when names its predicates, in order, on either rule', () => {
  assert.deepEqual(when(ownKey(), 'generation'), { rule: { tag: 'own-key' }, when: ['generation'] });
  assert.deepEqual(when(controllingOwner(3), 'labels', 'annotations'), {
    rule: { tag: 'controlling-owner', val: 3 },
    when: ['labels', 'annotations'],
  });
});

test('PREDICATES are the cases of the WIT enum, in its order', () => {
  const wit = readFileSync(new URL('../../../wit/0.2.2/predicates.wit', import.meta.url), 'utf8');
  const body = wit.match(/enum predicate \{([^}]*)\}/)[1];
  const cases = body
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('//'))
    .map((line) => line.replace(/,$/, ''));
  assert.deepEqual(cases, [...PREDICATES]);
});

test('every predicate of the WIT is accepted, anything else refused', () => {
  for (const predicate of PREDICATES) assert.deepEqual(when(ownKey(), predicate).when, [predicate]);
  for (const bad of ['Generation', 'resourceVersion', 'status', '', undefined, 1]) {
    assert.throws(() => when(ownKey(), bad), TypeError);
  }
});

test('index sources are the index-source cases, their names required', () => {
  assert.deepEqual(byLabel('app'), { tag: 'label', val: 'app' });
  assert.deepEqual(byAnnotation('team'), { tag: 'annotation', val: 'team' });
  assert.deepEqual(byField('spec.nodeName'), { tag: 'field', val: 'spec.nodeName' });
  assert.deepEqual(byOwnerUid(), { tag: 'owner-uid' });
  for (const bad of ['', undefined, 3]) {
    assert.throws(() => byLabel(bad), TypeError);
    assert.throws(() => byField(bad), TypeError);
  }
});

// Helpers for an admission policy in C (contract kubewasm:controller@0.3.0, world
// `admission-policy`): the webhooks `declare` answers, the verdicts `validate` and `mutate`
// answer, and the request's fields as C strings. Over the generated bindings
// (admission_policy.h), which must be on the include path; tested natively by
// admission_test.c. Everything put in an answer is malloc'ed: the generated glue frees what an
// export returns.
#ifndef KUBEWASM_ADMISSION_H
#define KUBEWASM_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admission_policy.h"

typedef admission_policy_string_t kube_string_t;
typedef kubewasm_controller_0_3_0_admission_types_operation_t kube_operation_t;
typedef kubewasm_controller_0_3_0_admission_types_failure_policy_t kube_failure_policy_t;
typedef kubewasm_controller_0_3_0_admission_types_rule_t kube_rule_t;
typedef kubewasm_controller_0_3_0_admission_types_webhook_t kube_webhook_t;
typedef kubewasm_controller_0_3_0_admission_types_admission_info_t kube_admission_info_t;
typedef kubewasm_controller_0_3_0_admission_types_admission_request_t kube_request_t;
typedef kubewasm_controller_0_3_0_admission_types_verdict_t kube_verdict_t;
typedef kubewasm_controller_0_3_0_admission_types_mutation_t kube_mutation_t;

#define KUBE_CREATE KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_OPERATION_CREATE
#define KUBE_UPDATE KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_OPERATION_UPDATE
#define KUBE_DELETE KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_OPERATION_DELETE
#define KUBE_CONNECT KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_OPERATION_CONNECT

// A failing call (an error, a trap, the deadline) denies the request / allows it.
#define KUBE_FAIL KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_FAILURE_POLICY_FAIL
#define KUBE_IGNORE KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_FAILURE_POLICY_IGNORE

// `*out` set to a malloc'ed copy of `text`; false (`*out` empty) when out of memory.
bool kube_string(kube_string_t *out, const char *text);

// The webhook `out`: sent the requests of `operations[0..count)` on `resource` (a plural name,
// `pods/status` for a subresource) of the API group `group` (`""`: the core group), every
// version and scope; failing as `failure` says, with the API server's timeout `timeout_seconds`
// (1 to 30; 0: 10); no side effects, no selectors. False (nothing to free) when out of memory.
bool kube_webhook(kube_webhook_t *out, const char *group, const char *resource,
                  const kube_operation_t *operations, size_t count, kube_failure_policy_t failure,
                  uint32_t timeout_seconds);

// Sends the webhook only the requests in namespaces whose label `key` is absent or not `value`
// (e.g. "kubernetes.io/metadata.name", "kube-system"). False when out of memory (the webhook is
// unchanged).
bool kube_namespaces_without(kube_webhook_t *webhook, const char *key, const char *value);

// The declaration `declare` answers, the webhooks moved in (NULL: that webhook left out).
void kube_policy(kube_admission_info_t *out, const kube_webhook_t *validating,
                 const kube_webhook_t *mutating);

// Admits the request.
void kube_allow(kube_verdict_t *out);
// Refuses the request with the HTTP status `code` (0: 403) and `message` for the user. False
// when out of memory (`*out` then denies without a message).
bool kube_deny(kube_verdict_t *out, uint16_t code, const char *message);

// Admits the request as it is.
void kube_unchanged(kube_mutation_t *out);
// Admits the request with `object` (a JSON document, malloc'ed, `len` bytes) stored instead:
// the mutation owns it.
void kube_changed(kube_mutation_t *out, char *object, size_t len);
// Refuses the request to the mutating webhook (as kube_deny).
bool kube_refused(kube_mutation_t *out, uint16_t code, const char *message);

// The request's object (JSON, not NUL-terminated: `*len` bytes, the request's own memory);
// NULL for a delete. kube_request_old_object: the stored object, NULL for a create.
const char *kube_request_object(const kube_request_t *request, size_t *len);
const char *kube_request_old_object(const kube_request_t *request, size_t *len);
// The request's object name as a C string the caller frees: "" when it has none (a create with
// generateName); NULL when out of memory.
char *kube_request_name(const kube_request_t *request);

#endif

// Native tests of admission.c, compiled with the generated bindings of contract 0.3's world
// `admission-policy` on the include path (`cargo test -p xtask` writes them and compiles and
// runs this with the host's cc).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.h"

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s\n", what);
    }
}

static int is(const kube_string_t *s, const char *text) {
    return s->len == strlen(text) && (s->len == 0 || memcmp(s->ptr, text, s->len) == 0);
}

static void set(admission_policy_option_string_t *option, const char *text) {
    option->is_some = text != NULL;
    if (text != NULL) kube_string(&option->val, text);
}

int main(void) {
    const kube_operation_t writes[] = {KUBE_CREATE, KUBE_UPDATE};
    kube_webhook_t validating, mutating;
    check(kube_webhook(&validating, "", "configmaps", writes, 2, KUBE_FAIL, 5), "a webhook");
    check(validating.rules.len == 1, "one rule");
    const kube_rule_t *rule = &validating.rules.ptr[0];
    check(rule->operations.len == 2 && rule->operations.ptr[0] == KUBE_CREATE &&
              rule->operations.ptr[1] == KUBE_UPDATE,
          "its operations, in order");
    check(rule->operations.ptr != writes, "the operations are the rule's own copy");
    check(rule->api_groups.len == 1 && is(&rule->api_groups.ptr[0], ""), "the core group");
    check(rule->api_versions.len == 1 && is(&rule->api_versions.ptr[0], "*"), "every version");
    check(rule->resources.len == 1 && is(&rule->resources.ptr[0], "configmaps"), "the resource");
    check(rule->scope == KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_SCOPE_ANY, "any scope");
    check(validating.failure_policy == KUBE_FAIL && validating.timeout_seconds == 5,
          "failure policy and timeout");
    check(validating.side_effects == KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_SIDE_EFFECTS_NONE,
          "no side effects");
    check(!validating.namespace_selector.is_some && !validating.object_selector.is_some,
          "no selectors until asked");

    check(kube_namespaces_without(&validating, "kubernetes.io/metadata.name", "kube-system"),
          "a namespace selector");
    check(validating.namespace_selector.is_some, "the selector is set");
    const kubewasm_controller_0_3_0_admission_types_label_selector_t *selector =
        &validating.namespace_selector.val;
    check(selector->match_labels.len == 0 && selector->match_expressions.len == 1,
          "one requirement, no labels");
    const kubewasm_controller_0_3_0_admission_types_selector_requirement_t *requirement =
        &selector->match_expressions.ptr[0];
    check(is(&requirement->key, "kubernetes.io/metadata.name"), "the requirement's key");
    check(requirement->operator_ == KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_SELECTOR_OPERATOR_NOT_IN,
          "not in");
    check(requirement->values.len == 1 && is(&requirement->values.ptr[0], "kube-system"),
          "the requirement's value");

    // No operations: an empty (but valid) list.
    check(kube_webhook(&mutating, "apps", "deployments", NULL, 0, KUBE_IGNORE, 0), "no operations");
    check(mutating.rules.ptr[0].operations.len == 0, "none kept");
    check(mutating.failure_policy == KUBE_IGNORE, "ignore");

    kube_admission_info_t info;
    kube_policy(&info, &validating, NULL);
    check(info.validating.is_some && !info.mutating.is_some, "a validating policy only");
    check(info.validating.val.rules.ptr == validating.rules.ptr, "the webhook moved in");
    kube_policy(&info, NULL, &mutating);
    check(!info.validating.is_some && info.mutating.is_some, "a mutating policy only");

    kube_verdict_t verdict;
    kube_allow(&verdict);
    check(verdict.allowed && verdict.code == 0 && verdict.message.len == 0 &&
              verdict.warnings.len == 0,
          "allowed, nothing said");
    check(kube_deny(&verdict, 422, "keep passwords in a Secret"), "a denial");
    check(!verdict.allowed && verdict.code == 422 && is(&verdict.message, "keep passwords in a Secret"),
          "denied with its code and message");
    free(verdict.message.ptr);

    kube_mutation_t mutation;
    kube_unchanged(&mutation);
    check(mutation.verdict.allowed && !mutation.object.is_some, "unchanged");
    char *object = malloc(3);
    memcpy(object, "{}x", 3);
    kube_changed(&mutation, object, 2);
    check(mutation.verdict.allowed && mutation.object.is_some &&
              mutation.object.val.ptr == (uint8_t *)object && mutation.object.val.len == 2,
          "changed: the object moved in, with its length");
    free(object);
    check(kube_refused(&mutation, 0, "no"), "a refused mutation");
    check(!mutation.verdict.allowed && mutation.verdict.code == 0 && !mutation.object.is_some &&
              is(&mutation.verdict.message, "no"),
          "refused, without an object");
    free(mutation.verdict.message.ptr);

    kube_request_t request;
    memset(&request, 0, sizeof request);
    set(&request.object, "{\"a\":1}");
    set(&request.name, "app");
    size_t len = 0;
    const char *json = kube_request_object(&request, &len);
    check(json != NULL && len == 7 && memcmp(json, "{\"a\":1}", 7) == 0, "the object");
    check(kube_request_old_object(&request, &len) == NULL, "no old object on a create");
    char *name = kube_request_name(&request);
    check(name != NULL && strcmp(name, "app") == 0, "the name as a C string");
    free(name);
    request.name.is_some = false;
    name = kube_request_name(&request);
    check(name != NULL && strcmp(name, "") == 0, "no name: empty");
    free(name);

    if (failures) return 1;
    printf("admission_test: all passed\n");
    return 0;
}

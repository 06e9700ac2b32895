// The admission helpers declared in admission.h.
#include "admission.h"

#include <stdlib.h>
#include <string.h>

bool kube_string(kube_string_t *out, const char *text) {
    size_t len = strlen(text);
    // malloc(0) may answer NULL: an empty string is one byte.
    uint8_t *copy = malloc(len > 0 ? len : 1);
    out->ptr = copy;
    out->len = copy != NULL ? len : 0;
    if (copy == NULL) return false;
    memcpy(copy, text, len);
    return true;
}

static void string_free(kube_string_t *s) {
    free(s->ptr);
    s->ptr = NULL;
    s->len = 0;
}

// A list of one string, malloc'ed; false when out of memory (nothing to free).
static bool one_string(admission_policy_list_string_t *out, const char *text) {
    out->ptr = malloc(sizeof *out->ptr);
    out->len = out->ptr != NULL ? 1 : 0;
    if (out->ptr == NULL) return false;
    if (kube_string(&out->ptr[0], text)) return true;
    free(out->ptr);
    out->ptr = NULL;
    out->len = 0;
    return false;
}

static void strings_free(admission_policy_list_string_t *list) {
    for (size_t i = 0; i < list->len; i++) string_free(&list->ptr[i]);
    free(list->ptr);
    list->ptr = NULL;
    list->len = 0;
}

bool kube_webhook(kube_webhook_t *out, const char *group, const char *resource,
                  const kube_operation_t *operations, size_t count, kube_failure_policy_t failure,
                  uint32_t timeout_seconds) {
    memset(out, 0, sizeof *out);
    kube_rule_t *rule = calloc(1, sizeof *rule);
    kube_operation_t *ops = malloc(count > 0 ? count * sizeof *ops : 1);
    bool ok = rule != NULL && ops != NULL;
    if (ok) {
        if (count > 0) memcpy(ops, operations, count * sizeof *ops);
        rule->operations.ptr = ops;
        rule->operations.len = count;
        rule->scope = KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_SCOPE_ANY;
        ok = one_string(&rule->api_groups, group) && one_string(&rule->api_versions, "*") &&
             one_string(&rule->resources, resource);
    }
    if (!ok) {
        if (rule != NULL) {
            strings_free(&rule->api_groups);
            strings_free(&rule->api_versions);
            strings_free(&rule->resources);
        }
        free(ops);
        free(rule);
        return false;
    }
    out->rules.ptr = rule;
    out->rules.len = 1;
    out->failure_policy = failure;
    out->side_effects = KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_SIDE_EFFECTS_NONE;
    out->timeout_seconds = timeout_seconds;
    return true;
}

bool kube_namespaces_without(kube_webhook_t *webhook, const char *key, const char *value) {
    kubewasm_controller_0_3_0_admission_types_selector_requirement_t *requirement =
        calloc(1, sizeof *requirement);
    if (requirement == NULL) return false;
    requirement->operator_ = KUBEWASM_CONTROLLER_0_3_0_ADMISSION_TYPES_SELECTOR_OPERATOR_NOT_IN;
    if (!kube_string(&requirement->key, key) || !one_string(&requirement->values, value)) {
        string_free(&requirement->key);
        free(requirement);
        return false;
    }
    kubewasm_controller_0_3_0_admission_types_label_selector_t *selector =
        &webhook->namespace_selector.val;
    memset(selector, 0, sizeof *selector);
    selector->match_expressions.ptr = requirement;
    selector->match_expressions.len = 1;
    webhook->namespace_selector.is_some = true;
    return true;
}

void kube_policy(kube_admission_info_t *out, const kube_webhook_t *validating,
                 const kube_webhook_t *mutating) {
    memset(out, 0, sizeof *out);
    if (validating != NULL) {
        out->validating.is_some = true;
        out->validating.val = *validating;
    }
    if (mutating != NULL) {
        out->mutating.is_some = true;
        out->mutating.val = *mutating;
    }
}

void kube_allow(kube_verdict_t *out) {
    memset(out, 0, sizeof *out);
    out->allowed = true;
}

bool kube_deny(kube_verdict_t *out, uint16_t code, const char *message) {
    memset(out, 0, sizeof *out);
    out->allowed = false;
    out->code = code;
    return kube_string(&out->message, message);
}

void kube_unchanged(kube_mutation_t *out) {
    memset(out, 0, sizeof *out);
    kube_allow(&out->verdict);
}

void kube_changed(kube_mutation_t *out, char *object, size_t len) {
    kube_unchanged(out);
    out->object.is_some = true;
    out->object.val.ptr = (uint8_t *)object;
    out->object.val.len = len;
}

bool kube_refused(kube_mutation_t *out, uint16_t code, const char *message) {
    memset(out, 0, sizeof *out);
    return kube_deny(&out->verdict, code, message);
}

static const char *option_text(const admission_policy_option_string_t *option, size_t *len) {
    if (!option->is_some) return NULL;
    *len = option->val.len;
    // An empty string still answers a pointer (the bindings may hand NULL for it).
    return option->val.ptr != NULL ? (const char *)option->val.ptr : "";
}

const char *kube_request_object(const kube_request_t *request, size_t *len) {
    return option_text(&request->object, len);
}

const char *kube_request_old_object(const kube_request_t *request, size_t *len) {
    return option_text(&request->old_object, len);
}

char *kube_request_name(const kube_request_t *request) {
    size_t len = request->name.is_some ? request->name.val.len : 0;
    char *name = malloc(len + 1);
    if (name == NULL) return NULL;
    if (len > 0) memcpy(name, request->name.val.ptr, len);
    name[len] = '\0';
    return name;
}

// Object metadata and document building for C guests (see kube.h).
#include "kube.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

void sb_append(strbuf_t *sb, const char *bytes, size_t len) {
    if (sb->failed) return;
    if (sb->len + len + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < sb->len + len + 1) cap *= 2;
        char *grown = realloc(sb->ptr, cap);
        if (grown == NULL) {
            sb->failed = true;
            return;
        }
        sb->ptr = grown;
        sb->cap = cap;
    }
    memcpy(sb->ptr + sb->len, bytes, len);
    sb->len += len;
    sb->ptr[sb->len] = '\0';
}

void sb_puts(strbuf_t *sb, const char *text) { sb_append(sb, text, strlen(text)); }

void sb_json_string(strbuf_t *sb, const char *text) {
    sb_puts(sb, "\"");
    for (const char *at = text; *at; at++) {
        unsigned char ch = (unsigned char)*at;
        if (ch == '"' || ch == '\\') {
            char escaped[2] = {'\\', (char)ch};
            sb_append(sb, escaped, 2);
        } else if (ch < 0x20) {
            char escaped[7];
            snprintf(escaped, sizeof escaped, "\\u%04x", ch);
            sb_append(sb, escaped, 6);
        } else {
            sb_append(sb, at, 1);
        }
    }
    sb_puts(sb, "\"");
}

char *sb_finish(strbuf_t *sb) {
    if (sb->failed || sb->ptr == NULL) {
        sb_free(sb);
        return NULL;
    }
    char *out = sb->ptr;
    *sb = (strbuf_t)STRBUF_INIT;
    return out;
}

void sb_free(strbuf_t *sb) {
    free(sb->ptr);
    *sb = (strbuf_t)STRBUF_INIT;
}

bool kube_meta_parse(const char *json, size_t len, kube_meta_t *out) {
    static const char *const namespace_path[] = {"metadata", "namespace"};
    static const char *const name_path[] = {"metadata", "name"};
    static const char *const uid_path[] = {"metadata", "uid"};
    static const char *const rv_path[] = {"metadata", "resourceVersion"};
    static const char *const deleting_path[] = {"metadata", "deletionTimestamp"};
    out->name = json_get_string(json, len, name_path, 2);
    if (out->name == NULL) return false;
    out->namespace_ = json_get_string(json, len, namespace_path, 2);
    out->uid = json_get_string(json, len, uid_path, 2);
    out->resource_version = json_get_string(json, len, rv_path, 2);
    size_t raw_len;
    const char *deleting = json_get_raw(json, len, deleting_path, 2, &raw_len);
    out->deleting = deleting != NULL && !(raw_len == 4 && memcmp(deleting, "null", 4) == 0);
    return true;
}

void kube_meta_free(kube_meta_t *meta) {
    free(meta->namespace_);
    free(meta->name);
    free(meta->uid);
    free(meta->resource_version);
    *meta = (kube_meta_t){0};
}

static char *metadata_string(const char *json, size_t len, const char *map, const char *key) {
    const char *const path[] = {"metadata", map, key};
    return json_get_string(json, len, path, 3);
}

char *kube_label(const char *json, size_t len, const char *key) {
    return metadata_string(json, len, "labels", key);
}

char *kube_annotation(const char *json, size_t len, const char *key) {
    return metadata_string(json, len, "annotations", key);
}

bool kube_same_field(const char *a, size_t a_len, const char *b, size_t b_len, const char *field) {
    const char *const path[] = {field};
    size_t a_raw_len = 0, b_raw_len = 0;
    const char *a_raw = json_get_raw(a, a_len, path, 1, &a_raw_len);
    const char *b_raw = json_get_raw(b, b_len, path, 1, &b_raw_len);
    if (a_raw == NULL || b_raw == NULL) return a_raw == b_raw;
    return a_raw_len == b_raw_len && memcmp(a_raw, b_raw, a_raw_len) == 0;
}

#ifdef KUBE_HAS_PREDICATES
kube_queue_rule_t kube_own_key(void) {
    kube_queue_rule_t rule = {.tag = KUBEWASM_CONTROLLER_0_2_0_TYPES_QUEUE_RULE_OWN_KEY};
    return rule;
}

kube_queue_rule_t kube_controlling_owner(uint32_t owner) {
    kube_queue_rule_t rule = {.tag = KUBEWASM_CONTROLLER_0_2_0_TYPES_QUEUE_RULE_CONTROLLING_OWNER};
    rule.val.controlling_owner = owner;
    return rule;
}

bool kube_when(kube_queue_rule_t rule, const kube_predicate_t *predicates, size_t count,
               kube_queue_spec_t *out) {
    for (size_t i = 0; i < count; i++) {
        if (predicates[i] > KUBE_ANNOTATIONS) return false;
    }
    kube_predicate_t *copy = NULL;
    if (count > 0) {
        copy = malloc(count * sizeof *copy);
        if (copy == NULL) return false;
        memcpy(copy, predicates, count * sizeof *copy);
    }
    out->rule = rule;
    out->when.ptr = copy;
    out->when.len = count;
    return true;
}
#endif

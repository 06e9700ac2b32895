// Native tests of kube.c (`cargo test -p xtask` compiles and runs them with the host's cc).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

static int failures = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s\n", what);
    }
}

static int same(const char *got, const char *want) {
    return (got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0);
}

int main(void) {
    const char *cm =
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"data\":{\"a\":\"1\"},"
        "\"metadata\":{\"name\":\"web\",\"namespace\":\"shop\",\"uid\":\"u-1\","
        "\"resourceVersion\":\"42\",\"labels\":{\"kubewasm.io/propagate\":\"true\"},"
        "\"annotations\":{\"note\":\"x\"}}}";
    kube_meta_t meta;
    check(kube_meta_parse(cm, strlen(cm), &meta), "metadata parses");
    check(same(meta.name, "web") && same(meta.namespace_, "shop") && same(meta.uid, "u-1") &&
              same(meta.resource_version, "42") && !meta.deleting,
          "metadata fields");
    kube_meta_free(&meta);

    const char *ns = "{\"metadata\":{\"name\":\"gone\",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"}}";
    check(kube_meta_parse(ns, strlen(ns), &meta), "cluster-scoped parses");
    check(meta.namespace_ == NULL && meta.deleting, "no namespace, deleting");
    kube_meta_free(&meta);
    check(!kube_meta_parse("{\"metadata\":{}}", 15, &meta), "no name: refused");

    char *label = kube_label(cm, strlen(cm), "kubewasm.io/propagate");
    check(same(label, "true"), "label with a slash in its key");
    free(label);
    char *absent = kube_annotation(cm, strlen(cm), "kubewasm.io/propagate");
    check(absent == NULL, "a label is not an annotation");

    const char *other = "{\"metadata\":{\"name\":\"web\"},\"data\":{\"a\":\"1\"}}";
    const char *changed = "{\"data\":{\"a\":\"2\"}}";
    check(kube_same_field(cm, strlen(cm), other, strlen(other), "data"), "same data");
    check(!kube_same_field(cm, strlen(cm), changed, strlen(changed), "data"), "changed data");
    check(kube_same_field(cm, strlen(cm), other, strlen(other), "binaryData"), "both absent");
    check(!kube_same_field(cm, strlen(cm), "{}", 2, "data"), "absent on one side");

    strbuf_t sb = STRBUF_INIT;
    sb_puts(&sb, "{\"k\":");
    sb_json_string(&sb, "a\"b\\c\n");
    sb_puts(&sb, "}");
    char *doc = sb_finish(&sb);
    check(same(doc, "{\"k\":\"a\\\"b\\\\c\\u000a\"}"), "escaped JSON string");
    free(doc);
    strbuf_t big = STRBUF_INIT;
    for (int i = 0; i < 1000; i++) sb_puts(&big, "0123456789");
    char *long_doc = sb_finish(&big);
    check(long_doc != NULL && strlen(long_doc) == 10000, "grows past its first block");
    free(long_doc);

    if (failures) return 1;
    printf("kube_test: all passed\n");
    return 0;
}

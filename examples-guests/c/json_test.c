// Native tests of json.c (`cargo test -p xtask` compiles and runs them with the host's cc).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static int failures = 0;

static void expect(const char *json, const char *const *path, size_t depth, const char *want) {
    char *got = json_get_string(json, strlen(json), path, depth);
    int ok = (want == NULL && got == NULL) || (want != NULL && got != NULL && strcmp(got, want) == 0);
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s at %s...: want %s, got %s\n", json, path[0], want ? want : "(null)",
                got ? got : "(null)");
    }
    free(got);
}

static void expect_raw(const char *json, const char *const *path, size_t depth, const char *want) {
    size_t len = 0;
    const char *got = json_get_raw(json, strlen(json), path, depth, &len);
    int ok = (want == NULL && got == NULL) ||
             (want != NULL && got != NULL && len == strlen(want) && memcmp(got, want, len) == 0);
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL raw %s at %s...: want %s, got %.*s\n", json, path[0],
                want ? want : "(null)", got ? (int)len : 6, got ? got : "(null)");
    }
}

int main(void) {
    static const char *const name[] = {"metadata", "name"};
    static const char *const app[] = {"metadata", "labels", "app"};
    static const char *const top[] = {"kind"};

    const char *object =
        "{\"kind\":\"ConfigMap\",\"data\":{\"metadata\":{\"name\":\"decoy\"}},"
        "\"metadata\":{\"annotations\":{\"a\":[1,2,{\"b\":null}],\"c\":true},"
        "\"name\":\"web\",\"labels\":{\"tier\":\"x\",\"app\":\"shop\"}}}";
    expect(object, name, 2, "web");                    // skips a same-named key in another object
    expect(object, app, 3, "shop");                    // nested two levels, after other members
    expect(object, top, 1, "ConfigMap");
    expect("{\"metadata\":{\"name\":\"a\\\"b\\\\c\\n\"}}", name, 2, "a\"b\\c\n");   // escapes
    expect("{\"metadata\":{\"name\":\"\\u00e9\\ud83d\\ude00\"}}", name, 2, "\xc3\xa9\xf0\x9f\x98\x80");
    expect("{\"metadata\":{\"n\\u0061me\":\"escaped-key\"}}", name, 2, "escaped-key");
    expect(" { \"metadata\" : { \"name\" : \"spaced\" } } ", name, 2, "spaced");
    expect("{\"metadata\":{\"labels\":{}}}", app, 3, NULL);               // missing key
    expect("{\"metadata\":{\"name\":42}}", name, 2, NULL);                // not a string
    expect("{\"metadata\":[\"name\",\"x\"]}", name, 2, NULL);             // not an object
    expect("{\"metadata\":{\"name\":\"unterminated}}", name, 2, NULL);    // malformed
    expect("{\"metadata\":{\"x\":[1,2,\"name\":\"y\"}}", name, 2, NULL);  // malformed on the way

    static const char *const data[] = {"data"};
    static const char *const labels[] = {"metadata", "labels"};
    expect_raw(object, data, 1, "{\"metadata\":{\"name\":\"decoy\"}}");     // an object, whole
    expect_raw(object, labels, 2, "{\"tier\":\"x\",\"app\":\"shop\"}");
    expect_raw(object, top, 1, "\"ConfigMap\"");                          // a string, quoted
    expect_raw("{\"data\": [1, {\"a\": \"]\"}] }", data, 1, "[1, {\"a\": \"]\"}]");  // brackets in strings
    expect_raw("{\"data\":42,\"x\":1}", data, 1, "42");
    expect_raw("{\"metadata\":{}}", data, 1, NULL);                         // missing
    expect_raw("{\"data\":{\"a\":}", data, 1, NULL);                       // malformed value

    if (failures) return 1;
    printf("json_test: all passed\n");
    return 0;
}

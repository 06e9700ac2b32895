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

// Appends each key and a `|` to the buffer `ctx`; stops after the key "stop".
static int collect(const char *key, void *ctx) {
    strcat((char *)ctx, key);
    strcat((char *)ctx, "|");
    return strcmp(key, "stop") != 0;
}

static void expect_keys(const char *json, const char *const *path, size_t depth, int want_ok,
                        const char *want) {
    char seen[256] = "";
    int ok = json_each_key(json, strlen(json), path, depth, collect, seen);
    if (ok != want_ok || (want_ok && strcmp(seen, want) != 0)) {
        failures++;
        fprintf(stderr, "FAIL keys of %s: want %d %s, got %d %s\n", json, want_ok, want, ok, seen);
    }
}

static void expect_set(const char *json, const char *const *path, size_t depth, const char *value,
                       const char *want, int want_changed) {
    size_t len = 0;
    int changed = -1;
    char *got = json_set_string(json, strlen(json), path, depth, value, &len, &changed);
    int ok = (want == NULL && got == NULL) ||
             (want != NULL && got != NULL && strcmp(got, want) == 0 && len == strlen(want) &&
              changed == want_changed);
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL set %s: want %s (changed %d), got %s (changed %d)\n", json,
                want ? want : "(null)", want_changed, got ? got : "(null)", changed);
    }
    free(got);
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

    static const char *const no_path[] = {NULL};
    expect_keys("{\"data\":{\"a\":1,\"b-password\":{\"x\":[]},\"c\\u0021\":\"v\"}}", data, 1, 1,
                "a|b-password|c!|");                                     // every key, unescaped
    expect_keys("{\"data\":{}}", data, 1, 1, "");                        // none
    expect_keys("{\"data\":{\"stop\":1,\"after\":2}}", data, 1, 1, "stop|");  // `each` stops
    expect_keys(" {\"k\" : 1 , \"l\":2 } ", no_path, 0, 1, "k|l|");    // the root, spaced
    expect_keys("{\"data\":[1]}", data, 1, 0, "");                       // not an object
    expect_keys("{\"x\":1}", data, 1, 0, "");                            // missing
    expect_keys("{\"data\":{\"a\":1,\"b\"}}", data, 1, 0, "");          // malformed: nothing seen

    static const char *const mark[] = {"metadata", "annotations", "example.com/checked-by"};
    expect_set("{\"metadata\":{\"name\":\"a\"},\"data\":{}}", mark, 3, "me",
               "{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"me\"},\"name\":\"a\"},"
               "\"data\":{}}", 1);                                       // objects made on the way
    expect_set("{\"metadata\":{\"annotations\":{\"x\":\"y\"}}}", mark, 3, "me",
               "{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"me\",\"x\":\"y\"}}}", 1);
    expect_set("{\"metadata\":{\"annotations\":{ }}}", mark, 3, "me",
               "{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"me\" }}}", 1);
    expect_set("{}", mark, 3, "me",
               "{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"me\"}}}", 1);
    expect_set("{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"other\",\"x\":1}}}",
               mark, 3, "me",
               "{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"me\",\"x\":1}}}", 1);
    expect_set("{\"metadata\":{\"annotations\":{\"example.com\\/checked-by\":\"m\\u0065\"}}}", mark,
               3, "me", "{\"metadata\":{\"annotations\":{\"example.com\\/checked-by\":\"me\"}}}",
               0);                                                       // the same value, escaped
    expect_set("{\"metadata\":{\"annotations\":{\"example.com/checked-by\":7}}}", mark, 3, "me",
               "{\"metadata\":{\"annotations\":{\"example.com/checked-by\":\"me\"}}}", 1);
    expect_set("{\"a\":1}", top, 1, "q\"\\\n\x01", "{\"kind\":\"q\\\"\\\\\\n\\u0001\",\"a\":1}", 1);
    expect_set("{\"metadata\":{\"annotations\":null}}", mark, 3, "me", NULL, 0);   // null on the way
    expect_set("{\"metadata\":[]}", mark, 3, "me", NULL, 0);             // not an object on the way
    expect_set("{\"metadata\":{}", mark, 3, "me", NULL, 0);              // malformed
    expect_set("{\"metadata\":{}} x", mark, 3, "me", NULL, 0);           // trailing text
    expect_set("[1]", mark, 3, "me", NULL, 0);                             // not an object
    expect_set("{}", mark, 0, "me", NULL, 0);                              // no path

    if (failures) return 1;
    printf("json_test: all passed\n");
    return 0;
}

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

    if (failures) return 1;
    printf("json_test: all passed\n");
    return 0;
}

// Native tests of counts.c (`cargo test -p xtask` compiles and runs them with the host's cc).
#include <stdio.h>

#include "counts.h"

static int failures = 0;

static void expect(long got, long want, const char *what) {
    if (got != want) {
        failures++;
        fprintf(stderr, "FAIL %s: want %ld, got %ld\n", what, want, got);
    }
}

int main(void) {
    counts_t counts = COUNTS_INIT;
    bool ok = true;
    expect(counts_get(&counts, "a"), 0, "an empty table counts 0");
    expect(counts_add(&counts, "a", 1, &ok), 1, "first add");
    expect(counts_add(&counts, "a", 1, &ok), 2, "second add");
    expect(counts_add(&counts, "b", 1, &ok), 1, "another key");
    expect(counts_add(&counts, "a", -1, &ok), 1, "a delete");
    // Enough keys to grow the table several times; keys at zero are dropped as it grows.
    char key[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "ns-%d", i);
        counts_add(&counts, key, i % 2, &ok);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(key, sizeof key, "ns-%d", i);
        expect(counts_get(&counts, key), i % 2, key);
    }
    expect(counts_get(&counts, "a"), 1, "a after growing");
    expect(counts_get(&counts, "b"), 1, "b after growing");
    expect(counts.capacity <= 2048, 1, "zero counts do not keep the table growing");
    expect(ok, 1, "no allocation failed");
    if (failures) return 1;
    puts("counts: ok");
    return 0;
}

// Counts by string key (ConfigMaps per namespace, per label value), kept from the events: an
// open-addressing hash table, O(1) per update on average.
#ifndef KUBEWASM_COUNTS_H
#define KUBEWASM_COUNTS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *key;    // owned; NULL for an empty slot
    long count;
} counts_slot_t;

typedef struct {
    counts_slot_t *slots;
    size_t capacity;  // a power of two, or 0 before the first insert
    size_t used;      // slots ever filled (removed keys keep theirs as tombstones)
} counts_t;

#define COUNTS_INIT {NULL, 0, 0}

// Adds `delta` to `key`'s count (a missing key counts 0) and returns the new count; false in
// `*ok` when memory ran out (then nothing changed).
long counts_add(counts_t *counts, const char *key, long delta, bool *ok);

// The count of `key`, 0 when it was never counted.
long counts_get(const counts_t *counts, const char *key);

#endif

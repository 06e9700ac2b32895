#include "counts.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *key) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    return h;
}

// The slot holding `key`, or the empty slot where it belongs; NULL only for an empty table.
static counts_slot_t *find(const counts_t *counts, const char *key) {
    if (counts->capacity == 0) return NULL;
    size_t mask = counts->capacity - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
        counts_slot_t *slot = &counts->slots[i];
        if (slot->key == NULL || strcmp(slot->key, key) == 0) return slot;
    }
}

// Doubles the table (keys whose count fell to zero are dropped on the way).
static bool grow(counts_t *counts) {
    size_t capacity = counts->capacity ? counts->capacity * 2 : 16;
    counts_t bigger = {calloc(capacity, sizeof(counts_slot_t)), capacity, 0};
    if (bigger.slots == NULL) return false;
    for (size_t i = 0; i < counts->capacity; i++) {
        counts_slot_t *old = &counts->slots[i];
        if (old->key == NULL) continue;
        if (old->count == 0) {
            free(old->key);
            continue;
        }
        *find(&bigger, old->key) = *old;
        bigger.used++;
    }
    free(counts->slots);
    *counts = bigger;
    return true;
}

long counts_add(counts_t *counts, const char *key, long delta, bool *ok) {
    *ok = true;
    counts_slot_t *slot = find(counts, key);
    if (slot == NULL || slot->key == NULL) {
        // A new key: keep the table at most half full.
        if ((counts->used + 1) * 2 > counts->capacity) {
            if (!grow(counts)) {
                *ok = false;
                return counts_get(counts, key);
            }
            slot = find(counts, key);
        }
        size_t len = strlen(key) + 1;
        char *copy = malloc(len);
        if (copy == NULL) {
            *ok = false;
            return 0;
        }
        memcpy(copy, key, len);
        slot->key = copy;
        slot->count = 0;
        counts->used++;
    }
    slot->count += delta;
    return slot->count;
}

long counts_get(const counts_t *counts, const char *key) {
    const counts_slot_t *slot = find(counts, key);
    return slot != NULL && slot->key != NULL ? slot->count : 0;
}

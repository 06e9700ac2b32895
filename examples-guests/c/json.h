// A minimal, allocation-light JSON reader: just enough to pull string fields (and the raw text of
// any value) out of the Kubernetes objects the host hands to the guest (wasi-libc has no JSON
// parser).
#ifndef KUBEWASM_JSON_H
#define KUBEWASM_JSON_H

#include <stddef.h>

// Looks up the string at `path` (object keys from the root, e.g. {"metadata", "name"}) in the JSON
// document `json[0..len)`. Returns a NUL-terminated, unescaped copy the caller frees, or NULL when
// the path is missing, is not a string, or the document is malformed along the way.
char *json_get_string(const char *json, size_t len, const char *const *path, size_t depth);

// Looks up the value at `path` like json_get_string, whatever its type, and returns where its JSON
// text starts inside `json` (not a copy) with its length in `*raw_len`: `{"k":"v"}`, `"text"`,
// `42`. NULL when the path is missing or the document is malformed along the way. Two documents
// serialised the same way (the API server's compact JSON, keys in order) compare equal by these
// spans when their values are equal.
const char *json_get_raw(const char *json, size_t len, const char *const *path, size_t depth,
                         size_t *raw_len);

// Calls `each(key, ctx)` with every key of the object at `path`, in document order (the key
// unescaped and NUL-terminated, valid during the call only), until it returns 0. Returns 1 when
// every key was seen or `each` stopped, 0 when the path is missing, is not an object, the
// document is malformed along the way or memory runs out.
int json_each_key(const char *json, size_t len, const char *const *path, size_t depth,
                  int (*each)(const char *key, void *ctx), void *ctx);

// A copy of the document `json[0..len)` (malloc'ed, NUL-terminated, its length in `*out_len`)
// with the member at `path` (depth >= 1) set to the string `value` (escaped here), making the
// objects on the way that are missing; the rest of the document is copied as it is. NULL when
// the document is not a well-formed JSON object, a member on the way is not an object (null
// included), or memory runs out. `*changed` (may be NULL) says whether the member had another
// value or none.
char *json_set_string(const char *json, size_t len, const char *const *path, size_t depth,
                      const char *value, size_t *out_len, int *changed);

#endif

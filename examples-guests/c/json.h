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

#endif

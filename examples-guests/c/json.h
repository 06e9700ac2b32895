// A minimal, allocation-light JSON reader: just enough to pull string fields out of the
// Kubernetes objects the host hands to the guest (wasi-libc has no JSON parser).
#ifndef KUBEWASM_JSON_H
#define KUBEWASM_JSON_H

#include <stddef.h>

// Looks up the string at `path` (object keys from the root, e.g. {"metadata", "name"}) in the JSON
// document `json[0..len)`. Returns a NUL-terminated, unescaped copy the caller frees, or NULL when
// the path is missing, is not a string, or the document is malformed along the way.
char *json_get_string(const char *json, size_t len, const char *const *path, size_t depth);

#endif

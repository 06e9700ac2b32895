// Typed access to the Kubernetes objects (API server JSON) a guest receives, and a string builder
// for the documents it sends back. Independent of the generated bindings, so it is tested natively
// (kube_test.c).
#ifndef KUBEWASM_KUBE_H
#define KUBEWASM_KUBE_H

#include <stdbool.h>
#include <stddef.h>

// A growing, NUL-terminated string. Appends after an allocation failure do nothing and leave
// `failed` set, so a document is built without checking every step and checked once at the end.
typedef struct {
    char *ptr;
    size_t len;
    size_t cap;
    bool failed;
} strbuf_t;

#define STRBUF_INIT {NULL, 0, 0, false}

void sb_append(strbuf_t *sb, const char *bytes, size_t len);
void sb_puts(strbuf_t *sb, const char *text);
// Appends `text` as a JSON string: quoted, with `"`, `\` and control characters escaped.
void sb_json_string(strbuf_t *sb, const char *text);
// The built string, or NULL when an append failed (then the buffer is freed).
char *sb_finish(strbuf_t *sb);
void sb_free(strbuf_t *sb);

// What a controller reads from an object's metadata. Strings are owned (free with
// kube_meta_free); absent fields are NULL.
typedef struct {
    char *namespace_;  // NULL for cluster-scoped objects
    char *name;
    char *uid;
    char *resource_version;
    bool deleting;  // metadata.deletionTimestamp is set
} kube_meta_t;

// Reads `json[0..len)`'s metadata into `out`; false (nothing to free) when it has no name.
bool kube_meta_parse(const char *json, size_t len, kube_meta_t *out);
void kube_meta_free(kube_meta_t *meta);

// The value of label / annotation `key`, a copy the caller frees; NULL when absent.
char *kube_label(const char *json, size_t len, const char *key);
char *kube_annotation(const char *json, size_t len, const char *key);

// Whether the top-level field `field` (e.g. "data") is the same in both documents: both absent,
// or equal JSON text.
bool kube_same_field(const char *a, size_t a_len, const char *b, size_t b_len, const char *field);

#endif

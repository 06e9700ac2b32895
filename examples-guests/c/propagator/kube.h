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

// Queue rules with predicates, for the declaration `init` returns in contract 0.2.2's world
// `reconciler`: present when that world's generated bindings (reconciler.h) are on the include
// path, absent in a 0.2.0 build (there a subscription's `queue` takes bare rules).
#if defined(__has_include)
#if __has_include("reconciler.h")
#include "reconciler.h"
#define KUBE_HAS_PREDICATES 1

typedef kubewasm_controller_0_2_0_types_queue_rule_t kube_queue_rule_t;
typedef exports_kubewasm_controller_0_2_2_plugin_predicate_t kube_predicate_t;
typedef exports_kubewasm_controller_0_2_2_plugin_queue_spec_t kube_queue_spec_t;

// Any update, resyncs included (a rule without predicates): for a controller reading status.
#define KUBE_RESOURCE_VERSION EXPORTS_KUBEWASM_CONTROLLER_0_2_2_PLUGIN_PREDICATE_RESOURCE_VERSION
// metadata.generation changed: the spec (status writes do not bump it).
#define KUBE_GENERATION EXPORTS_KUBEWASM_CONTROLLER_0_2_2_PLUGIN_PREDICATE_GENERATION
#define KUBE_LABELS EXPORTS_KUBEWASM_CONTROLLER_0_2_2_PLUGIN_PREDICATE_LABELS
#define KUBE_ANNOTATIONS EXPORTS_KUBEWASM_CONTROLLER_0_2_2_PLUGIN_PREDICATE_ANNOTATIONS

// The object's own key (controller-runtime's For).
kube_queue_rule_t kube_own_key(void);
// The key of the object's controlling owner, an object of subscription `owner` (Owns).
kube_queue_rule_t kube_controlling_owner(uint32_t owner);
// `rule` queueing on the updates that change any of `predicates[0..count)`; with none, on every
// update. Adds and deletes always queue. The list is malloc'ed: the bindings free what `init`
// returns. False, with nothing allocated, when a predicate is not one of the four or memory
// runs out.
bool kube_when(kube_queue_rule_t rule, const kube_predicate_t *predicates, size_t count,
               kube_queue_spec_t *out);
#endif
#endif

#endif

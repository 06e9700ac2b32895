// configmap-propagator (C, contract 0.2): copies every ConfigMap labelled
// `kubewasm.io/propagate=true` into every other namespace and keeps the copies equal to it.
//
// A copy has the source's name, data and binaryData, the label `kubewasm.io/propagated=true` and
// the annotation `kubewasm.io/propagated-from: NAMESPACE/NAME`. It has no ownerReference (an owner
// in another namespace is invalid): the copies of a source are found through an index on that
// annotation, and the propagator deletes them itself when the source goes or loses its label.
//
// The workqueue holds sources only, queued by the event handlers (no queue rule): a source's own
// changes queue it, a change to a copy queues the source it names, and a namespace that appears
// or goes queues every source. One reconcile brings all copies of one source in line from the
// cache and writes only what differs, so a settled source costs no write.
//
// Ownership follows wit-bindgen's C conventions: exported functions own their arguments and free
// them, what they return is freed by the generated post-return glue (so it is malloc'ed), and the
// results of imported functions belong to the caller.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller.h"
#include "json.h"
#include "kube.h"

#define PLUGIN_NAME "configmap-propagator-c"
#define PROPAGATE "kubewasm.io/propagate"
#define COPY_LABEL "kubewasm.io/propagated"
#define SOURCE_ANNOTATION "kubewasm.io/propagated-from"
// The index of copies by their source, `NAMESPACE/NAME`.
#define BY_SOURCE "propagated-from"
// How long a copy blocked by someone else's ConfigMap of the same name waits to be tried again.
#define BLOCKED_RETRY_MS 60000

// Subscription handles: positions in init's list.
enum { CONFIGMAPS = 0, NAMESPACES = 1 };

typedef controller_string_t str_t;

// ---- Small wrappers over the generated bindings ----

static str_t borrowed(const char *s) {
    str_t out;
    controller_string_set(&out, s);
    return out;
}

// A NUL-terminated copy of a host string (NULL when out of memory).
static char *c_string(const str_t *s) {
    char *out = malloc(s->len + 1);
    if (out == NULL) return NULL;
    memcpy(out, s->ptr, s->len);
    out[s->len] = '\0';
    return out;
}

static void log_line(kubewasm_controller_log_level_t level, const char *format, ...) {
    char line[512];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    str_t text = borrowed(line);
    kubewasm_controller_log_log(level, &text);
}

static bool fail(str_t *err, const char *reason) {
    controller_string_dup(err, reason);
    return false;
}

// `api-error` as one line, "conflict: ..." (malloc'ed); frees the error.
static char *describe_api_error(kubewasm_controller_types_api_error_t *error) {
    static const char *const names[] = {
        "conflict",    "not-found",         "already-exists", "forbidden",    "invalid",
        "not-granted", "too-many-requests", "timeout",        "server-error",
    };
    const str_t *message;
    switch (error->tag) {
        case KUBEWASM_CONTROLLER_TYPES_API_ERROR_INVALID: message = &error->val.invalid.message; break;
        case KUBEWASM_CONTROLLER_TYPES_API_ERROR_SERVER_ERROR: message = &error->val.server_error.message; break;
        default: message = &error->val.conflict; break;  // every other case carries a string
    }
    const char *name = error->tag < sizeof names / sizeof names[0] ? names[error->tag] : "api-error";
    size_t size = strlen(name) + message->len + 3;
    char *line = malloc(size);
    if (line != NULL) snprintf(line, size, "%s: %.*s", name, (int)message->len, (const char *)message->ptr);
    kubewasm_controller_types_api_error_free(error);
    return line;
}

static void configmap_gvk(kubewasm_controller_types_gvk_t *gvk) {
    gvk->group = borrowed("");
    gvk->version = borrowed("v1");
    gvk->kind = borrowed("ConfigMap");
}

// The cached object into `*out` (owned); false when absent or on a cache error.
static bool cache_get(uint32_t subscription, const char *ns, const char *name, str_t *out) {
    str_t ns_arg = ns ? borrowed(ns) : (str_t){0};
    str_t name_arg = borrowed(name);
    controller_option_string_t found;
    kubewasm_controller_cache_cache_error_t error;
    if (!kubewasm_controller_cache_get(subscription, ns ? &ns_arg : NULL, &name_arg, &found, &error)) {
        kubewasm_controller_cache_cache_error_free(&error);
        return false;
    }
    *out = found.val;
    return found.is_some;
}

// A cache query over pages: a subscription's objects (optionally with a label selector), or
// those whose index holds a value.
typedef struct {
    uint32_t subscription;
    const char *label_selector;  // list: NULL for all
    const char *index;           // by-index when not NULL
    const char *value;
} query_t;

// Calls `each` with every object `query` answers, page by page; stops early when it returns
// false. False (with `*why` set, malloc'ed) when the cache refused.
static bool for_each_object(const query_t *query, bool (*each)(const str_t *object, void *ctx),
                            void *ctx, char **why) {
    kubewasm_controller_types_page_request_t page = {0};
    for (;;) {
        kubewasm_controller_types_object_page_t objects;
        kubewasm_controller_cache_cache_error_t error;
        bool ok;
        if (query->index != NULL) {
            str_t index = borrowed(query->index), value = borrowed(query->value);
            ok = kubewasm_controller_cache_by_index(query->subscription, &index, &value, &page,
                                                    &objects, &error);
        } else {
            str_t selector = query->label_selector ? borrowed(query->label_selector) : (str_t){0};
            ok = kubewasm_controller_cache_list_objects(query->subscription, NULL,
                                                        query->label_selector ? &selector : NULL,
                                                        &page, &objects, &error);
        }
        controller_option_string_free(&page.continue_token);
        if (!ok) {
            kubewasm_controller_cache_cache_error_free(&error);
            *why = strdup("the cache refused a query");
            return false;
        }
        bool go_on = true;
        for (size_t i = 0; go_on && i < objects.objects.len; i++) {
            go_on = each(&objects.objects.ptr[i], ctx);
        }
        page.continue_token = objects.continue_token;
        objects.continue_token.is_some = false;  // moved into the next request
        kubewasm_controller_types_object_page_free(&objects);
        if (!go_on || !page.continue_token.is_some) {
            controller_option_string_free(&page.continue_token);
            return true;
        }
    }
}

// ---- Sources and copies ----

// The source `NAMESPACE/NAME` a ConfigMap is a copy of (malloc'ed), or NULL.
static char *copied_from(const str_t *cm) {
    return kube_annotation((const char *)cm->ptr, cm->len, SOURCE_ANNOTATION);
}

static bool has_propagate_label(const str_t *cm) {
    char *label = kube_label((const char *)cm->ptr, cm->len, PROPAGATE);
    bool yes = label != NULL && strcmp(label, "true") == 0;
    free(label);
    return yes;
}

// A ConfigMap to propagate: labelled, alive, and not itself a copy.
static bool is_source(const str_t *cm, const kube_meta_t *meta) {
    char *from = copied_from(cm);
    bool copy = from != NULL;
    free(from);
    return !copy && !meta->deleting && has_propagate_label(cm);
}

static void enqueue(const char *ns, const char *name) {
    kubewasm_controller_types_key_t key = {
        .subscription = CONFIGMAPS,
        .namespace_ = {.is_some = true, .val = borrowed(ns)},
        .name = borrowed(name),
    };
    str_t error;
    if (!kubewasm_controller_queue_add(&key, &error)) {
        log_line(KUBEWASM_CONTROLLER_LOG_LEVEL_ERROR, "queueing %s/%s: %.*s", ns, name,
                 (int)error.len, (const char *)error.ptr);
        controller_string_free(&error);
    }
}

// Queues the source a change to `cm` concerns: its own key if it is (or was) a source, its
// source's if it is a copy.
static void queue_for(const str_t *cm) {
    char *from = copied_from(cm);
    if (from != NULL) {
        char *slash = strchr(from, '/');
        if (slash != NULL && slash != from) {
            *slash = '\0';
            enqueue(from, slash + 1);
        }
        free(from);
        return;
    }
    kube_meta_t meta;
    if (has_propagate_label(cm) && kube_meta_parse((const char *)cm->ptr, cm->len, &meta)) {
        if (meta.namespace_ != NULL) enqueue(meta.namespace_, meta.name);
        kube_meta_free(&meta);
    }
}

static bool enqueue_source(const str_t *cm, void *ctx) {
    (void)ctx;
    queue_for(cm);
    return true;
}

// A namespace appeared or went: every source has work.
static bool queue_every_source(str_t *err) {
    query_t sources = {.subscription = CONFIGMAPS, .label_selector = PROPAGATE "=true"};
    char *why = NULL;
    if (for_each_object(&sources, enqueue_source, NULL, &why)) return true;
    controller_string_dup(err, why ? why : "out of memory");
    free(why);
    return false;
}

// One reconcile of one source: what it found and did.
typedef struct {
    const char *ns;  // the source's namespace and name (the key's)
    const char *name;
    char *ref;       // "NAMESPACE/NAME"
    str_t source;    // the source, when it is to be propagated; else ptr == NULL
    int written;
    int failed;
    int blocked;
    strbuf_t failures;  // "; "-separated, for the reconcile's error
} propagation_t;

static void failed(propagation_t *p, char *why) {
    p->failed++;
    if (p->failures.len > 0) sb_puts(&p->failures, "; ");
    sb_puts(&p->failures, why ? why : "out of memory");
    free(why);
}

// Whether a copy belongs in namespace `ns`: any live namespace but the source's own.
static bool wanted_in(const propagation_t *p, const char *ns) {
    if (p->source.ptr == NULL || strcmp(ns, p->ns) == 0) return false;
    str_t found;
    if (!cache_get(NAMESPACES, NULL, ns, &found)) return false;
    kube_meta_t meta;
    bool live = false;
    if (kube_meta_parse((const char *)found.ptr, found.len, &meta)) {
        live = !meta.deleting;
        kube_meta_free(&meta);
    }
    controller_string_free(&found);
    return live;
}

// Appends `,"FIELD":VALUE` with the source's raw JSON value of a top-level field, if it has one.
static void copy_field(strbuf_t *doc, const propagation_t *p, const char *field) {
    const char *const path[] = {field};
    size_t len;
    const char *raw = json_get_raw((const char *)p->source.ptr, p->source.len, path, 1, &len);
    if (raw == NULL) return;
    sb_puts(doc, ",");
    sb_json_string(doc, field);
    sb_puts(doc, ":");
    sb_append(doc, raw, len);
}

// The copy for namespace `ns` (malloc'ed JSON); with `resource_version`, as the replacement of
// the current one.
static char *copy_document(const propagation_t *p, const char *ns, const char *resource_version) {
    strbuf_t doc = STRBUF_INIT;
    sb_puts(&doc, "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":");
    sb_json_string(&doc, p->name);
    sb_puts(&doc, ",\"namespace\":");
    sb_json_string(&doc, ns);
    if (resource_version != NULL) {
        sb_puts(&doc, ",\"resourceVersion\":");
        sb_json_string(&doc, resource_version);
    }
    sb_puts(&doc, ",\"labels\":{\"" COPY_LABEL "\":\"true\"},\"annotations\":{\"" SOURCE_ANNOTATION "\":");
    sb_json_string(&doc, p->ref);
    sb_puts(&doc, "}}");
    copy_field(&doc, p, "data");
    copy_field(&doc, p, "binaryData");
    sb_puts(&doc, "}");
    return sb_finish(&doc);
}

// Whether `copy` already carries the source's content and the copy's label.
static bool copy_is_current(const propagation_t *p, const str_t *copy) {
    const char *a = (const char *)p->source.ptr, *b = (const char *)copy->ptr;
    char *label = kube_label(b, copy->len, COPY_LABEL);
    bool labelled = label != NULL && strcmp(label, "true") == 0;
    free(label);
    return labelled && kube_same_field(a, p->source.len, b, copy->len, "data") &&
           kube_same_field(a, p->source.len, b, copy->len, "binaryData");
}

// Creates (no `resource_version`) or replaces the copy in `ns`.
static void write_copy(propagation_t *p, const char *ns, const char *resource_version) {
    char *doc = copy_document(p, ns, resource_version);
    if (doc == NULL) {
        failed(p, NULL);
        return;
    }
    str_t body = borrowed(doc), answer;
    kubewasm_controller_types_api_error_t error;
    bool ok = resource_version == NULL
                  ? kubewasm_controller_client_create(&body, &answer, &error)
                  : kubewasm_controller_client_update(&body, &answer, &error);
    free(doc);
    if (!ok) {
        failed(p, describe_api_error(&error));
        return;
    }
    controller_string_free(&answer);
    p->written++;
}

static void record_blocked(propagation_t *p, const char *ns) {
    kube_meta_t meta;
    if (!kube_meta_parse((const char *)p->source.ptr, p->source.len, &meta)) return;
    char message[512];
    snprintf(message, sizeof message, "%s/%s exists and is not a copy of %s: left alone", ns,
             p->name, p->ref);
    kubewasm_controller_client_event_t event = {
        .regarding = {.namespace_ = {.is_some = true, .val = borrowed(p->ns)},
                      .name = borrowed(p->name)},
        .uid = {.is_some = meta.uid != NULL, .val = borrowed(meta.uid ? meta.uid : "")},
        .event_type = KUBEWASM_CONTROLLER_CLIENT_EVENT_TYPE_WARNING,
        .reason = borrowed("CopyBlocked"),
        .message = borrowed(message),
    };
    configmap_gvk(&event.regarding.gvk);
    kubewasm_controller_types_api_error_t error;
    if (!kubewasm_controller_client_record_event(&event, &error)) {
        char *why = describe_api_error(&error);
        log_line(KUBEWASM_CONTROLLER_LOG_LEVEL_WARN, "event CopyBlocked not recorded: %s",
                 why ? why : "out of memory");
        free(why);
    }
    kube_meta_free(&meta);
}

// For each namespace: create, replace or leave its copy.
static bool sync_namespace(const str_t *ns_object, void *ctx) {
    propagation_t *p = ctx;
    kube_meta_t ns;
    if (!kube_meta_parse((const char *)ns_object->ptr, ns_object->len, &ns)) return true;
    if (!ns.deleting && strcmp(ns.name, p->ns) != 0) {
        str_t copy;
        if (!cache_get(CONFIGMAPS, ns.name, p->name, &copy)) {
            write_copy(p, ns.name, NULL);
        } else {
            char *from = copied_from(&copy);
            kube_meta_t meta;
            if (from == NULL || strcmp(from, p->ref) != 0) {
                p->blocked++;
                record_blocked(p, ns.name);
            } else if (!copy_is_current(p, &copy) &&
                       kube_meta_parse((const char *)copy.ptr, copy.len, &meta)) {
                write_copy(p, ns.name, meta.resource_version);
                kube_meta_free(&meta);
            }
            free(from);
            controller_string_free(&copy);
        }
    }
    kube_meta_free(&ns);
    return true;
}

// For each copy of the source: delete it unless its namespace still wants it.
static bool prune_copy(const str_t *copy, void *ctx) {
    propagation_t *p = ctx;
    kube_meta_t meta;
    if (!kube_meta_parse((const char *)copy->ptr, copy->len, &meta) || meta.namespace_ == NULL) {
        return true;
    }
    if (!wanted_in(p, meta.namespace_)) {
        kubewasm_controller_client_object_ref_t target = {
            .namespace_ = {.is_some = true, .val = borrowed(meta.namespace_)},
            .name = borrowed(meta.name),
        };
        configmap_gvk(&target.gvk);
        // Only this copy: not a newer object that took its name.
        kubewasm_controller_client_delete_options_t options = {
            .uid = {.is_some = meta.uid != NULL, .val = borrowed(meta.uid ? meta.uid : "")},
        };
        kubewasm_controller_client_deleted_t deleted;
        kubewasm_controller_types_api_error_t error;
        if (kubewasm_controller_client_delete(&target, &options, &deleted, &error)) {
            kubewasm_controller_client_deleted_free(&deleted);
            p->written++;
        } else if (error.tag == KUBEWASM_CONTROLLER_TYPES_API_ERROR_NOT_FOUND) {
            kubewasm_controller_types_api_error_free(&error);
        } else {
            failed(p, describe_api_error(&error));
        }
    }
    kube_meta_free(&meta);
    return true;
}

// ---- Exports ----

bool exports_kubewasm_controller_plugin_init(str_t *config,
                                             exports_kubewasm_controller_plugin_plugin_info_t *ret,
                                             str_t *err) {
    controller_string_free(config);
    kubewasm_controller_types_subscription_t *subscriptions = calloc(2, sizeof(*subscriptions));
    kubewasm_controller_types_index_decl_t *index = calloc(1, sizeof(*index));
    if (subscriptions == NULL || index == NULL) {
        free(subscriptions);
        free(index);
        return fail(err, "out of memory");
    }
    static const char *const kinds[] = {"ConfigMap", "Namespace"};
    for (size_t i = 0; i < 2; i++) {
        controller_string_dup(&subscriptions[i].gvk.group, "");
        controller_string_dup(&subscriptions[i].gvk.version, "v1");
        controller_string_dup(&subscriptions[i].gvk.kind, kinds[i]);
        subscriptions[i].events = true;  // the handlers queue the keys: no queue rule
    }
    index->subscription = CONFIGMAPS;
    controller_string_dup(&index->name, BY_SOURCE);
    index->source.tag = KUBEWASM_CONTROLLER_TYPES_INDEX_SOURCE_ANNOTATION;
    controller_string_dup(&index->source.val.annotation, SOURCE_ANNOTATION);

    controller_string_dup(&ret->name, PLUGIN_NAME);
    ret->subscriptions.ptr = subscriptions;
    ret->subscriptions.len = 2;
    ret->indexes.ptr = index;
    ret->indexes.len = 1;
    return true;
}

bool exports_kubewasm_controller_handler_on_add(uint32_t subscription, str_t *object,
                                                bool in_initial_list, str_t *err) {
    bool ok = true;
    if (subscription == CONFIGMAPS) {
        queue_for(object);
    } else {
        ok = queue_every_source(err);
    }
    controller_string_free(object);
    return ok;
}

bool exports_kubewasm_controller_handler_on_update(uint32_t subscription, str_t *old, str_t *new_,
                                                   str_t *err) {
    // Namespaces: one that starts terminating needs nothing (its copies go with it).
    if (subscription == CONFIGMAPS) {
        // Both states: a source that lost its label is queued by its old state, and cleaned up.
        queue_for(old);
        queue_for(new_);
    }
    controller_string_free(old);
    controller_string_free(new_);
    return true;
}

bool exports_kubewasm_controller_handler_on_delete(uint32_t subscription, str_t *object,
                                                   bool final_state_unknown, str_t *err) {
    return exports_kubewasm_controller_handler_on_add(subscription, object, false, err);
}

bool exports_kubewasm_controller_reconcile_reconcile(exports_kubewasm_controller_reconcile_key_t *key,
                                                     exports_kubewasm_controller_reconcile_action_t *ret,
                                                     str_t *err) {
    propagation_t p = {.failures = STRBUF_INIT};
    char *ns = key->namespace_.is_some ? c_string(&key->namespace_.val) : NULL;
    char *name = c_string(&key->name);
    exports_kubewasm_controller_reconcile_key_free(key);
    size_t ref_size = (ns ? strlen(ns) : 0) + (name ? strlen(name) : 0) + 2;
    p.ref = malloc(ref_size);
    if (ns == NULL || name == NULL || p.ref == NULL) {
        free(ns);
        free(name);
        free(p.ref);
        return fail(err, "a ConfigMap key without a namespace, or out of memory");
    }
    snprintf(p.ref, ref_size, "%s/%s", ns, name);
    p.ns = ns;
    p.name = name;

    str_t found;
    if (cache_get(CONFIGMAPS, ns, name, &found)) {
        kube_meta_t meta;
        if (kube_meta_parse((const char *)found.ptr, found.len, &meta)) {
            if (is_source(&found, &meta)) p.source = found;
            kube_meta_free(&meta);
        }
        if (p.source.ptr == NULL) controller_string_free(&found);
    }

    char *why = NULL;
    if (p.source.ptr != NULL) {
        query_t namespaces = {.subscription = NAMESPACES};
        if (!for_each_object(&namespaces, sync_namespace, &p, &why)) failed(&p, why);
    }
    // Copies no longer wanted: all of them without a source, else those in namespaces that are
    // gone, terminating, or the source's own.
    query_t copies = {.subscription = CONFIGMAPS, .index = BY_SOURCE, .value = p.ref};
    why = NULL;
    if (!for_each_object(&copies, prune_copy, &p, &why)) failed(&p, why);

    log_line(KUBEWASM_CONTROLLER_LOG_LEVEL_INFO, "reconciled %s: %s, %d written, %d failed, %d blocked",
             p.ref, p.source.ptr ? "source" : "no source", p.written, p.failed, p.blocked);
    bool ok = p.failed == 0;
    if (!ok) {
        // The host retries the key with its exponential backoff.
        char *failures = sb_finish(&p.failures);
        controller_string_dup(err, failures ? failures : "writes failed");
        free(failures);
    } else if (p.blocked > 0) {
        ret->tag = EXPORTS_KUBEWASM_CONTROLLER_RECONCILE_ACTION_REQUEUE_AFTER;
        ret->val.requeue_after = BLOCKED_RETRY_MS;
    } else {
        ret->tag = EXPORTS_KUBEWASM_CONTROLLER_RECONCILE_ACTION_DONE;
    }
    sb_free(&p.failures);
    if (p.source.ptr != NULL) controller_string_free(&p.source);
    free(p.ref);
    free(ns);
    free(name);
    return ok;
}

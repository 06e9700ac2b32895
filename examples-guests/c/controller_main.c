// configmap-counter (C): on every ConfigMap event, logs how many ConfigMaps the event's namespace
// holds and how many ConfigMaps share the object's `app` label.
//
// Both counts are kept from the events themselves (counts.c), so each event costs O(1) whatever
// the number of ConfigMaps: asking the host's cache (`list-objects`, `by-index`) on every event
// would copy every matching object into the guest each time, O(n) per event and O(n^2) for the
// initial list. The replay of the initial list arrives as adds (a fresh instance starts from
// zero and counts them), a delete (also one whose final state is unknown, after a relist)
// subtracts, and an update moves the object between `app` counts when its label changed.
//
// Ownership follows wit-bindgen's C conventions: exported functions own their arguments and free
// them; what they return is freed by the generated post-return glue, so it is malloc'ed; results
// of imported functions belong to the caller.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller.h"
#include "counts.h"
#include "json.h"

#define PLUGIN_NAME "configmap-counter-c"

// ConfigMaps per namespace and per `app` label value, from the events seen so far.
static counts_t per_namespace = COUNTS_INIT;
static counts_t per_app = COUNTS_INIT;

static void gvk_configmap(kubewasm_controller_types_gvk_t *out) {
    controller_string_dup(&out->group, "");
    controller_string_dup(&out->version, "v1");
    controller_string_dup(&out->kind, "ConfigMap");
}

static controller_string_t borrowed(const char *s) {
    controller_string_t out;
    controller_string_set(&out, s);
    return out;
}

static void log_line(kubewasm_controller_log_level_t level, const char *message) {
    controller_string_t text = borrowed(message);
    kubewasm_controller_log_log(level, &text);
}

static bool fail(controller_string_t *err, const char *reason) {
    controller_string_dup(err, reason);
    return false;
}

bool exports_kubewasm_controller_handler_init(controller_string_t *config,
                                              exports_kubewasm_controller_handler_plugin_info_t *ret,
                                              controller_string_t *err) {
    controller_string_free(config);

    kubewasm_controller_types_subscription_t *subscription = calloc(1, sizeof(*subscription));
    if (subscription == NULL) return fail(err, "out of memory");
    gvk_configmap(&subscription->gvk);
    subscription->namespace_.is_some = false;
    subscription->label_selector.is_some = false;
    subscription->field_selector.is_some = false;
    subscription->resync_seconds.is_some = false;
    subscription->delivery = KUBEWASM_CONTROLLER_TYPES_DELIVERY_EVENTS;

    controller_string_dup(&ret->name, PLUGIN_NAME);
    ret->subscriptions.ptr = subscription;
    ret->subscriptions.len = 1;
    ret->indexes.ptr = NULL;
    ret->indexes.len = 0;
    return true;
}

// The fields of an object the counts and the log line need; NULL when absent.
typedef struct {
    char *ns;
    char *name;
    char *app;
} identity_t;

static void identity_free(identity_t *id) {
    free(id->ns);
    free(id->name);
    free(id->app);
}

// Reads the namespace, name and `app` label of `object`; false (with `err` set) without a
// namespace or name.
static bool identity_of(const controller_string_t *object, identity_t *id, controller_string_t *err) {
    static const char *const namespace_path[] = {"metadata", "namespace"};
    static const char *const name_path[] = {"metadata", "name"};
    static const char *const app_path[] = {"metadata", "labels", "app"};
    const char *json = (const char *)object->ptr;
    id->ns = json_get_string(json, object->len, namespace_path, 2);
    id->name = json_get_string(json, object->len, name_path, 2);
    id->app = json_get_string(json, object->len, app_path, 3);
    if (id->ns == NULL || id->name == NULL) {
        identity_free(id);
        return fail(err, "object without metadata.namespace or metadata.name");
    }
    return true;
}

// Adds `delta` to the object's namespace and `app` counts.
static bool count(const identity_t *id, long delta, controller_string_t *err) {
    bool ok;
    counts_add(&per_namespace, id->ns, delta, &ok);
    if (ok && id->app != NULL) counts_add(&per_app, id->app, delta, &ok);
    return ok ? true : fail(err, "out of memory");
}

// Logs one line for the object: event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M
// (`app=- app_peers=0` when the object has no `app` label).
static bool report(const char *event, const identity_t *id, controller_string_t *err) {
    long ns_count = counts_get(&per_namespace, id->ns);
    long app_peers = id->app != NULL ? counts_get(&per_app, id->app) : 0;
    size_t size = strlen(event) + strlen(id->ns) + strlen(id->name) +
                  (id->app ? strlen(id->app) : 1) + 96;
    char *line = malloc(size);
    if (line == NULL) return fail(err, "out of memory");
    snprintf(line, size, "event=%s ns=%s name=%s ns_count=%ld app=%s app_peers=%ld", event,
             id->ns, id->name, ns_count, id->app ? id->app : "-", app_peers);
    log_line(KUBEWASM_CONTROLLER_LOG_LEVEL_INFO, line);
    free(line);
    return true;
}

// Counts `object` with `delta` (+1 added, -1 deleted) and reports it.
static bool handle(const char *event, const controller_string_t *object, long delta,
                   controller_string_t *err) {
    identity_t id;
    if (!identity_of(object, &id, err)) return false;
    bool ok = count(&id, delta, err) && report(event, &id, err);
    identity_free(&id);
    return ok;
}

bool exports_kubewasm_controller_handler_on_add(exports_kubewasm_controller_handler_gvk_t *gvk,
                                                controller_string_t *object, bool in_initial_list,
                                                controller_string_t *err) {
    bool ok = handle("add", object, 1, err);
    exports_kubewasm_controller_handler_gvk_free(gvk);
    controller_string_free(object);
    return ok;
}

bool exports_kubewasm_controller_handler_on_update(exports_kubewasm_controller_handler_gvk_t *gvk,
                                                   controller_string_t *old, controller_string_t *new_,
                                                   controller_string_t *err) {
    // The old state leaves its counts, the new one enters them: a changed label moves it.
    identity_t before;
    bool ok = identity_of(old, &before, err);
    if (ok) {
        ok = count(&before, -1, err) && handle("update", new_, 1, err);
        identity_free(&before);
    }
    exports_kubewasm_controller_handler_gvk_free(gvk);
    controller_string_free(old);
    controller_string_free(new_);
    return ok;
}

bool exports_kubewasm_controller_handler_on_delete(exports_kubewasm_controller_handler_gvk_t *gvk,
                                                   controller_string_t *object, bool final_state_unknown,
                                                   controller_string_t *err) {
    bool ok = handle("delete", object, -1, err);
    exports_kubewasm_controller_handler_gvk_free(gvk);
    controller_string_free(object);
    return ok;
}

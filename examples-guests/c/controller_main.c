// configmap-counter (C): on every ConfigMap event, logs how many ConfigMaps the event's namespace
// holds and how many ConfigMaps share the object's `app` label, both answered by the host's
// shared cache (`list-objects` and `by-index` on the declared index `app`).
//
// Ownership follows wit-bindgen's C conventions: exported functions own their arguments and free
// them; what they return is freed by the generated post-return glue, so it is malloc'ed; results
// of imported functions belong to the caller.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controller.h"
#include "json.h"

#define PLUGIN_NAME "configmap-counter-c"
#define APP_INDEX "app"

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

static const char *cache_error_text(const kubewasm_controller_types_cache_error_t *error) {
    switch (error->tag) {
        case KUBEWASM_CONTROLLER_TYPES_CACHE_ERROR_NOT_GRANTED: return "not granted";
        case KUBEWASM_CONTROLLER_TYPES_CACHE_ERROR_NOT_SUBSCRIBED: return "not subscribed";
        case KUBEWASM_CONTROLLER_TYPES_CACHE_ERROR_UNKNOWN_INDEX: return "unknown index";
        default: return "invalid request";
    }
}

bool exports_kubewasm_controller_handler_init(controller_string_t *config,
                                              exports_kubewasm_controller_handler_plugin_info_t *ret,
                                              controller_string_t *err) {
    controller_string_free(config);

    kubewasm_controller_types_subscription_t *subscription = calloc(1, sizeof(*subscription));
    kubewasm_controller_types_index_decl_t *index = calloc(1, sizeof(*index));
    if (subscription == NULL || index == NULL) {
        free(subscription);
        free(index);
        return fail(err, "out of memory");
    }
    gvk_configmap(&subscription->gvk);
    subscription->namespace_.is_some = false;
    subscription->label_selector.is_some = false;
    subscription->field_selector.is_some = false;
    subscription->resync_seconds.is_some = false;
    subscription->delivery = KUBEWASM_CONTROLLER_TYPES_DELIVERY_EVENTS;

    controller_string_dup(&index->name, APP_INDEX);
    gvk_configmap(&index->gvk);
    index->source.tag = KUBEWASM_CONTROLLER_TYPES_INDEX_SOURCE_LABEL;
    controller_string_dup(&index->source.val.label, "app");

    controller_string_dup(&ret->name, PLUGIN_NAME);
    ret->subscriptions.ptr = subscription;
    ret->subscriptions.len = 1;
    ret->indexes.ptr = index;
    ret->indexes.len = 1;
    return true;
}

// Logs one line for `object`: event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M
// (`app=- app_peers=0` when the object has no `app` label).
static bool report(const char *event, const controller_string_t *object, controller_string_t *err) {
    static const char *const namespace_path[] = {"metadata", "namespace"};
    static const char *const name_path[] = {"metadata", "name"};
    static const char *const app_path[] = {"metadata", "labels", "app"};
    const char *json = (const char *)object->ptr;
    char *ns = json_get_string(json, object->len, namespace_path, 2);
    char *name = json_get_string(json, object->len, name_path, 2);
    char *app = json_get_string(json, object->len, app_path, 3);
    bool ok = false;
    char reason[160];
    if (ns == NULL || name == NULL) {
        snprintf(reason, sizeof reason, "object without metadata.namespace or metadata.name");
        goto done;
    }

    kubewasm_controller_types_gvk_t configmaps;
    configmaps.group = borrowed("");
    configmaps.version = borrowed("v1");
    configmaps.kind = borrowed("ConfigMap");

    controller_string_t ns_arg = borrowed(ns);
    controller_list_string_t in_namespace;
    kubewasm_controller_types_cache_error_t cache_err;
    if (!kubewasm_controller_cache_list_objects(&configmaps, &ns_arg, NULL, &in_namespace, &cache_err)) {
        snprintf(reason, sizeof reason, "list-objects: %s", cache_error_text(&cache_err));
        kubewasm_controller_types_cache_error_free(&cache_err);
        goto done;
    }
    size_t ns_count = in_namespace.len;
    controller_list_string_free(&in_namespace);

    size_t app_peers = 0;
    if (app != NULL) {
        controller_string_t index_arg = borrowed(APP_INDEX);
        controller_string_t value_arg = borrowed(app);
        controller_list_string_t peers;
        if (!kubewasm_controller_cache_by_index(&configmaps, &index_arg, &value_arg, &peers, &cache_err)) {
            snprintf(reason, sizeof reason, "by-index: %s", cache_error_text(&cache_err));
            kubewasm_controller_types_cache_error_free(&cache_err);
            goto done;
        }
        app_peers = peers.len;
        controller_list_string_free(&peers);
    }

    size_t size = strlen(event) + strlen(ns) + strlen(name) + (app ? strlen(app) : 1) + 96;
    char *line = malloc(size);
    if (line == NULL) {
        snprintf(reason, sizeof reason, "out of memory");
        goto done;
    }
    snprintf(line, size, "event=%s ns=%s name=%s ns_count=%zu app=%s app_peers=%zu", event, ns,
             name, ns_count, app ? app : "-", app_peers);
    log_line(KUBEWASM_CONTROLLER_LOG_LEVEL_INFO, line);
    free(line);
    ok = true;

done:
    if (!ok) controller_string_dup(err, reason);
    free(ns);
    free(name);
    free(app);
    return ok;
}

bool exports_kubewasm_controller_handler_on_add(exports_kubewasm_controller_handler_gvk_t *gvk,
                                                controller_string_t *object, bool in_initial_list,
                                                controller_string_t *err) {
    bool ok = report("add", object, err);
    exports_kubewasm_controller_handler_gvk_free(gvk);
    controller_string_free(object);
    return ok;
}

bool exports_kubewasm_controller_handler_on_update(exports_kubewasm_controller_handler_gvk_t *gvk,
                                                   controller_string_t *old, controller_string_t *new_,
                                                   controller_string_t *err) {
    bool ok = report("update", new_, err);
    exports_kubewasm_controller_handler_gvk_free(gvk);
    controller_string_free(old);
    controller_string_free(new_);
    return ok;
}

bool exports_kubewasm_controller_handler_on_delete(exports_kubewasm_controller_handler_gvk_t *gvk,
                                                   controller_string_t *object, bool final_state_unknown,
                                                   controller_string_t *err) {
    bool ok = report("delete", object, err);
    exports_kubewasm_controller_handler_gvk_free(gvk);
    controller_string_free(object);
    return ok;
}

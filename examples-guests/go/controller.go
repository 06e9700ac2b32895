// Package export_kubewasm_controller_handler is configmap-counter (Go): on every ConfigMap event
// it logs how many ConfigMaps the event's namespace holds and how many ConfigMaps share the
// object's `app` label, both answered by the host's shared cache (`list-objects` and `by-index`
// on the declared index `app`).
//
// The package name is the one wit-bindgen's Go generator expects the exported interface
// `kubewasm:controller/handler` to be implemented in; the xtask copies this file next to the
// generated bindings.
package export_kubewasm_controller_handler

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"wit_component/kubewasm_controller_cache"
	"wit_component/kubewasm_controller_log"
	. "wit_component/kubewasm_controller_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

const (
	pluginName = "configmap-counter-go"
	appIndex   = "app"
	// Collect garbage once this many bytes were allocated since the last collection.
	gcEvery = 4 << 20
)

var configMaps = Gvk{Group: "", Version: "v1", Kind: "ConfigMap"}

// init turns Go's automatic garbage collector off as the runtime starts (before any export is
// called): a collection that starts inside `cabi_realloc`, while the host copies arguments or
// results in, calls out of the instance and traps it ("cannot leave component instance").
// collectGarbage runs the collector explicitly at the end of each handler instead.
func init() {
	debug.SetGCPercent(-1)
}

// Init declares the subscription (ConfigMaps, all namespaces) and the index on the label `app`.
func Init(config string) witTypes.Result[PluginInfo, string] {
	return witTypes.Ok[PluginInfo, string](PluginInfo{
		Name: pluginName,
		Subscriptions: []Subscription{{
			Gvk:           configMaps,
			Namespace:     witTypes.None[string](),
			LabelSelector: witTypes.None[string](),
			FieldSelector: witTypes.None[string](),
			ResyncSeconds: witTypes.None[uint32](),
			Delivery:      Delivery_Events,
		}},
		Indexes: []IndexDecl{{
			Name:   appIndex,
			Gvk:    configMaps,
			Source: MakeIndexSourceLabel("app"),
		}},
	})
}

// OnAdd reports an added ConfigMap.
func OnAdd(gvk Gvk, object string, inInitialList bool) witTypes.Result[witTypes.Unit, string] {
	return finish(report("add", object))
}

// OnUpdate reports the new state of a changed ConfigMap.
func OnUpdate(gvk Gvk, old string, new string) witTypes.Result[witTypes.Unit, string] {
	return finish(report("update", new))
}

// OnDelete reports a deleted ConfigMap (already gone from the cache).
func OnDelete(gvk Gvk, object string, finalStateUnknown bool) witTypes.Result[witTypes.Unit, string] {
	return finish(report("delete", object))
}

type objectMeta struct {
	Metadata struct {
		Namespace string            `json:"namespace"`
		Name      string            `json:"name"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// report logs `event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M` for one object
// (`app=- app_peers=0` when the object has no `app` label).
func report(event string, raw string) error {
	var object objectMeta
	if err := json.Unmarshal([]byte(raw), &object); err != nil {
		return fmt.Errorf("object is not JSON: %w", err)
	}
	meta := object.Metadata
	if meta.Namespace == "" || meta.Name == "" {
		return fmt.Errorf("object without metadata.namespace or metadata.name")
	}
	inNamespace := kubewasm_controller_cache.ListObjects(configMaps, witTypes.Some(meta.Namespace), witTypes.None[string]())
	if inNamespace.IsErr() {
		return fmt.Errorf("list-objects failed: %s", cacheErrorText(inNamespace.Err()))
	}
	app, hasApp := meta.Labels["app"]
	appPeers := 0
	if hasApp {
		peers := kubewasm_controller_cache.ByIndex(configMaps, appIndex, app)
		if peers.IsErr() {
			return fmt.Errorf("by-index failed: %s", cacheErrorText(peers.Err()))
		}
		appPeers = len(peers.Ok())
	} else {
		app = "-"
	}
	kubewasm_controller_log.Log(kubewasm_controller_log.Level_Info, fmt.Sprintf(
		"event=%s ns=%s name=%s ns_count=%d app=%s app_peers=%d",
		event, meta.Namespace, meta.Name, len(inNamespace.Ok()), app, appPeers))
	return nil
}

func cacheErrorText(err CacheError) string {
	switch err.Tag() {
	case CacheError_NotGranted:
		return "not granted: " + err.NotGranted()
	case CacheError_NotSubscribed:
		return "not subscribed: " + err.NotSubscribed()
	case CacheError_UnknownIndex:
		return "unknown index: " + err.UnknownIndex()
	default:
		return "invalid request: " + err.Invalid()
	}
}

func finish(err error) witTypes.Result[witTypes.Unit, string] {
	collectGarbage()
	if err != nil {
		return witTypes.Err[witTypes.Unit, string](err.Error())
	}
	return witTypes.Ok[witTypes.Unit, string](witTypes.Unit{})
}

var (
	allocated   = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocatedAt uint64
)

// collectGarbage runs a collection, between calls where it is safe, once gcEvery bytes were
// allocated since the last one.
func collectGarbage() {
	metrics.Read(allocated)
	now := allocated[0].Value.Uint64()
	if now-allocatedAt >= gcEvery {
		runtime.GC()
		allocatedAt = now
	}
}

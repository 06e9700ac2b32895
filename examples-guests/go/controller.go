// Package export_kubewasm_controller_handler is configmap-counter (Go): on every ConfigMap event
// it logs how many ConfigMaps the event's namespace holds and how many ConfigMaps share the
// object's `app` label.
//
// Both counts are kept from the events themselves, so each event costs O(1) whatever the number
// of ConfigMaps: asking the host's cache (`list-objects`, `by-index`) on every event would copy
// every matching object into the guest each time, O(n) per event and O(n^2) for the initial
// list. The replay of the initial list arrives as adds (a fresh instance starts from zero and
// counts them), a delete (also one whose final state is unknown, after a relist) subtracts, and
// an update moves the object between `app` counts when its label changed.
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

	"wit_component/kubewasm_controller_log"
	. "wit_component/kubewasm_controller_types"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

const (
	pluginName = "configmap-counter-go"
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

// ConfigMaps per namespace and per `app` label value, from the events seen so far.
var (
	perNamespace = map[string]int{}
	perApp       = map[string]int{}
)

// Init declares the subscription: ConfigMaps, all namespaces.
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
		Indexes: []IndexDecl{},
	})
}

// OnAdd counts and reports an added ConfigMap (also one replayed from the initial list).
func OnAdd(gvk Gvk, object string, inInitialList bool) witTypes.Result[witTypes.Unit, string] {
	meta, err := parse(object)
	if err == nil {
		count(meta, 1)
		report("add", meta)
	}
	return finish(err)
}

// OnUpdate moves a changed ConfigMap between counts if its label changed, and reports it.
func OnUpdate(gvk Gvk, old string, new string) witTypes.Result[witTypes.Unit, string] {
	oldMeta, err := parse(old)
	if err != nil {
		return finish(err)
	}
	meta, err := parse(new)
	if err == nil {
		count(oldMeta, -1)
		count(meta, 1)
		report("update", meta)
	}
	return finish(err)
}

// OnDelete uncounts and reports a deleted ConfigMap.
func OnDelete(gvk Gvk, object string, finalStateUnknown bool) witTypes.Result[witTypes.Unit, string] {
	meta, err := parse(object)
	if err == nil {
		count(meta, -1)
		report("delete", meta)
	}
	return finish(err)
}

type metadata struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels"`
}

// parse reads the object's namespace, name and labels.
func parse(raw string) (metadata, error) {
	var object struct {
		Metadata metadata `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(raw), &object); err != nil {
		return metadata{}, fmt.Errorf("object is not JSON: %w", err)
	}
	if object.Metadata.Namespace == "" || object.Metadata.Name == "" {
		return metadata{}, fmt.Errorf("object without metadata.namespace or metadata.name")
	}
	return object.Metadata, nil
}

// count adds delta to the object's counts; a count back at zero is dropped, so the maps hold
// only namespaces and labels that have ConfigMaps.
func count(meta metadata, delta int) {
	add := func(counts map[string]int, key string) {
		counts[key] += delta
		if counts[key] == 0 {
			delete(counts, key)
		}
	}
	add(perNamespace, meta.Namespace)
	if app, ok := meta.Labels["app"]; ok {
		add(perApp, app)
	}
}

// report logs `event=EVENT ns=NS name=NAME ns_count=N app=APP app_peers=M` for one object
// (`app=- app_peers=0` when the object has no `app` label).
func report(event string, meta metadata) {
	app, hasApp := meta.Labels["app"]
	appPeers := 0
	if hasApp {
		appPeers = perApp[app]
	} else {
		app = "-"
	}
	kubewasm_controller_log.Log(kubewasm_controller_log.Level_Info, fmt.Sprintf(
		"event=%s ns=%s name=%s ns_count=%d app=%s app_peers=%d",
		event, meta.Namespace, meta.Name, perNamespace[meta.Namespace], app, appPeers))
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

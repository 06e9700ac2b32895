// Package kube is a small, idiomatic Go face over the kubewasm contract (0.2.2's `reconciler`
// world): the declaration (subscriptions whose queue rules say which updates queue, with
// predicates), typed reads and writes over the `cache` and `client` imports (objects as Go
// structs with json tags), errors as Go errors whose kind can be tested with errors.Is, and the
// garbage-collection workaround every Go guest needs.
package kube

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

	"wit_component/kubewasm_controller_0_2_0_cache"
	"wit_component/kubewasm_controller_0_2_0_client"
	"wit_component/kubewasm_controller_0_2_0_log"
	"wit_component/kubewasm_controller_0_2_0_types"
	"wit_component/kubewasm_controller_0_2_2_plugin"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// The kinds of write errors, for errors.Is: a write that fails answers an *APIError whose Is
// matches one of these.
var (
	ErrConflict        = errors.New("conflict")
	ErrNotFound        = errors.New("not found")
	ErrAlreadyExists   = errors.New("already exists")
	ErrForbidden       = errors.New("forbidden")
	ErrInvalid         = errors.New("invalid")
	ErrNotGranted      = errors.New("not granted")
	ErrTooManyRequests = errors.New("too many requests")
	ErrTimeout         = errors.New("timeout")
	ErrServer          = errors.New("server error")
)

// APIError is a write the API server (or the host) refused.
type APIError struct {
	Kind    error
	Message string
}

func (e *APIError) Error() string        { return fmt.Sprintf("%v: %s", e.Kind, e.Message) }
func (e *APIError) Is(target error) bool { return target == e.Kind }

func apiError(e kubewasm_controller_0_2_0_types.ApiError) error {
	switch e.Tag() {
	case kubewasm_controller_0_2_0_types.ApiError_Conflict:
		return &APIError{ErrConflict, e.Conflict()}
	case kubewasm_controller_0_2_0_types.ApiError_NotFound:
		return &APIError{ErrNotFound, e.NotFound()}
	case kubewasm_controller_0_2_0_types.ApiError_AlreadyExists:
		return &APIError{ErrAlreadyExists, e.AlreadyExists()}
	case kubewasm_controller_0_2_0_types.ApiError_Forbidden:
		return &APIError{ErrForbidden, e.Forbidden()}
	case kubewasm_controller_0_2_0_types.ApiError_Invalid:
		return &APIError{ErrInvalid, e.Invalid().Message}
	case kubewasm_controller_0_2_0_types.ApiError_NotGranted:
		return &APIError{ErrNotGranted, e.NotGranted()}
	case kubewasm_controller_0_2_0_types.ApiError_TooManyRequests:
		return &APIError{ErrTooManyRequests, e.TooManyRequests()}
	case kubewasm_controller_0_2_0_types.ApiError_Timeout:
		return &APIError{ErrTimeout, e.Timeout()}
	default:
		s := e.ServerError()
		return &APIError{ErrServer, fmt.Sprintf("%d %s: %s", s.Code, s.Reason, s.Message)}
	}
}

// GVK names a resource type; Group is "" for the core group.
type GVK = kubewasm_controller_0_2_0_types.Gvk

// PluginInfo is what the exported `plugin.init` answers: the plugin's name, subscriptions and
// indexes.
type PluginInfo = kubewasm_controller_0_2_2_plugin.PluginInfo

// Subscription is one informer the plugin wants, and what its changes queue.
type Subscription = kubewasm_controller_0_2_2_plugin.Subscription

// QueueRule says whose key a change of an object queues: OwnKey or ControllingOwner.
type QueueRule = kubewasm_controller_0_2_0_types.QueueRule

// Queue is a queue rule and the updates it queues on (When makes one).
type Queue = kubewasm_controller_0_2_2_plugin.QueueSpec

// Predicate is a change between an update's old and new object that makes a queue rule queue.
type Predicate = kubewasm_controller_0_2_2_plugin.Predicate

const (
	// ResourceVersion: any update, resyncs included (what a rule without predicates does); for
	// a controller that reads the object's status.
	ResourceVersion Predicate = kubewasm_controller_0_2_2_plugin.Predicate_ResourceVersion
	// Generation: metadata.generation changed, that is the spec; status writes do not bump it
	// (controller-runtime's GenerationChangedPredicate).
	Generation Predicate = kubewasm_controller_0_2_2_plugin.Predicate_Generation
	// Labels: metadata.labels changed.
	Labels Predicate = kubewasm_controller_0_2_2_plugin.Predicate_Labels
	// Annotations: metadata.annotations changed.
	Annotations Predicate = kubewasm_controller_0_2_2_plugin.Predicate_Annotations
)

// OwnKey queues the object's own key (controller-runtime's For).
func OwnKey() QueueRule { return kubewasm_controller_0_2_0_types.MakeQueueRuleOwnKey() }

// ControllingOwner queues the key of the object's controlling owner, an object of the
// subscription `owner` (controller-runtime's Owns).
func ControllingOwner(owner uint32) QueueRule {
	return kubewasm_controller_0_2_0_types.MakeQueueRuleControllingOwner(owner)
}

// When is `rule` queueing on the updates that change any of `predicates`; with none, on every
// update. Adds and deletes always queue. When(OwnKey(), Generation) leaves out the controller's
// own status writes, which would otherwise each reconcile the object again for nothing.
func When(rule QueueRule, predicates ...Predicate) Queue {
	return Queue{Rule: rule, When: append([]Predicate{}, predicates...)}
}

// Subscribe is a subscription to every object of gvk (all namespaces, no selectors, no
// resync, no event handlers: the world has none) whose changes queue what `queue` says.
func Subscribe(gvk GVK, queue ...Queue) Subscription {
	return Subscription{
		Gvk:           gvk,
		Namespace:     witTypes.None[string](),
		LabelSelector: witTypes.None[string](),
		FieldSelector: witTypes.None[string](),
		ResyncSeconds: witTypes.None[uint32](),
		Events:        false,
		Queue:         append([]Queue{}, queue...),
	}
}

// Get reads the object namespace/name of the subscription `handle` from the host's cache into
// out; found is false when the cache has no such object.
func Get(handle uint32, namespace, name string, out any) (found bool, err error) {
	result := kubewasm_controller_0_2_0_cache.Get(handle, witTypes.Some(namespace), name)
	if result.IsErr() {
		return false, fmt.Errorf("cache get %s/%s: error %d", namespace, name, result.Err().Tag())
	}
	object := result.Ok()
	if object.IsNone() {
		return false, nil
	}
	if err := json.Unmarshal([]byte(object.Some()), out); err != nil {
		return false, fmt.Errorf("decoding %s/%s: %w", namespace, name, err)
	}
	return true, nil
}

func answer(result witTypes.Result[string, kubewasm_controller_0_2_0_types.ApiError], out any) error {
	if result.IsErr() {
		return apiError(result.Err())
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal([]byte(result.Ok()), out)
}

// Create creates object (which carries its apiVersion, kind and metadata) and decodes the
// server's answer into out (nil: ignored).
func Create(object, out any) error {
	body, err := json.Marshal(object)
	if err != nil {
		return err
	}
	return answer(kubewasm_controller_0_2_0_client.Create(string(body)), out)
}

// Update replaces object; its metadata.resourceVersion is the precondition (a stale one is
// ErrConflict).
func Update(object, out any) error {
	body, err := json.Marshal(object)
	if err != nil {
		return err
	}
	return answer(kubewasm_controller_0_2_0_client.Update(string(body)), out)
}

// MergePatchStatus applies a JSON merge patch to the status subresource of namespace/name.
func MergePatchStatus(gvk GVK, namespace, name string, patch any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	target := kubewasm_controller_0_2_0_types.ObjectRef{Gvk: gvk, Namespace: witTypes.Some(namespace), Name: name}
	return answer(kubewasm_controller_0_2_0_client.PatchStatus(target, kubewasm_controller_0_2_0_client.MakePatchBodyMerge(string(body))), nil)
}

// EventType is Normal or Warning.
type EventType = kubewasm_controller_0_2_0_client.EventType

const (
	Normal  EventType = kubewasm_controller_0_2_0_client.EventType_Normal
	Warning EventType = kubewasm_controller_0_2_0_client.EventType_Warning
)

// Record records a Kubernetes Event about an object (aggregated and rate limited by the host);
// a refusal is logged, not returned: an Event is never worth failing a reconcile for.
func Record(gvk GVK, meta ObjectMeta, eventType EventType, reason, message string) {
	event := kubewasm_controller_0_2_0_client.Event{
		Regarding: kubewasm_controller_0_2_0_types.ObjectRef{Gvk: gvk, Namespace: witTypes.Some(meta.Namespace), Name: meta.Name},
		Uid:       witTypes.Some(meta.UID),
		EventType: eventType,
		Reason:    reason,
		Message:   message,
	}
	if result := kubewasm_controller_0_2_0_client.RecordEvent(event); result.IsErr() {
		Logf(kubewasm_controller_0_2_0_log.Level_Warn, "recording event %s: %v", reason, apiError(result.Err()))
	}
}

// Logf logs into the host's log, tagged with the plugin's name.
func Logf(level kubewasm_controller_0_2_0_log.Level, format string, args ...any) {
	kubewasm_controller_0_2_0_log.Log(level, fmt.Sprintf(format, args...))
}

// ObjectMeta is the part of metav1.ObjectMeta these controllers use.
type ObjectMeta struct {
	Name            string            `json:"name,omitempty"`
	Namespace       string            `json:"namespace,omitempty"`
	UID             string            `json:"uid,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	OwnerReferences []OwnerReference  `json:"ownerReferences,omitempty"`
}

// OwnerReference is metav1.OwnerReference.
type OwnerReference struct {
	APIVersion         string `json:"apiVersion"`
	Kind               string `json:"kind"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	Controller         *bool  `json:"controller,omitempty"`
	BlockOwnerDeletion *bool  `json:"blockOwnerDeletion,omitempty"`
}

// ControlledBy reports whether meta names uid as its controlling owner.
func (meta ObjectMeta) ControlledBy(uid string) bool {
	for _, o := range meta.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.UID == uid {
			return true
		}
	}
	return false
}

// Go's garbage collector must not run inside `cabi_realloc` (while the host copies arguments
// or results in): it would call out of the instance and trap it ("cannot leave component
// instance"). It is turned off as the runtime starts, and AfterCall runs it between calls.
func init() {
	debug.SetGCPercent(-1)
}

const gcEvery = 4 << 20

var (
	allocated   = []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocatedAt uint64
)

// AfterCall collects garbage, where it is safe, once gcEvery bytes were allocated since the
// last collection. Every export calls it before it returns.
func AfterCall() {
	metrics.Read(allocated)
	now := allocated[0].Value.Uint64()
	if now-allocatedAt >= gcEvery {
		runtime.GC()
		allocatedAt = now
	}
}

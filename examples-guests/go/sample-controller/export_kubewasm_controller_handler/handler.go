// Package export_kubewasm_controller_handler implements the exported `handler` interface, which
// the `controller` world requires; the sample-controller subscribes with `events: false`, so the
// host never calls these.
package export_kubewasm_controller_handler

import witTypes "go.bytecodealliance.org/pkg/wit/types"

type result = witTypes.Result[witTypes.Unit, string]

func OnAdd(subscription uint32, object string, inInitialList bool) result {
	return witTypes.Ok[witTypes.Unit, string](witTypes.Unit{})
}

func OnUpdate(subscription uint32, old string, new string) result {
	return witTypes.Ok[witTypes.Unit, string](witTypes.Unit{})
}

func OnDelete(subscription uint32, object string, finalStateUnknown bool) result {
	return witTypes.Ok[witTypes.Unit, string](witTypes.Unit{})
}

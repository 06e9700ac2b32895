// Package export_kubewasm_controller_0_2_0_reconcile implements the exported `reconcile` interface.
package export_kubewasm_controller_0_2_0_reconcile

import (
	"wit_component/kube"
	"wit_component/kubewasm_controller_0_2_0_reconcile"
	"wit_component/kubewasm_controller_0_2_0_types"
	"wit_component/samplecontroller"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

type action = kubewasm_controller_0_2_0_reconcile.Action

func Reconcile(key kubewasm_controller_0_2_0_types.Key) witTypes.Result[action, string] {
	defer kube.AfterCall()
	if err := samplecontroller.Reconcile(key.Namespace.SomeOr(""), key.Name); err != nil {
		return witTypes.Err[action, string](err.Error())
	}
	return witTypes.Ok[action, string](kubewasm_controller_0_2_0_reconcile.MakeActionDone())
}

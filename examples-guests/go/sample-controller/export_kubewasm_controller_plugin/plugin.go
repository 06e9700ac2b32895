// Package export_kubewasm_controller_plugin implements the exported `plugin` interface (the
// package name is the one wit-bindgen's Go generator calls).
package export_kubewasm_controller_plugin

import (
	"wit_component/kubewasm_controller_types"
	"wit_component/samplecontroller"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

func Init(config string) witTypes.Result[kubewasm_controller_types.PluginInfo, string] {
	return witTypes.Ok[kubewasm_controller_types.PluginInfo, string](samplecontroller.Info())
}

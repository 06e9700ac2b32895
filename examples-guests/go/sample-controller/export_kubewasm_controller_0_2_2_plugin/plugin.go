// Package export_kubewasm_controller_0_2_2_plugin implements the exported `plugin` interface of
// contract 0.2.2 (the package name is the one wit-bindgen's Go generator calls: the WIT holds
// three versions of `kubewasm:controller`, so every package name carries its version).
package export_kubewasm_controller_0_2_2_plugin

import (
	"wit_component/kube"
	"wit_component/samplecontroller"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

func Init(config string) witTypes.Result[kube.PluginInfo, string] {
	return witTypes.Ok[kube.PluginInfo, string](samplecontroller.Info())
}

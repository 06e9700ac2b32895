module kubewasm.dev/benchmarks/client-go

go 1.26.0

require (
	k8s.io/api v0.0.0-20260724040949-10b39a39bcee
	k8s.io/apimachinery v0.0.0-20260723070748-eed236ceee2c
	k8s.io/client-go v0.0.0-20260724140530-32ce75a7d6bc
)

package samplecontroller

import "wit_component/kube"

// Foo is samplecontroller.k8s.io/v1alpha1 Foo (examples/manifests/50-foo-crd.yaml).
type Foo struct {
	Metadata kube.ObjectMeta `json:"metadata"`
	Spec     FooSpec         `json:"spec"`
	Status   *FooStatus      `json:"status,omitempty"`
}

type FooSpec struct {
	DeploymentName string `json:"deploymentName"`
	Replicas       *int32 `json:"replicas,omitempty"`
}

type FooStatus struct {
	AvailableReplicas int32 `json:"availableReplicas"`
}

// Deployment is the part of apps/v1 Deployment this controller reads and creates. Scaling
// changes spec.replicas on the object as read (see scale), so the fields not modelled here are
// written back unchanged.
type Deployment struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   kube.ObjectMeta   `json:"metadata"`
	Spec       DeploymentSpec    `json:"spec"`
	Status     *DeploymentStatus `json:"status,omitempty"`
}

type DeploymentSpec struct {
	Replicas *int32          `json:"replicas,omitempty"`
	Selector LabelSelector   `json:"selector"`
	Template PodTemplateSpec `json:"template"`
}

type DeploymentStatus struct {
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
}

type LabelSelector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

type PodTemplateSpec struct {
	Metadata kube.ObjectMeta `json:"metadata"`
	Spec     PodSpec         `json:"spec"`
}

type PodSpec struct {
	Containers []Container `json:"containers"`
}

type Container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
}

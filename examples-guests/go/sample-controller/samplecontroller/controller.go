// Package samplecontroller is kubernetes/sample-controller as a kubewasm plugin (contract 0.2.2),
// in Go: a Foo owns a Deployment named spec.deploymentName running spec.replicas nginx pods, and
// its status.availableReplicas follows the Deployment's. A Deployment of that name that the Foo
// does not control is left alone, and a Warning Event on the Foo says so.
//
// Subscription 0 (Foo) queues each Foo's own key when its spec changes; subscription 1
// (Deployment) queues the Foo that controls it, so a Deployment changed or deleted by hand brings
// its Foo back to reconcile.
package samplecontroller

import (
	"encoding/json"
	"errors"
	"fmt"

	"wit_component/kube"
	"wit_component/kubewasm_controller_0_2_0_types"
)

// PluginName is the name in logs and metrics, and the field manager of the writes.
const PluginName = "sample-controller-go"

// Subscription handles: positions in Info().Subscriptions.
const (
	foos        uint32 = 0
	deployments uint32 = 1
)

var (
	fooGVK        = kube.GVK{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Kind: "Foo"}
	deploymentGVK = kube.GVK{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// Info declares the two subscriptions, without event handlers: everything goes through
// Reconcile. A Foo queues when its generation changes (its spec): the status this controller
// writes does not bring it back. A Deployment queues its Foo on every change: the Foo's status
// follows the Deployment's.
func Info() kube.PluginInfo {
	return kube.PluginInfo{
		Name: PluginName,
		Subscriptions: []kube.Subscription{
			kube.Subscribe(fooGVK, kube.When(kube.OwnKey(), kube.Generation)),
			kube.Subscribe(deploymentGVK, kube.When(kube.ControllingOwner(foos))),
		},
		Indexes: []kubewasm_controller_0_2_0_types.IndexDecl{},
	}
}

// Reconcile brings the Foo namespace/name's Deployment and status in line with its spec. An
// error is retried by the host with per-key backoff.
func Reconcile(namespace, name string) error {
	var foo Foo
	found, err := kube.Get(foos, namespace, name, &foo)
	if err != nil || !found {
		// Gone: its Deployment goes with it (owner reference, garbage collection).
		return err
	}
	if foo.Spec.DeploymentName == "" {
		kube.Record(fooGVK, foo.Metadata, kube.Warning, "InvalidSpec", "spec.deploymentName is empty")
		return nil
	}
	replicas := int32(1)
	if foo.Spec.Replicas != nil {
		replicas = *foo.Spec.Replicas
	}

	var raw json.RawMessage
	found, err = kube.Get(deployments, namespace, foo.Spec.DeploymentName, &raw)
	if err != nil {
		return err
	}
	var deployment Deployment
	if !found {
		if err := kube.Create(newDeployment(&foo, replicas), &deployment); err != nil {
			return fmt.Errorf("creating Deployment %s: %w", foo.Spec.DeploymentName, err)
		}
		kube.Record(fooGVK, foo.Metadata, kube.Normal, "Synced", "created Deployment "+foo.Spec.DeploymentName)
	} else {
		if err := json.Unmarshal(raw, &deployment); err != nil {
			return err
		}
		if !deployment.Metadata.ControlledBy(foo.Metadata.UID) {
			kube.Record(fooGVK, foo.Metadata, kube.Warning, "ErrResourceExists",
				fmt.Sprintf("Resource %q already exists and is not managed by Foo", foo.Spec.DeploymentName))
			return nil
		}
		if deployment.Spec.Replicas == nil || *deployment.Spec.Replicas != replicas {
			if err := scale(raw, replicas, &deployment); err != nil {
				return fmt.Errorf("scaling Deployment %s: %w", foo.Spec.DeploymentName, err)
			}
		}
	}
	return updateStatus(&foo, &deployment)
}

// newDeployment is the Deployment a Foo asks for, controlled by it.
func newDeployment(foo *Foo, replicas int32) Deployment {
	yes := true
	labels := map[string]string{"app": "nginx", "controller": foo.Metadata.Name}
	return Deployment{
		APIVersion: "apps/v1",
		Kind:       "Deployment",
		Metadata: kube.ObjectMeta{
			Name:      foo.Spec.DeploymentName,
			Namespace: foo.Metadata.Namespace,
			OwnerReferences: []kube.OwnerReference{{
				APIVersion:         "samplecontroller.k8s.io/v1alpha1",
				Kind:               "Foo",
				Name:               foo.Metadata.Name,
				UID:                foo.Metadata.UID,
				Controller:         &yes,
				BlockOwnerDeletion: &yes,
			}},
		},
		Spec: DeploymentSpec{
			Replicas: &replicas,
			Selector: LabelSelector{MatchLabels: labels},
			Template: PodTemplateSpec{
				Metadata: kube.ObjectMeta{Labels: labels},
				Spec:     PodSpec{Containers: []Container{{Name: "nginx", Image: "nginx:latest"}}},
			},
		},
	}
}

// scale updates the Deployment as read (raw, all its fields) to `replicas`, with its
// resourceVersion as precondition; answers the updated Deployment in out.
func scale(raw json.RawMessage, replicas int32, out *Deployment) error {
	var object map[string]any
	if err := json.Unmarshal(raw, &object); err != nil {
		return err
	}
	spec, ok := object["spec"].(map[string]any)
	if !ok {
		return errors.New("a Deployment without spec")
	}
	spec["replicas"] = replicas
	return kube.Update(object, out)
}

// updateStatus copies the Deployment's available replicas into the Foo's status, if they
// differ.
func updateStatus(foo *Foo, deployment *Deployment) error {
	var available int32
	if deployment.Status != nil {
		available = deployment.Status.AvailableReplicas
	}
	if foo.Status != nil && foo.Status.AvailableReplicas == available {
		return nil
	}
	patch := map[string]any{"status": FooStatus{AvailableReplicas: available}}
	if err := kube.MergePatchStatus(fooGVK, foo.Metadata.Namespace, foo.Metadata.Name, patch); err != nil {
		return fmt.Errorf("updating the status of Foo %s: %w", foo.Metadata.Name, err)
	}
	return nil
}

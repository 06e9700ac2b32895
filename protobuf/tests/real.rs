//! The generated schemas against a real kube-apiserver: objects of many built-in kinds are
//! created in JSON, then read back in JSON and in protobuf, as single objects and as lists; the
//! protobuf rendered by this crate must be the server's own JSON, byte for byte.

/// Not a test: the keeper of the real API server the run's real-server tests share, run only
/// when this binary is started as one.
#[test]
#[ignore = "run only as the keeper of the shared real API server"]
fn envtest_keeper() {
    kubewasm_tests::envtest::shared::keep();
}

mod real {
    use http::{Method, Request, header};
    use http_body_util::BodyExt as _;
    use kubewasm_protobuf::{ACCEPT, CONTENT_TYPE, ListReader, object_json};
    use kubewasm_tests::envtest::{Envtest, SharedEnvtest};
    use serde_json::{Value, json};

    /// A string with every character Go's encoder escapes its own way.
    const TRICKY: &str = "<a href=\"x\">&amp;</a> \\ \u{8}\n\t\u{1}\u{7f} é 😀 \u{2028}";

    struct Api {
        client: kube::Client,
    }

    impl Api {
        /// The status and body of a request.
        async fn call(
            &self,
            method: Method,
            path: &str,
            accept: &str,
            body: Option<(&str, Vec<u8>)>,
        ) -> (u16, Vec<u8>) {
            let mut request = Request::builder()
                .method(method.clone())
                .uri(path)
                .header(header::ACCEPT, accept);
            let body = match body {
                Some((content_type, bytes)) => {
                    request = request.header(header::CONTENT_TYPE, content_type);
                    bytes
                }
                None => Vec::new(),
            };
            let request = request
                .body(kube::client::Body::from(body))
                .expect("a request");
            let response = self
                .client
                .send(request)
                .await
                .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
            let status = response.status().as_u16();
            let bytes = response
                .into_body()
                .collect()
                .await
                .unwrap_or_else(|e| panic!("{method} {path}: reading the body: {e}"))
                .to_bytes()
                .to_vec();
            (status, bytes)
        }

        async fn send_json(&self, method: Method, path: &str, content_type: &str, body: &Value) {
            let (status, answer) = self
                .call(
                    method.clone(),
                    path,
                    "application/json",
                    Some((content_type, serde_json::to_vec(body).expect("JSON"))),
                )
                .await;
            assert!(
                (200..300).contains(&status),
                "{method} {path}: {status} {}",
                String::from_utf8_lossy(&answer)
            );
        }

        async fn get(&self, path: &str, accept: &str) -> Vec<u8> {
            let (status, body) = self.call(Method::GET, path, accept, None).await;
            assert_eq!(
                status,
                200,
                "GET {path}: {}",
                String::from_utf8_lossy(&body)
            );
            body
        }
    }

    /// One kind to create objects of: its API path (`{ns}` for the namespace) and objects.
    struct Case {
        api_version: &'static str,
        kind: &'static str,
        /// The collection's path, e.g. `/apis/apps/v1/namespaces/{ns}/deployments`.
        path: &'static str,
        objects: Vec<Value>,
        /// Merge patches of the `status` subresource, by object name.
        status: Vec<(&'static str, Value)>,
    }

    fn cases(ns: &str) -> Vec<Case> {
        let labels = json!({"pbkinds": ns, "tricky": "a-b_c.d"});
        let meta =
            |name: &str| json!({"name": name, "labels": labels, "annotations": {"note": TRICKY}});
        let pod_spec = json!({
            "containers": [{
                "name": "web", "image": "nginx:1.27", "command": ["nginx"], "args": ["-g", "daemon off;"],
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"containerPort": 9090, "hostPort": 9090}],
                "env": [{"name": "A", "value": TRICKY},
                        {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "1Gi", "example.com/gpu": "2"},
                              "requests": {"cpu": "0.25", "memory": "512Mi"}},
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "httpHeaders": [{"name": "X", "value": "y"}]},
                                  "initialDelaySeconds": 3, "periodSeconds": 10},
                "readinessProbe": {"tcpSocket": {"port": "http"}, "failureThreshold": 0},
                "startupProbe": {"exec": {"command": ["true"]}},
                "lifecycle": {"preStop": {"sleep": {"seconds": 2}}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/config", "readOnly": true},
                                 {"name": "scratch", "mountPath": "/tmp"}],
                "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false,
                                    "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}
            }],
            "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "true"]}],
            "volumes": [
                {"name": "config", "configMap": {"name": "cfg", "defaultMode": 420, "items": [{"key": "a", "path": "a.txt", "mode": 256}]}},
                {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                {"name": "secret", "secret": {"secretName": "s", "optional": true}},
                {"name": "projected", "projected": {"sources": [{"configMap": {"name": "cfg", "optional": false}}, {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}}
            ],
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}}}]}},
            "securityContext": {"fsGroup": 2000, "supplementalGroups": [3000, 4000], "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
            "terminationGracePeriodSeconds": 15,
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}}}]
        });
        let template = json!({"metadata": {"labels": {"app": "web"}, "annotations": {"a": "b"}}, "spec": pod_spec});
        let selector = json!({"matchLabels": {"app": "web"}});
        let job_spec = json!({
            "backoffLimit": 2, "completions": 3, "parallelism": 1, "completionMode": "Indexed",
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [7, 42]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}}
        });
        vec![
            Case {
                api_version: "apps/v1",
                kind: "Deployment",
                path: "/apis/apps/v1/namespaces/{ns}/deployments",
                objects: vec![
                    json!({"metadata": meta("web"), "spec": {"replicas": 2, "selector": selector, "template": template,
                        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                        "revisionHistoryLimit": 3, "progressDeadlineSeconds": 120}}),
                    json!({"metadata": meta("minimal"), "spec": {"selector": selector,
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
                ],
                status: vec![(
                    "web",
                    json!({"status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 1,
                        "conditions": [{"type": "Available", "status": "True", "lastUpdateTime": "2026-12-05T06:00:00Z",
                            "lastTransitionTime": "2026-12-05T06:00:01Z", "reason": "MinimumReplicasAvailable", "message": TRICKY}]}}),
                )],
            },
            Case {
                api_version: "apps/v1",
                kind: "StatefulSet",
                path: "/apis/apps/v1/namespaces/{ns}/statefulsets",
                objects: vec![
                    json!({"metadata": meta("db"), "spec": {"replicas": 3, "serviceName": "db", "selector": selector,
                        "template": template, "podManagementPolicy": "Parallel", "minReadySeconds": 5,
                        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
                        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                        "ordinals": {"start": 2},
                        "volumeClaimTemplates": [
                            {"metadata": {"name": "data", "labels": {"tier": "db"}, "annotations": {"note": TRICKY}},
                             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                                "resources": {"requests": {"storage": "1.5Gi"}, "limits": {"storage": "2Gi"}},
                                "selector": {"matchLabels": {"disk": "ssd"}}}},
                            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "logs"},
                             "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block",
                                "resources": {"requests": {"storage": "100Mi"}}}}]}}),
                    json!({"metadata": meta("plain"), "spec": {"serviceName": "plain", "selector": selector,
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
                    // Not what a claim's type is: the API server answers `v1`
                    // `PersistentVolumeClaim` all the same.
                    json!({"metadata": meta("odd"), "spec": {"serviceName": "odd", "selector": selector,
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                        "volumeClaimTemplates": [{"apiVersion": "example.com/v9", "kind": "Claim", "metadata": {"name": "d"},
                            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}}),
                ],
                status: vec![(
                    "db",
                    json!({"status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 2, "currentReplicas": 3,
                        "updatedReplicas": 1, "availableReplicas": 2, "currentRevision": "db-1", "updateRevision": "db-2",
                        "collisionCount": 0}}),
                )],
            },
            Case {
                api_version: "apps/v1",
                kind: "DaemonSet",
                path: "/apis/apps/v1/namespaces/{ns}/daemonsets",
                objects: vec![
                    json!({"metadata": meta("agent"), "spec": {"selector": selector, "template": template,
                    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0}}}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "apps/v1",
                kind: "ControllerRevision",
                path: "/apis/apps/v1/namespaces/{ns}/controllerrevisions",
                objects: vec![
                    json!({"metadata": meta("rev"), "revision": 3, "data": {"spec": {"template": {"a": [1, 2.5, "<&>"], "b": null}}}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "Pod",
                path: "/api/v1/namespaces/{ns}/pods",
                objects: vec![json!({"metadata": meta("pod"), "spec": pod_spec})],
                status: vec![(
                    "pod",
                    json!({"status": {"phase": "Running", "podIP": "10.0.0.7", "podIPs": [{"ip": "10.0.0.7"}],
                        "hostIP": "192.168.1.2", "startTime": "2026-12-05T06:00:00Z", "qosClass": "Burstable",
                        "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-05T06:00:02Z"}],
                        "containerStatuses": [{"name": "web", "ready": true, "restartCount": 1, "image": "nginx:1.27",
                            "imageID": "docker.io/nginx@sha256:abc", "containerID": "containerd://1", "started": true,
                            "state": {"running": {"startedAt": "2026-12-05T06:00:01Z"}},
                            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                "startedAt": "2026-12-05T05:00:00Z", "finishedAt": "2026-12-05T05:59:59Z"}}}]}}),
                )],
            },
            Case {
                api_version: "v1",
                kind: "Service",
                path: "/api/v1/namespaces/{ns}/services",
                objects: vec![
                    json!({"metadata": meta("web"), "spec": {"selector": {"app": "web"}, "ports": [
                        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                        {"name": "metrics", "port": 9090, "targetPort": 9090, "appProtocol": "http"}],
                        "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 600}}}}),
                    json!({"metadata": meta("external"), "spec": {"type": "ExternalName", "externalName": "example.com"}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "Endpoints",
                path: "/api/v1/namespaces/{ns}/endpoints",
                objects: vec![
                    json!({"metadata": meta("web"), "subsets": [{"addresses": [{"ip": "10.0.0.7",
                    "targetRef": {"kind": "Pod", "name": "pod", "namespace": ns}}],
                    "notReadyAddresses": [{"ip": "10.0.0.8"}], "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "PersistentVolumeClaim",
                path: "/api/v1/namespaces/{ns}/persistentvolumeclaims",
                objects: vec![
                    json!({"metadata": meta("data"), "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1.5Gi"}}, "storageClassName": "fast", "volumeMode": "Filesystem"}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "Event",
                path: "/api/v1/namespaces/{ns}/events",
                objects: vec![
                    json!({"metadata": meta("pod.1"), "involvedObject": {"kind": "Pod", "name": "pod", "namespace": ns},
                    "reason": "Started", "message": TRICKY, "type": "Normal", "count": 3,
                    "firstTimestamp": "2026-12-05T06:00:00Z", "lastTimestamp": "2026-12-05T06:01:00Z",
                    "source": {"component": "kubelet", "host": "node-1"}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "ResourceQuota",
                path: "/api/v1/namespaces/{ns}/resourcequotas",
                objects: vec![
                    json!({"metadata": meta("quota"), "spec": {"hard": {"pods": "10", "requests.cpu": "4", "limits.memory": "8Gi"}}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "ConfigMap",
                path: "/api/v1/namespaces/{ns}/configmaps",
                objects: vec![
                    json!({"metadata": meta("cfg"), "data": {"a": TRICKY}, "binaryData": {"b": "/wAQ"}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "batch/v1",
                kind: "Job",
                path: "/apis/batch/v1/namespaces/{ns}/jobs",
                objects: vec![json!({"metadata": meta("job"), "spec": job_spec})],
                status: vec![],
            },
            Case {
                api_version: "batch/v1",
                kind: "CronJob",
                path: "/apis/batch/v1/namespaces/{ns}/cronjobs",
                objects: vec![
                    json!({"metadata": meta("nightly"), "spec": {"schedule": "0 3 * * *", "timeZone": "Etc/UTC",
                    "concurrencyPolicy": "Forbid", "jobTemplate": {"spec": job_spec}}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "rbac.authorization.k8s.io/v1",
                kind: "Role",
                path: "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                objects: vec![json!({"metadata": meta("reader"), "rules": [
                    {"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": ["web"], "verbs": ["get"]}]})],
                status: vec![],
            },
            Case {
                api_version: "rbac.authorization.k8s.io/v1",
                kind: "RoleBinding",
                path: "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                objects: vec![
                    json!({"metadata": meta("read"), "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                    "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns},
                                 {"kind": "User", "name": "jane", "apiGroup": "rbac.authorization.k8s.io"}]}),
                ],
                status: vec![],
            },
            Case {
                api_version: "networking.k8s.io/v1",
                kind: "Ingress",
                path: "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
                objects: vec![
                    json!({"metadata": meta("web"), "spec": {"ingressClassName": "nginx",
                    "tls": [{"hosts": ["example.com"], "secretName": "tls"}],
                    "defaultBackend": {"service": {"name": "web", "port": {"name": "http"}}},
                    "rules": [{"host": "example.com", "http": {"paths": [
                        {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
                        {"path": "/api", "pathType": "ImplementationSpecific", "backend": {"resource": {"apiGroup": "example.com", "kind": "Bucket", "name": "b"}}}]}}]}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "networking.k8s.io/v1",
                kind: "NetworkPolicy",
                path: "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
                objects: vec![
                    json!({"metadata": meta("deny"), "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                    "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}],
                        "ports": [{"protocol": "TCP", "port": 8000, "endPort": 9000}, {"port": "http"}]}]}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "coordination.k8s.io/v1",
                kind: "Lease",
                path: "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                objects: vec![
                    json!({"metadata": meta("leader"), "spec": {"holderIdentity": "pod-a", "leaseDurationSeconds": 15,
                        "acquireTime": "2026-12-05T06:00:00.000001Z", "renewTime": "2026-12-05T06:00:10.123456Z", "leaseTransitions": 2}}),
                    json!({"metadata": meta("empty"), "spec": {}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "discovery.k8s.io/v1",
                kind: "EndpointSlice",
                path: "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                objects: vec![json!({"metadata": meta("web-abc"), "addressType": "IPv4",
                    "endpoints": [{"addresses": ["10.0.0.7"], "conditions": {"ready": true, "serving": true, "terminating": false},
                        "nodeName": "node-1", "zone": "a", "hints": {"forZones": [{"name": "a"}]}}],
                    "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]})],
                status: vec![],
            },
            Case {
                api_version: "policy/v1",
                kind: "PodDisruptionBudget",
                path: "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
                objects: vec![
                    json!({"metadata": meta("web"), "spec": {"minAvailable": "50%", "selector": selector}}),
                ],
                status: vec![(
                    "web",
                    json!({"status": {"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 2, "disruptionsAllowed": 0,
                        "disruptedPods": {"pod-b": "2026-12-05T06:00:00Z", "pod-a": "2026-12-05T06:00:01Z"}}}),
                )],
            },
            Case {
                api_version: "autoscaling/v2",
                kind: "HorizontalPodAutoscaler",
                path: "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
                objects: vec![json!({"metadata": meta("web"), "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                    "minReplicas": 2, "maxReplicas": 10,
                    "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}},
                                {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "1k"}}}],
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}}}})],
                status: vec![],
            },
            Case {
                api_version: "storage.k8s.io/v1",
                kind: "StorageClass",
                path: "/apis/storage.k8s.io/v1/storageclasses",
                objects: vec![
                    json!({"metadata": meta(&format!("{ns}-fast")), "provisioner": "example.com/csi",
                    "parameters": {"type": "ssd"}, "reclaimPolicy": "Retain", "allowVolumeExpansion": true,
                    "mountOptions": ["noatime"], "volumeBindingMode": "WaitForFirstConsumer"}),
                ],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "PersistentVolume",
                path: "/api/v1/persistentvolumes",
                objects: vec![
                    json!({"metadata": meta(&format!("{ns}-pv")), "spec": {"capacity": {"storage": "10Gi"},
                    "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": "/data", "type": "DirectoryOrCreate"}, "mountOptions": ["ro"]}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "resource.k8s.io/v1",
                kind: "ResourceSlice",
                path: "/apis/resource.k8s.io/v1/resourceslices",
                objects: vec![json!({"metadata": meta(&format!("{ns}-gpu")), "spec": {
                    "driver": "gpu.example.com", "nodeName": "node-1",
                    "pool": {"name": "node-1", "generation": 2, "resourceSliceCount": 1},
                    "devices": [
                        {"name": "gpu-0", "attributes": {"example.com/model": {"string": TRICKY}, "example.com/cores": {"int": 64},
                            "example.com/mig": {"bool": true}, "example.com/driver": {"version": "550.1.0"}},
                         "capacity": {"memory": {"value": "80Gi"}, "example.com/slots": {"value": "7"}}},
                        {"name": "gpu-1"}]}})],
                status: vec![],
            },
            Case {
                api_version: "v1",
                kind: "Node",
                path: "/api/v1/nodes",
                objects: vec![
                    json!({"metadata": meta(&format!("{ns}-node")), "spec": {"podCIDR": "10.0.1.0/24", "podCIDRs": ["10.0.1.0/24"],
                    "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}}),
                ],
                status: vec![],
            },
            Case {
                api_version: "scheduling.k8s.io/v1",
                kind: "PriorityClass",
                path: "/apis/scheduling.k8s.io/v1/priorityclasses",
                objects: vec![
                    json!({"metadata": meta(&format!("{ns}-high")), "value": 1000000, "description": TRICKY,
                    "preemptionPolicy": "Never"}),
                ],
                status: vec![],
            },
            Case {
                api_version: "events.k8s.io/v1",
                kind: "Event",
                path: "/apis/events.k8s.io/v1/namespaces/{ns}/events",
                objects: vec![
                    json!({"metadata": meta("e.1"), "eventTime": "2026-12-05T06:00:00.654321Z",
                    "reportingController": "example.com/ctl", "reportingInstance": "ctl-1", "action": "Sync",
                    "reason": "Synced", "type": "Normal", "note": TRICKY,
                    "regarding": {"kind": "Pod", "name": "pod", "namespace": ns}}),
                ],
                status: vec![],
            },
        ]
    }

    /// The items of a JSON list, as the server wrote each.
    fn json_items(list: &[u8]) -> Vec<String> {
        #[derive(serde::Deserialize)]
        struct List<'a> {
            #[serde(borrow)]
            items: Vec<&'a serde_json::value::RawValue>,
        }
        let list: List<'_> = serde_json::from_slice(list).expect("a JSON list");
        list.items.iter().map(|i| i.get().to_owned()).collect()
    }

    fn text(bytes: &[u8]) -> &str {
        std::str::from_utf8(bytes)
            .expect("UTF-8")
            .trim_end_matches('\n')
    }

    /// Creates `cases`' objects in JSON in namespace `ns` (and their status patches), then reads
    /// each kind back as a list and each object alone in JSON and in protobuf and compares them
    /// byte for byte; answers how many list items were compared.
    async fn compare(api: &Api, ns: &str, cases: &[Case]) -> usize {
        let mut compared = 0;
        for case in cases {
            assert!(
                kubewasm_protobuf::supports(case.api_version, case.kind),
                "{} {} has a schema",
                case.api_version,
                case.kind
            );
            let path = case.path.replace("{ns}", ns);
            for object in &case.objects {
                let mut object = object.clone();
                object["apiVersion"] = json!(case.api_version);
                object["kind"] = json!(case.kind);
                api.send_json(Method::POST, &path, "application/json", &object)
                    .await;
            }
            for (name, patch) in &case.status {
                api.send_json(
                    Method::PATCH,
                    &format!("{path}/{name}/status"),
                    "application/merge-patch+json",
                    patch,
                )
                .await;
            }
            let selector = format!("{path}?labelSelector=pbkinds%3D{ns}");
            let from_json = json_items(&api.get(&selector, "application/json").await);
            // events.k8s.io's Events are core's too: each list holds both.
            assert!(from_json.len() >= case.objects.len(), "{path}");
            let body = api.get(&selector, CONTENT_TYPE).await;
            let mut reader = ListReader::new(case.api_version, case.kind).expect("a reader");
            reader
                .feed(&body)
                .unwrap_or_else(|e| panic!("{} {}: {e}", case.api_version, case.kind));
            let from_protobuf: Vec<String> = reader.take_items().collect();
            reader.finish().expect("a whole list");
            assert_eq!(from_protobuf.len(), from_json.len());
            for (pb, js) in from_protobuf.iter().zip(&from_json) {
                assert_eq!(pb, js, "{} {} in a list", case.api_version, case.kind);
                compared += 1;
            }
            for object in &case.objects {
                let name = object["metadata"]["name"].as_str().expect("a name");
                let one = format!("{path}/{name}");
                let js = api.get(&one, "application/json").await;
                let pb = api.get(&one, ACCEPT).await;
                assert_eq!(
                    object_json(&pb)
                        .unwrap_or_else(|e| panic!("{} {}: {e}", case.api_version, case.kind)),
                    text(&js),
                    "{} {} alone",
                    case.api_version,
                    case.kind
                );
            }
        }
        compared
    }

    async fn create_namespace(api: &Api, ns: &str) {
        api.send_json(
            Method::POST,
            "/api/v1/namespaces",
            "application/json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"pbkinds": ns}}}),
        )
        .await;
    }

    /// Deletes `cases`' cluster-scoped objects (named after the namespace), then the namespace,
    /// which takes the rest.
    async fn clean_up(api: &Api, ns: &str, cases: &[Case]) {
        for case in cases {
            if !case.path.contains("{ns}") {
                for object in &case.objects {
                    let name = object["metadata"]["name"].as_str().expect("a name");
                    api.call(
                        Method::DELETE,
                        &format!("{}/{name}", case.path),
                        "application/json",
                        None,
                    )
                    .await;
                }
            }
        }
        api.call(
            Method::DELETE,
            &format!("/api/v1/namespaces/{ns}"),
            "application/json",
            None,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn protobuf_of_the_built_in_kinds_renders_the_servers_own_json() {
        let server = SharedEnvtest::attach()
            .await
            .expect("the real API server starts");
        let api = Api {
            client: server.admin(),
        };
        let ns = format!("pbkinds-{}", std::process::id());
        create_namespace(&api, &ns).await;
        let cases = cases(&ns);
        let compared = compare(&api, &ns, &cases).await;
        assert!(compared >= 30, "{compared} objects compared");
        // The claim template a client typed as something else is answered as the API server
        // types every one, which is what the protobuf rendering writes.
        let odd = api
            .get(
                &format!("/apis/apps/v1/namespaces/{ns}/statefulsets/odd"),
                "application/json",
            )
            .await;
        assert!(
            text(&odd).contains(
                r#""volumeClaimTemplates":[{"kind":"PersistentVolumeClaim","apiVersion":"v1","metadata":{"name":"d"}"#
            ),
            "{}",
            text(&odd)
        );
        clean_up(&api, &ns, &cases).await;
    }

    /// ResourceSlices whose attributes are lists (`bools`, `ints`, `strings`, `versions`: the
    /// alpha gate `DRAListTypeAttributes`, off by default in 1.36, else the server drops them) in
    /// resource.k8s.io v1 and the beta versions (off by default in 1.36): a server of its own
    /// with both turned on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn resource_slices_with_list_attributes_render_the_servers_own_json() {
        let server = Envtest::start_with_flags(&[
            "--feature-gates=DRAListTypeAttributes=true",
            "--runtime-config=resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true",
        ])
        .await
        .expect("the real API server starts");
        let api = Api {
            client: server.admin(),
        };
        let ns = "pbkinds-dra";
        create_namespace(&api, ns).await;
        let labels = json!({"pbkinds": ns});
        let attributes = json!({
            "example.com/lanes": {"bools": [true, false, true]},
            "example.com/ids": {"ints": [3, -1, 9_000_000_000_i64]},
            "example.com/modes": {"strings": ["a", "b"]},
            "example.com/model": {"string": "x1"},
            "example.com/on": {"bool": false},
            "example.com/fw": {"version": "1.2.3"}
        });
        let slice = |version: &str, device: Value| {
            json!({"metadata": {"name": format!("{ns}-{version}"), "labels": labels},
                "spec": {"driver": "gpu.example.com", "nodeName": "node-1",
                    "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
                    "devices": [device]}})
        };
        let capacity = json!({"memory": {"value": "16Gi"}});
        let cases = vec![
            Case {
                api_version: "resource.k8s.io/v1",
                kind: "ResourceSlice",
                path: "/apis/resource.k8s.io/v1/resourceslices",
                objects: vec![slice(
                    "v1",
                    json!({"name": "gpu-0", "attributes": attributes, "capacity": capacity}),
                )],
                status: vec![],
            },
            Case {
                api_version: "resource.k8s.io/v1beta2",
                kind: "ResourceSlice",
                path: "/apis/resource.k8s.io/v1beta2/resourceslices",
                objects: vec![slice(
                    "v1beta2",
                    json!({"name": "gpu-0", "attributes": attributes, "capacity": capacity}),
                )],
                status: vec![],
            },
            Case {
                api_version: "resource.k8s.io/v1beta1",
                kind: "ResourceSlice",
                path: "/apis/resource.k8s.io/v1beta1/resourceslices",
                objects: vec![slice(
                    "v1beta1",
                    json!({"name": "gpu-0", "basic": {"attributes": attributes, "capacity": capacity}}),
                )],
                status: vec![],
            },
        ];
        // Each version's list holds the slices created so far, in its version: 1 + 2 + 3.
        let compared = compare(&api, ns, &cases).await;
        assert_eq!(compared, 6);
        // The lists were kept: the gate is on.
        let one = api
            .get(
                &format!("/apis/resource.k8s.io/v1/resourceslices/{ns}-v1"),
                "application/json",
            )
            .await;
        assert!(
            text(&one).contains(r#""example.com/lanes":{"bools":[true,false,true]}"#),
            "{}",
            text(&one)
        );
        clean_up(&api, ns, &cases).await;
    }
}

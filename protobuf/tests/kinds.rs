//! The generated kinds through the encoder and the decoder: realistic objects survive JSON →
//! protobuf → JSON with nothing lost, the JSON is a fixed point (its protobuf gives it back byte
//! for byte), and the value types the generated tables brought render as Go writes them.

use kubewasm_protobuf::{Error, MAGIC, encode_object, object_json};
use serde_json::{Value, json};

/// Whether every member, item and value of `input` is in `output` (which may add Go's zeros).
fn holds(output: &Value, input: &Value) -> bool {
    match (output, input) {
        (Value::Object(out), Value::Object(inp)) => inp
            .iter()
            .all(|(k, v)| out.get(k).is_some_and(|o| holds(o, v))),
        (Value::Array(out), Value::Array(inp)) => {
            out.len() == inp.len() && out.iter().zip(inp).all(|(o, i)| holds(o, i))
        }
        (out, inp) => out == inp,
    }
}

/// The JSON rendered from `object`'s protobuf, after checking it loses nothing and is a fixed
/// point.
fn round_trip(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let kind = object["kind"].as_str().expect("kind");
    let body =
        encode_object(object, api_version, kind).unwrap_or_else(|e| panic!("{kind} encodes: {e}"));
    let json = object_json(&body).unwrap_or_else(|e| panic!("{kind} decodes: {e}"));
    let parsed: Value = serde_json::from_str(&json).expect("the rendering is JSON");
    assert!(holds(&parsed, object), "{kind} lost something:\n{json}");
    let again = object_json(&encode_object(&parsed, api_version, kind).expect("encodes again"))
        .expect("decodes again");
    assert_eq!(again, json, "{kind} is not a fixed point");
    json
}

fn metadata(name: &str) -> Value {
    json!({"name": name, "namespace": "ns", "uid": "u-1", "resourceVersion": "42", "generation": 3,
           "creationTimestamp": "2026-12-05T06:00:00Z", "labels": {"app": "web"}})
}

fn pod_spec() -> Value {
    json!({
        "volumes": [
            {"name": "config", "configMap": {"name": "cfg", "defaultMode": 420}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}}
        ],
        "containers": [{
            "name": "web", "image": "nginx:1.27",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "250m"}},
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10},
            "readinessProbe": {"tcpSocket": {"port": "http"}, "failureThreshold": 3},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/config", "readOnly": true}]
        }],
        "restartPolicy": "Always",
        "securityContext": {"supplementalGroups": [3000, -1, 9_000_000_000_i64]},
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 30}]
    })
}

#[test]
fn a_deployment_with_a_pod_template_survives_and_keeps_intstr_ports() {
    let json = round_trip(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata("web"),
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_spec()},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}},
        "status": {"replicas": 2, "conditions": [{"type": "Available", "status": "True",
            "lastUpdateTime": "2026-12-05T06:00:00Z", "lastTransitionTime": "2026-12-05T06:00:01Z"}]}
    }));
    for part in [
        r#""rollingUpdate":{"maxUnavailable":1,"maxSurge":"25%"}"#,
        r#""tcpSocket":{"port":"http"}"#,
        r#""httpGet":{"path":"/healthz","port":8080,"scheme":"HTTP"}"#,
        // A volume's source is a member of the volume (an embedded struct).
        r#"{"name":"config","configMap":{"name":"cfg","defaultMode":420}}"#,
        r#""emptyDir":{"sizeLimit":"64Mi"}"#,
        r#""limits":{"cpu":"500m","memory":"1Gi"}"#,
        r#""supplementalGroups":[3000,-1,9000000000]"#,
        // A template's zero creation time is left out (`omitzero`).
        r#""template":{"metadata":{"labels":{"app":"web"}},"spec""#,
    ] {
        assert!(json.contains(part), "{part} in {json}");
    }
}

#[test]
fn a_pod_with_status_and_times_survives() {
    let json = round_trip(&json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": metadata("pod"), "spec": pod_spec(),
        "status": {"phase": "Running", "podIP": "10.0.0.7", "startTime": "2026-12-05T06:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": "2026-12-05T06:00:02Z"}],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 1, "image": "nginx", "imageID": "",
                "state": {"running": {"startedAt": "2026-12-05T06:00:01Z"}}}]}
    }));
    assert!(json.contains(r#""lastProbeTime":null,"lastTransitionTime":"2026-12-05T06:00:02Z""#));
    assert!(json.contains(r#""state":{"running":{"startedAt":"2026-12-05T06:00:01Z"}}"#));
}

#[test]
fn services_jobs_bindings_and_ingresses_survive() {
    let service = round_trip(&json!({
        "apiVersion": "v1", "kind": "Service", "metadata": metadata("web"),
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}, {"port": 9090, "targetPort": 9090}],
            "selector": {"app": "web"}, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "type": "ClusterIP"}
    }));
    assert!(service.contains(r#"{"port":9090,"targetPort":9090}"#));
    let job = round_trip(&json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata("job"),
        "spec": {"backoffLimit": 2, "podFailurePolicy": {"rules": [{"action": "FailJob",
                "onExitCodes": {"operator": "In", "values": [7, 42]}}]},
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}},
        "status": {"startTime": "2026-12-05T06:00:00Z", "active": 1}
    }));
    assert!(job.contains(r#""values":[7,42]"#));
    round_trip(&json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata("rb"),
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "ns"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    }));
    let ingress = round_trip(&json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata("web"),
        "spec": {"rules": [{"host": "example.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}
    }));
    assert!(ingress.contains(r#""path":"/","pathType":"Prefix""#));
}

#[test]
fn a_pointer_without_omitempty_is_null_when_absent() {
    let ingress = json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": {"service": {"name": "s", "port": {"name": "p"}}}}]}}]}
    });
    let body = encode_object(&ingress, "networking.k8s.io/v1", "Ingress").unwrap();
    let json = object_json(&body).unwrap();
    assert!(
        json.contains(r#"{"path":"/","pathType":null,"backend""#),
        "{json}"
    );
}

#[test]
fn micro_times_keep_six_digits_and_raw_extensions_are_compacted() {
    let lease = round_trip(&json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata("leader"),
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
            "acquireTime": "2026-12-05T06:00:00.000001Z", "renewTime": "2026-12-05T06:00:10.123456Z"}
    }));
    assert!(lease.contains(
        r#""acquireTime":"2026-12-05T06:00:00.000001Z","renewTime":"2026-12-05T06:00:10.123456Z""#
    ));
    let revision = round_trip(&json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": metadata("rev"),
        "data": {"a": [1, 2.5, "<&>"], "b": null}, "revision": 3
    }));
    assert!(
        revision.contains(r#""data":{"a":[1,2.5,"\u003c\u0026\u003e"],"b":null},"revision":3"#)
    );
}

#[test]
fn maps_of_quantities_times_and_string_lists_are_sorted_as_go_writes_them() {
    let quota = round_trip(&json!({
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": metadata("q"),
        "spec": {"hard": {"pods": "10", "limits.memory": "8Gi", "requests.cpu": "4"}}
    }));
    assert!(quota.contains(r#""hard":{"limits.memory":"8Gi","pods":"10","requests.cpu":"4"}"#));
    let budget = round_trip(&json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": metadata("pdb"),
        "spec": {"minAvailable": "50%"},
        "status": {"disruptedPods": {"b": "2026-12-05T06:00:00Z", "a": "2026-12-05T06:00:01Z"},
            "currentHealthy": 1, "desiredHealthy": 1, "disruptionsAllowed": 0, "expectedPods": 2}
    }));
    assert!(
        budget
            .contains(r#""disruptedPods":{"a":"2026-12-05T06:00:01Z","b":"2026-12-05T06:00:00Z"}"#)
    );
    let request = round_trip(&json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "csr"},
        "spec": {"request": "LS0tLS1CRUdJTg==", "signerName": "example.com/s", "usages": ["digital signature"],
            "extra": {"z": ["1", "2"], "a": null}, "username": "jane"}
    }));
    assert!(
        request.contains(r#""request":"LS0tLS1CRUdJTg==""#),
        "{request}"
    );
    // Go's nil slice: protobuf has no empty list apart from none.
    assert!(
        request.contains(r#""extra":{"a":null,"z":["1","2"]}"#),
        "{request}"
    );
}

#[test]
fn packed_repeated_integers_are_read_too() {
    // A Job whose podFailurePolicy rule's exit codes are packed (wire type 2), as proto3 writers
    // send them.
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [7, 300]}}]},
            "template": {"spec": {"containers": []}}}});
    let unpacked = encode_object(&job, "batch/v1", "Job").unwrap();
    // values = field 3 of PodFailurePolicyOnExitCodesRequirement: `18 07` and `18 ac 02`.
    let needle = [0x18, 0x07, 0x18, 0xac, 0x02];
    let at = unpacked
        .windows(needle.len())
        .position(|w| w == needle)
        .expect("the unpacked values");
    // The same values packed: key 0x1a (field 3, wire type 2), length 3, `07 ac 02`; as long as
    // the unpacked form, so no enclosing length changes.
    let mut packed = unpacked.clone();
    packed.splice(at..at + needle.len(), [0x1a, 0x03, 0x07, 0xac, 0x02]);
    let json = object_json(&packed).unwrap();
    assert!(json.contains(r#""values":[7,300]"#), "{json}");
    assert_eq!(json, object_json(&unpacked).unwrap());
}

/// A length-delimited field with a number under 16 and a payload under 128 bytes.
fn field(number: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2, u8::try_from(payload.len()).unwrap()];
    out.extend_from_slice(payload);
    out
}

#[test]
fn a_field_a_generated_message_lacks_fails_the_decode() {
    let lease = |spec: &[u8]| {
        let raw = [field(1, &field(1, b"l")), field(2, spec)].concat();
        let type_meta = [field(1, b"coordination.k8s.io/v1"), field(2, b"Lease")].concat();
        [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat()
    };
    let holder = field(1, b"a");
    assert_eq!(
        object_json(&lease(&holder)).unwrap(),
        r#"{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"l"},"spec":{"holderIdentity":"a"}}"#
    );
    // Field 99 as a varint: key 99 << 3 = 792 = `98 06`, value 1.
    let unknown = [holder, vec![0x98, 0x06, 0x01]].concat();
    assert!(matches!(
        object_json(&lease(&unknown)),
        Err(Error::UnknownField {
            message: "LeaseSpec",
            number: 99
        })
    ));
    let extended = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
        "spec": {"holderIdentity": "a", "unknownField": 1}});
    assert!(encode_object(&extended, "coordination.k8s.io/v1", "Lease").is_err());
}

#[test]
fn a_statefulsets_claim_templates_carry_the_type_meta_the_api_server_sets() {
    let claim = |type_meta: Value| {
        let mut claim = json!({"metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        if let (Value::Object(claim), Value::Object(extra)) = (&mut claim, type_meta) {
            claim.extend(extra);
        }
        claim
    };
    let set = |templates: Vec<Value>| {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": metadata("db"),
            "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
                "volumeClaimTemplates": templates}})
    };
    let rendered = round_trip(&set(vec![
        claim(json!({})),
        claim(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim"})),
    ]));
    let template = r#"{"kind":"PersistentVolumeClaim","apiVersion":"v1","metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}},"status":{}}"#;
    assert!(
        rendered.contains(&format!(
            r#""volumeClaimTemplates":[{template},{template}]"#
        )),
        "{rendered}"
    );
    // Whatever a client sent, the API server answers `v1` `PersistentVolumeClaim`; protobuf
    // carries neither, so other values encode to the same bytes.
    let odd = set(vec![claim(
        json!({"apiVersion": "example.com/v9", "kind": "Claim"}),
    )]);
    let plain = set(vec![claim(json!({}))]);
    let odd_body = encode_object(&odd, "apps/v1", "StatefulSet").unwrap();
    assert_eq!(
        odd_body,
        encode_object(&plain, "apps/v1", "StatefulSet").unwrap()
    );
    assert!(object_json(&odd_body).unwrap().contains(template));
    // A StatefulSet without claim templates has no member for them.
    let mut without = set(vec![]);
    without["spec"]
        .as_object_mut()
        .expect("a spec")
        .remove("volumeClaimTemplates");
    let none = round_trip(&without);
    assert!(!none.contains("volumeClaimTemplates"), "{none}");
}

#[test]
fn a_resource_slices_attributes_render_bools_quantities_and_maps_of_messages() {
    let slice = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-1-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-1", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0",
                "attributes": {"z.example.com/lanes": {"bools": [true, false, true]}, "a.example.com/model": {"string": "x1"},
                    "ints": {"ints": [1, -2]}, "on": {"bool": false}},
                "capacity": {"memory": {"value": "16Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "2Gi"]}}}}]}});
    let json = round_trip(&slice);
    assert!(
        json.contains(r#""attributes":{"a.example.com/model":{"string":"x1"},"ints":{"ints":[1,-2]},"on":{"bool":false},"z.example.com/lanes":{"bools":[true,false,true]}}"#),
        "{json}"
    );
    assert!(json.contains(r#""validValues":["1Gi","2Gi"]"#), "{json}");
    // The encoder writes repeated bools unpacked, as Go's generated code does (field 7,
    // varints); the packed form is read by the renderer's unit tests.
    let body = encode_object(&slice, "resource.k8s.io/v1", "ResourceSlice").unwrap();
    let unpacked = [0x38, 0x01, 0x38, 0x00, 0x38, 0x01];
    assert!(body.windows(unpacked.len()).any(|w| w == unpacked));
}

//! The admission chain, as kube-apiserver runs it for the webhook configurations it stores
//! (`admissionregistration.k8s.io/v1`): on a create, update, patch or delete, every mutating
//! webhook whose rules and selectors match is called first, in the order of its configuration's
//! name, and its JSONPatch applied; then every matching validating webhook. Each call is an
//! `admission.k8s.io/v1` AdmissionReview POSTed over HTTPS to the webhook's
//! `clientConfig.url`, trusting only its `caBundle`, with its `timeoutSeconds`. A denial
//! answers the client as kube-apiserver does (`admission webhook "NAME" denied the request:
//! ...`); a webhook that cannot be called, times out or answers garbage gets its
//! `failurePolicy` (`Fail`, the default: the request fails with 500; `Ignore`: skipped). A
//! dry-run request is sent only to webhooks whose `sideEffects` is `None` or `NoneOnDryRun`,
//! and refused if another would match.
//!
//! Not done (the dev server answers these differently from kube-apiserver): webhooks named by
//! `clientConfig.service` are not resolved (the call fails, and the failure policy answers);
//! `matchConditions`, `matchPolicy: Equivalent` and `reinvocationPolicy` are not evaluated;
//! warnings are not passed on as `Warning` headers; a delete of a collection is not reviewed;
//! the webhook configurations themselves are never reviewed (as in kube-apiserver).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};

use crate::Status;
use crate::core::Core;
use crate::resource::ResourceInfo;

/// Where the configurations are stored.
const MUTATING: &str = "admissionregistration.k8s.io/mutatingwebhookconfigurations";
const VALIDATING: &str = "admissionregistration.k8s.io/validatingwebhookconfigurations";
/// The longest webhook answer read.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// What a write does, as AdmissionRequest.operation names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// One write about to be stored.
pub(crate) struct Attempt<'a> {
    pub resource: &'a ResourceInfo,
    /// `None` for the main resource, else e.g. `status`.
    pub subresource: Option<&'a str>,
    pub operation: Operation,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub dry_run: bool,
    /// Who writes (the request's user agent), for `userInfo.username`.
    pub user: &'a str,
}

/// Whether any webhook configuration is stored (if not, a write pays nothing for admission).
pub(crate) fn configured(core: &Core) -> bool {
    [MUTATING, VALIDATING]
        .iter()
        .any(|key| core.store.read(key, |c, _| !c.objects.is_empty()))
}

/// Runs the chain on `object` (`None` for a delete; `old` is the stored object, `None` for a
/// create): answers the object to store, mutated by the mutating webhooks, or the status that
/// refuses the write.
pub(crate) async fn admit(
    core: &Core,
    attempt: &Attempt<'_>,
    mut object: Option<Value>,
    old: Option<&Value>,
) -> Result<Option<Value>, Status> {
    if attempt.resource.group == "admissionregistration.k8s.io" {
        return Ok(object);
    }
    for (kind, key) in [("mutating", MUTATING), ("validating", VALIDATING)] {
        for hook in webhooks(core, key) {
            if !matches(core, &hook, attempt, object.as_ref(), old) {
                continue;
            }
            let name = hook["name"].as_str().unwrap_or_default().to_owned();
            let side_effects = hook["sideEffects"].as_str().unwrap_or_default();
            if attempt.dry_run && !matches!(side_effects, "None" | "NoneOnDryRun") {
                return Err(Status::bad_request(format!(
                    "admission webhook {name:?} does not support dry run"
                )));
            }
            let ignore = hook["failurePolicy"].as_str() == Some("Ignore");
            match call(&hook, attempt, object.as_ref(), old).await {
                Ok(answer) => {
                    object = apply(kind, &name, answer, object)?;
                }
                Err(reason) if ignore => {
                    tracing::info!(webhook = %name, "webhook failed, ignored by its failurePolicy: {reason}");
                }
                Err(reason) => {
                    return Err(Status::internal(format!(
                        "Internal error occurred: failed calling webhook {name:?}: {reason}"
                    )));
                }
            }
        }
    }
    Ok(object)
}

/// The webhooks of the configurations under `key`, in the order of the configurations'
/// names, then as listed.
fn webhooks(core: &Core, key: &str) -> Vec<Value> {
    core.store.read(key, |c, _| {
        c.objects
            .values()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.json).ok())
            .flat_map(|config| match config.get("webhooks") {
                Some(Value::Array(hooks)) => hooks.clone(),
                _ => Vec::new(),
            })
            .collect()
    })
}

fn labels_of(object: Option<&Value>) -> BTreeMap<String, String> {
    object
        .and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a metav1.LabelSelector (as JSON) selects `labels`; an unreadable selector selects
/// nothing.
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    if selector.is_null() {
        return true;
    }
    let pairs_hold = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| {
            m.iter()
                .all(|(k, v)| labels.get(k).map(String::as_str) == v.as_str())
        });
    let expressions_hold = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|exprs| {
            exprs.iter().all(|e| {
                let key = e["key"].as_str().unwrap_or_default();
                let values: Vec<&str> = e["values"]
                    .as_array()
                    .map(|v| v.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let value = labels.get(key).map(String::as_str);
                match e["operator"].as_str() {
                    Some("In") => value.is_some_and(|v| values.contains(&v)),
                    Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
                    Some("Exists") => value.is_some(),
                    Some("DoesNotExist") => value.is_none(),
                    _ => false,
                }
            })
        });
    pairs_hold && expressions_hold
}

fn listed(list: &Value, value: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|v| v == "*" || v.as_str() == Some(value)))
}

/// Whether `hook`'s rules, namespace selector and object selector match the write.
fn matches(
    core: &Core,
    hook: &Value,
    attempt: &Attempt<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> bool {
    let resource = attempt.resource;
    let plural = match attempt.subresource {
        Some(sub) => format!("{}/{sub}", resource.plural),
        None => resource.plural.clone(),
    };
    let rule_matches = |rule: &Value| {
        listed(&rule["operations"], attempt.operation.as_str())
            && listed(&rule["apiGroups"], &resource.group)
            && listed(&rule["apiVersions"], &resource.version)
            && rule["resources"].as_array().is_some_and(|rs| {
                rs.iter().filter_map(Value::as_str).any(|r| {
                    r == plural
                        || (r == "*" && attempt.subresource.is_none())
                        || r == "*/*"
                        || r.strip_suffix("/*") == Some(&resource.plural)
                            && attempt.subresource.is_some()
                        || r.strip_prefix("*/") == attempt.subresource
                })
            })
            && match rule["scope"].as_str() {
                Some("Cluster") => !resource.namespaced,
                Some("Namespaced") => resource.namespaced,
                _ => true,
            }
    };
    if !hook["rules"]
        .as_array()
        .is_some_and(|rules| rules.iter().any(rule_matches))
    {
        return false;
    }
    let namespace_labels = if resource.group.is_empty() && resource.kind == "Namespace" {
        Some(labels_of(object.or(old)))
    } else if let Some(ns) = attempt.namespace {
        let stored = core.store.get("/namespaces", ns);
        Some(stored.map(|n| n.labels.clone()).unwrap_or_default())
    } else {
        // Another cluster-scoped object: the namespace selector never skips it.
        None
    };
    if let Some(labels) = namespace_labels
        && !selects(&hook["namespaceSelector"], &labels)
    {
        return false;
    }
    let object_selector = &hook["objectSelector"];
    selects(object_selector, &labels_of(object)) || selects(object_selector, &labels_of(old))
}

/// Calls the webhook: its AdmissionResponse, or why there is none.
async fn call(
    hook: &Value,
    attempt: &Attempt<'_>,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Value, String> {
    let url = hook
        .pointer("/clientConfig/url")
        .and_then(Value::as_str)
        .ok_or(
            "the dev server calls webhooks by clientConfig.url only (services are not resolved)",
        )?;
    let timeout = hook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30);
    let uid = format!("{:032x}", rand::random::<u128>());
    let resource = attempt.resource;
    let review = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": resource.group, "version": resource.version, "kind": resource.kind},
            "resource": {"group": resource.group, "version": resource.version, "resource": resource.plural},
            "subResource": attempt.subresource.unwrap_or_default(),
            "requestKind": {"group": resource.group, "version": resource.version, "kind": resource.kind},
            "requestResource": {"group": resource.group, "version": resource.version, "resource": resource.plural},
            "name": attempt.name.unwrap_or_default(),
            "namespace": attempt.namespace.unwrap_or_default(),
            "operation": attempt.operation.as_str(),
            "userInfo": {"username": attempt.user, "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": attempt.dry_run,
        },
    });
    let ca = hook
        .pointer("/clientConfig/caBundle")
        .and_then(Value::as_str)
        .map(|b| {
            BASE64
                .decode(b)
                .map_err(|e| format!("caBundle is not base64: {e}"))
        })
        .transpose()?;
    let separator = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{separator}timeout={timeout}s");
    let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(Duration::from_secs(timeout), post(&url, ca, body))
        .await
        .map_err(|_| format!("Post {url:?}: context deadline exceeded"))??;
    let answer: Value = serde_json::from_slice(&answer)
        .map_err(|e| format!("the answer is not an AdmissionReview: {e}"))?;
    if answer["apiVersion"] != "admission.k8s.io/v1" || answer["kind"] != "AdmissionReview" {
        return Err("the answer is not an admission.k8s.io/v1 AdmissionReview".into());
    }
    let response = answer
        .get("response")
        .cloned()
        .ok_or("the answer has no response")?;
    if response["uid"] != uid.as_str() {
        return Err(format!(
            "expected response.uid={uid:?}, got {}",
            response["uid"]
        ));
    }
    Ok(response)
}

/// The verdict of one webhook: the (possibly patched) object, or the denial.
fn apply(
    kind: &str,
    name: &str,
    response: Value,
    object: Option<Value>,
) -> Result<Option<Value>, Status> {
    if response["allowed"] != true {
        let status = &response["status"];
        let code = status["code"]
            .as_u64()
            .and_then(|c| u16::try_from(c).ok())
            .filter(|c| (400..600).contains(c))
            .unwrap_or(403);
        let message = status["message"].as_str().unwrap_or_default();
        let reason = status["reason"].as_str().unwrap_or("Forbidden");
        let message = if message.is_empty() {
            format!("admission webhook {name:?} denied the request without explanation")
        } else {
            format!("admission webhook {name:?} denied the request: {message}")
        };
        return Err(Status::new(code, reason, message));
    }
    let Some(patch) = response.get("patch").and_then(Value::as_str) else {
        return Ok(object);
    };
    let failed = |what: String| {
        Status::internal(format!(
            "Internal error occurred: failed calling webhook {name:?}: {what}"
        ))
    };
    if kind != "mutating" {
        return Err(failed("a validating webhook answered a patch".into()));
    }
    if response["patchType"] != "JSONPatch" {
        return Err(failed(format!(
            "unsupported patchType {}",
            response["patchType"]
        )));
    }
    let bytes = BASE64
        .decode(patch)
        .map_err(|e| failed(format!("the patch is not base64: {e}")))?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes)
        .map_err(|e| failed(format!("the patch is not a JSON patch: {e}")))?;
    let Some(mut object) = object else {
        return Err(failed("a patch for a request without an object".into()));
    };
    json_patch::patch(&mut object, &patch)
        .map_err(|e| failed(format!("the patch does not apply: {e}")))?;
    Ok(Some(object))
}

/// POSTs `body` to `url` over HTTPS, trusting only `ca` (PEM), and answers the body of a 200.
async fn post(url: &str, ca: Option<Vec<u8>>, body: Vec<u8>) -> Result<Bytes, String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("url {url:?}: {e}"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("url {url:?}: webhooks are called over https only"));
    }
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        for cert in CertificateDer::pem_slice_iter(&ca) {
            let cert = cert.map_err(|e| format!("caBundle: {e}"))?;
            roots.add(cert).map_err(|e| format!("caBundle: {e}"))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, Full<Bytes>>(connector);
    let request = http::Request::post(uri)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let response = client
        .request(request)
        .await
        .map_err(|e| format!("Post {url:?}: {}", error_chain(&e)))?;
    let status = response.status();
    let body = http_body_util::Limited::new(response.into_body(), MAX_ANSWER_BYTES)
        .collect()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?
        .to_bytes();
    if status != http::StatusCode::OK {
        return Err(format!(
            "the webhook answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(512)])
        ));
    }
    Ok(body)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_read_as_the_api_server_reads_them() {
        let labels: BTreeMap<String, String> = [("env".to_owned(), "prod".to_owned())].into();
        assert!(selects(&Value::Null, &labels));
        assert!(selects(&json!({}), &labels));
        assert!(selects(&json!({"matchLabels": {"env": "prod"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"env": "dev"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "env", "operator": "Bogus"}]}),
            &labels
        ));
    }

    #[test]
    fn a_denial_reads_as_kube_apiservers() {
        let denied = apply(
            "validating",
            "unique-host.kubewasm.dev",
            json!({"allowed": false, "status": {"code": 409, "message": "host taken"}}),
            Some(json!({})),
        )
        .unwrap_err();
        assert_eq!(denied.code, 409);
        assert_eq!(
            denied.message,
            "admission webhook \"unique-host.kubewasm.dev\" denied the request: host taken"
        );
        let patch = BASE64.encode(br#"[{"op":"add","path":"/a","value":1}]"#);
        let patched = apply(
            "mutating",
            "m",
            json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}),
            Some(json!({})),
        )
        .unwrap();
        assert_eq!(patched, Some(json!({"a": 1})));
        assert!(
            apply(
                "validating",
                "v",
                json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}),
                Some(json!({})),
            )
            .is_err()
        );
    }
}

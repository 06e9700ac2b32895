//! A guest of the 0.3.0 world `admission-policy`: validates and mutates ConfigMaps.
//!
//! Its config (JSON, every field optional): `{"name": "p", "failurePolicy": "ignore",
//! "timeoutSeconds": 2, "version": "v1", "lookup": true}`. The object's name chooses the
//! answer of both webhooks: a name containing `deny` is denied (code 422, message `denied
//! NAME`), `trap` traps, `spin` loops until its deadline, `err` answers `err`, `garbage` has
//! `mutate` answer a JSON array. Anything else is allowed with the warning `checked by NAME
//! VERSION`, and `mutate` adds the label `admitted-by: NAME-VERSION`. With `lookup`, an
//! allowed ConfigMap is denied when the cache holds another ConfigMap, in any namespace, whose
//! label `owner` has the same value (an index query in the review, the shape of the
//! unique-host policy).
//!
//! Hostile declarations and answers, for the tests of the host's bounds: `"webhooks":
//! ["validating"]` declares only those kinds (default both); `"groups"` and `"resources"`
//! replace the rule's `[""]` and `["configmaps"]`; `"padRules": N` adds N rules of 64
//! resource names of 300 bytes each (about 19 KiB a rule); `"rename": true` has `mutate`
//! answer the object renamed (`NAME-renamed`).

wit_bindgen::generate!({
    path: ["../../../wit/0.2", "../../../wit/0.2.1", "../../../wit/0.3"],
    world: "kubewasm:controller/admission-policy@0.3.0",
    generate_all,
});

use exports::kubewasm::controller0_2_0::plugin;
use exports::kubewasm::controller0_3_0::admission;
use kubewasm::controller0_2_0::cache;
use kubewasm::controller0_2_0::types::{
    Gvk, IndexDecl, IndexSource, PageRequest, PluginInfo, Subscription,
};
use kubewasm::controller0_3_0::admission_types::{
    AdmissionInfo, AdmissionRequest, FailurePolicy, Mutation, Operation, Rule, Scope, SideEffects,
    Verdict, Webhook,
};

use std::cell::RefCell;

#[derive(serde::Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    name: Option<String>,
    failure_policy: Option<String>,
    timeout_seconds: Option<u32>,
    version: Option<String>,
    lookup: bool,
    webhooks: Option<Vec<String>>,
    groups: Option<Vec<String>>,
    resources: Option<Vec<String>>,
    pad_rules: u32,
    rename: bool,
}

thread_local! {
    static CONFIG: RefCell<Config> = RefCell::new(Config::default());
}

fn config() -> Config {
    CONFIG.with(|c| c.borrow().clone())
}

fn name() -> String {
    config().name.unwrap_or_else(|| "admission-probe".into())
}

struct Guest;

impl plugin::Guest for Guest {
    fn init(config: String) -> Result<PluginInfo, String> {
        let parsed: Config = if config.is_empty() {
            Config::default()
        } else {
            serde_json::from_str(&config).map_err(|e| format!("config: {e}"))?
        };
        let lookup = parsed.lookup;
        CONFIG.with(|c| *c.borrow_mut() = parsed);
        let mut info = PluginInfo {
            name: name(),
            subscriptions: Vec::new(),
            indexes: Vec::new(),
        };
        if lookup {
            info.subscriptions.push(Subscription {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                namespace: None,
                label_selector: None,
                field_selector: None,
                resync_seconds: None,
                events: false,
                queue: Vec::new(),
            });
            info.indexes.push(IndexDecl {
                subscription: 0,
                name: "owner".into(),
                source: IndexSource::Label("owner".into()),
            });
        }
        Ok(info)
    }
}

fn webhook() -> Webhook {
    let c = config();
    let mut rules = vec![Rule {
        operations: vec![Operation::Create, Operation::Update],
        api_groups: c.groups.clone().unwrap_or_else(|| vec![String::new()]),
        api_versions: vec!["v1".into()],
        resources: c
            .resources
            .clone()
            .unwrap_or_else(|| vec!["configmaps".into()]),
        scope: Scope::Namespaced,
    }];
    for i in 0..c.pad_rules {
        rules.push(Rule {
            operations: vec![Operation::Create],
            api_groups: vec![String::new()],
            api_versions: vec!["v1".into()],
            resources: (0..64)
                .map(|j| format!("{i}-{j}-{}", "p".repeat(290)))
                .collect(),
            scope: Scope::Namespaced,
        });
    }
    Webhook {
        rules,
        failure_policy: if c.failure_policy.as_deref() == Some("ignore") {
            FailurePolicy::Ignore
        } else {
            FailurePolicy::Fail
        },
        side_effects: SideEffects::None,
        timeout_seconds: c.timeout_seconds.unwrap_or(0),
        namespace_selector: None,
        object_selector: None,
    }
}

/// Whether the config asks for the webhook of `kind` (both when it names none).
fn declares(kind: &str) -> bool {
    config()
        .webhooks
        .is_none_or(|kinds| kinds.iter().any(|k| k == kind))
}

#[derive(serde::Deserialize, Default)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    labels: std::collections::BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct Object {
    #[serde(default)]
    metadata: Meta,
}

fn meta(request: &AdmissionRequest) -> Meta {
    request
        .object
        .as_deref()
        .and_then(|o| serde_json::from_str::<Object>(o).ok())
        .map(|o| o.metadata)
        .unwrap_or_default()
}

/// The answer the object's name asks for; `Ok(None)` to allow.
fn scripted(meta: &Meta) -> Result<Option<Verdict>, String> {
    let n = &meta.name;
    if n.contains("trap") {
        panic!("trapping on {n}");
    }
    if n.contains("spin") {
        #[allow(clippy::empty_loop)]
        loop {
            std::hint::black_box(());
        }
    }
    if n.contains("err") {
        return Err(format!("failing {n}"));
    }
    if n.contains("deny") {
        return Ok(Some(Verdict {
            allowed: false,
            code: 422,
            message: format!("denied {n}"),
            warnings: Vec::new(),
        }));
    }
    if config().lookup
        && let Some(owner) = meta.labels.get("owner")
    {
        let page = cache::by_index(
            0,
            "owner",
            owner,
            &PageRequest {
                limit: 2,
                continue_token: None,
            },
        )
        .map_err(|e| format!("cache: {e:?}"))?;
        for other in page.objects {
            let o: Object = serde_json::from_str(&other).map_err(|e| e.to_string())?;
            if o.metadata.name != meta.name || o.metadata.namespace != meta.namespace {
                return Ok(Some(Verdict {
                    allowed: false,
                    code: 409,
                    message: format!(
                        "owner {owner} is taken by {}/{}",
                        o.metadata.namespace, o.metadata.name
                    ),
                    warnings: Vec::new(),
                }));
            }
        }
    }
    Ok(None)
}

fn allowed() -> Verdict {
    let c = config();
    Verdict {
        allowed: true,
        code: 0,
        message: String::new(),
        warnings: vec![format!(
            "checked by {} {}",
            name(),
            c.version.as_deref().unwrap_or("v0")
        )],
    }
}

impl admission::Guest for Guest {
    fn declare() -> Result<AdmissionInfo, String> {
        Ok(AdmissionInfo {
            validating: declares("validating").then(webhook),
            mutating: declares("mutating").then(webhook),
        })
    }

    fn validate(request: AdmissionRequest) -> Result<Verdict, String> {
        Ok(scripted(&meta(&request))?.unwrap_or_else(allowed))
    }

    fn mutate(request: AdmissionRequest) -> Result<Mutation, String> {
        let m = meta(&request);
        if let Some(denied) = scripted(&m)? {
            return Ok(Mutation {
                verdict: denied,
                object: None,
            });
        }
        if m.name.contains("garbage") {
            return Ok(Mutation {
                verdict: allowed(),
                object: Some("[1,2,3]".into()),
            });
        }
        let mut object: serde_json::Value = request
            .object
            .as_deref()
            .map(serde_json::from_str)
            .transpose()
            .map_err(|e| e.to_string())?
            .ok_or("no object")?;
        let version = config().version.unwrap_or_else(|| "v0".into());
        object["metadata"]["labels"]["admitted-by"] = format!("{}-{version}", name()).into();
        if config().rename {
            object["metadata"]["name"] = format!("{}-renamed", m.name).into();
        }
        Ok(Mutation {
            verdict: allowed(),
            object: Some(object.to_string()),
        })
    }
}

export!(Guest);

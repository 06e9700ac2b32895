//! The admission calls of a plugin of contract 0.3.0: a small pool of guest instances, each
//! instantiated, `init`ialised, connected to the plugin's cache, client and queue, and asked
//! for its `admission.declare`; a review takes an idle instance (or starts one), calls
//! `validate` or `mutate` under the review's deadline, and turns what the guest answered
//! into an [`Answer`], or into a [`Failure`] the webhook's failure policy decides on. An
//! instance that faults is thrown away (the next review starts a fresh one); one that answered
//! `err` or garbage is kept.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Semaphore;
use wasmtime::Store;

use crate::admission::declaration::{
    Declaration, FailurePolicy, LabelSelector, Operation, Rule, Scope, SelectorOperator,
    SelectorRequirement, SideEffects, Webhook, WebhookKind,
};
use crate::admission::grants::{
    Discovered, {self as authority},
};
use crate::admission::review::{Answer, Request, patch_between};

use crate::client::WriteGrants;
use crate::error::PluginError;
use crate::guest::calls::Outcome;
use crate::guest::instance::{Recipe, guarded, new_store, subscribed};
use crate::observer::FailureKind;
use crate::reconcile::context::InstanceImports;
use crate::wasm::state::HostState;

use crate::contracts::AdmissionIndices;
use crate::contracts::v0_3::exports::kubewasm::controller0_3_0::admission as guest;
use crate::contracts::v0_3::kubewasm::controller0_3_0::admission_types as wit;

/// Why a review got no answer from the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureReason {
    /// The guest trapped.
    Trap,
    /// The call ran past the review's deadline.
    Timeout,
    /// The instance hit its memory cap.
    Memory,
    /// The guest answered `err`.
    Error,
    /// The guest answered something the host cannot use (a mutation that is not a JSON
    /// object, or changes apiVersion or kind).
    Garbage,
    /// No instance could be had within the deadline (all busy, or none would start).
    Unavailable,
}

impl FailureReason {
    /// A label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Trap => "trap",
            FailureReason::Timeout => "timeout",
            FailureReason::Memory => "memory",
            FailureReason::Error => "error",
            FailureReason::Garbage => "garbage",
            FailureReason::Unavailable => "unavailable",
        }
    }
}

/// A review the guest did not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: FailureReason,
    pub message: String,
}

/// One guest instance that answers reviews.
struct AdmissionInstance {
    store: Store<HostState>,
    admission: guest::Guest,
}

/// How many instances of one plugin answer reviews at once.
pub const ADMISSION_INSTANCES: usize = 2;

/// A loaded plugin's admission: its declared webhooks and the instances that answer them.
pub struct AdmissionPolicy {
    name: Arc<str>,
    recipe: Recipe,
    indices: AdmissionIndices,
    declaration: Declaration,
    idle: Mutex<Vec<AdmissionInstance>>,
    permits: Semaphore,
}

impl std::fmt::Debug for AdmissionPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionPolicy")
            .field("name", &self.name)
            .field("declaration", &self.declaration)
            .finish_non_exhaustive()
    }
}

/// What a policy's webhooks are checked against when it loads (see
/// [`webhook_grants`](super::webhook_grants)).
pub(crate) struct Authority<'a> {
    /// The plugin's config key (its file's stem), which refusals tell the author to edit.
    pub(crate) key: &'a str,
    /// What it may write; its reads are the recipe's grants.
    pub(crate) writes: &'a WriteGrants,
    /// Resolves the plural of a resource that is not built in (`None`: no cluster to ask).
    pub(crate) discovery: Option<&'a kube::Client>,
}

impl AdmissionPolicy {
    /// Starts the first instance and reads its declaration, checked (its sanity, its size,
    /// and its rules against the plugin's grants): an error (the plugin does not load, or a
    /// reload keeps the old version) if it fails or declares nonsense or more than granted.
    pub(crate) async fn start(
        recipe: Recipe,
        indices: AdmissionIndices,
        authority: Authority<'_>,
    ) -> Result<AdmissionPolicy, PluginError> {
        let invalid = |what: String| PluginError::InvalidDeclaration {
            file: recipe.compiled.file.clone(),
            plugin: recipe.name.to_string(),
            what,
        };
        let (instance, declared) = start_instance(&recipe, &indices)
            .await
            .map_err(|e| invalid(format!("admission: {e}")))?;
        let declaration = declaration(declared)
            .validate()
            .map_err(|e| invalid(format!("admission declaration: {e}")))?;
        let discovered = match authority.discovery {
            Some(client) => discover(client, &authority::unresolved(&declaration)).await,
            None => Discovered::new(),
        };
        authority::check(
            &declaration,
            &recipe.access.grants,
            authority.writes,
            &discovered,
            authority.key,
        )
        .map_err(|what| PluginError::WebhookNotGranted {
            file: recipe.compiled.file.clone(),
            plugin: recipe.name.to_string(),
            what,
        })?;
        Ok(AdmissionPolicy {
            name: recipe.name.clone(),
            recipe,
            indices,
            declaration,
            idle: Mutex::new(vec![instance]),
            permits: Semaphore::new(ADMISSION_INSTANCES),
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the plugin declared.
    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// Answers `request` for the webhook `kind` within `deadline` (waiting for an instance
    /// included): the guest's answer, or why there is none. A fault is counted in the plugin's
    /// status like a handler's.
    pub async fn review(
        &self,
        kind: WebhookKind,
        request: &Request,
        deadline: Duration,
    ) -> Result<Answer, Failure> {
        let attempt = async {
            let Ok(_permit) = self.permits.acquire().await else {
                return Err(Failure {
                    reason: FailureReason::Unavailable,
                    message: "the policy is shut down".into(),
                });
            };
            let idle = self.idle.lock().pop();
            let mut instance = match idle {
                Some(i) => i,
                None => start_instance(&self.recipe, &self.indices)
                    .await
                    .map(|(i, _)| i)
                    .map_err(|message| Failure {
                        reason: FailureReason::Unavailable,
                        message,
                    })?,
            };
            let (keep, answer) = instance.review(kind, request, deadline).await;
            if keep {
                self.idle.lock().push(instance);
            }
            answer
        };
        match tokio::time::timeout(deadline, attempt).await {
            Ok(answer) => {
                if let Err(f) = &answer {
                    let kind = match f.reason {
                        FailureReason::Trap => Some(FailureKind::Trap),
                        FailureReason::Timeout => Some(FailureKind::Timeout),
                        FailureReason::Memory => Some(FailureKind::Memory),
                        _ => None,
                    };
                    if let (Some(kind), Some(context)) = (kind, &self.recipe.context) {
                        context
                            .calls
                            .count::<()>(&Outcome::Failed(kind, f.message.clone()));
                    }
                }
                answer
            }
            Err(_) => Err(Failure {
                reason: FailureReason::Timeout,
                message: format!("no answer within {deadline:?}"),
            }),
        }
    }
}

impl AdmissionInstance {
    /// Calls `validate` or `mutate`; answers whether the instance may be used again, and the
    /// review's answer.
    async fn review(
        &mut self,
        kind: WebhookKind,
        request: &Request,
        deadline: Duration,
    ) -> (bool, Result<Answer, Failure>) {
        let req = wit_request(request);
        let admission = self.admission.clone();
        let zero = || Duration::ZERO;
        let outcome = match kind {
            WebhookKind::Validating => {
                match guarded(&mut self.store, deadline, zero, async |s| {
                    admission.call_validate(s, &req).await
                })
                .await
                {
                    Outcome::Ok(v) => Outcome::Ok((v, None)),
                    Outcome::GuestError(e) => Outcome::GuestError(e),
                    Outcome::Failed(k, e) => Outcome::Failed(k, e),
                }
            }
            WebhookKind::Mutating => {
                match guarded(&mut self.store, deadline, zero, async |s| {
                    admission.call_mutate(s, &req).await
                })
                .await
                {
                    Outcome::Ok(m) => Outcome::Ok((m.verdict, Some(m.object))),
                    Outcome::GuestError(e) => Outcome::GuestError(e),
                    Outcome::Failed(k, e) => Outcome::Failed(k, e),
                }
            }
        };
        match outcome {
            Outcome::Ok((verdict, mutated)) => (true, answer(request, verdict, mutated)),
            Outcome::GuestError(message) => (
                true,
                Err(Failure {
                    reason: FailureReason::Error,
                    message,
                }),
            ),
            Outcome::Failed(kind, message) => (
                false,
                Err(Failure {
                    reason: match kind {
                        FailureKind::Trap => FailureReason::Trap,
                        FailureKind::Timeout => FailureReason::Timeout,
                        FailureKind::Memory => FailureReason::Memory,
                    },
                    message,
                }),
            ),
        }
    }
}

/// The host's answer for a guest's verdict (and, for `mutate`, its object).
fn answer(
    request: &Request,
    verdict: wit::Verdict,
    mutated: Option<Option<String>>,
) -> Result<Answer, Failure> {
    let mut answer = Answer::from_verdict(
        verdict.allowed,
        verdict.code,
        &verdict.message,
        verdict.warnings,
    );
    if let Some(Some(object)) = mutated
        && answer.allowed
    {
        let garbage = |message: String| Failure {
            reason: FailureReason::Garbage,
            message,
        };
        let Some(original) = request.object_json() else {
            return Err(garbage(
                "mutate answered an object for a request without one".into(),
            ));
        };
        answer.patch = patch_between(original, &object).map_err(garbage)?;
    }
    Ok(answer)
}

/// The most API groups one load asks discovery about; the resources of any further ones stay
/// unresolved (refused unless a grant of their whole group covers them).
const MAX_DISCOVERED_GROUPS: usize = 8;

/// The kinds of `resources` (`(group, plural)`) by the discovery of `client`'s API server;
/// what is not found (or cannot be asked) is left out.
async fn discover(client: &kube::Client, resources: &[(String, String)]) -> Discovered {
    let mut found = Discovered::new();
    let mut groups: Vec<&str> = resources.iter().map(|(g, _)| g.as_str()).collect();
    groups.sort_unstable();
    groups.dedup();
    for group in groups.into_iter().take(MAX_DISCOVERED_GROUPS) {
        let api = match kube::discovery::oneshot::group(client, group).await {
            Ok(api) => api,
            Err(err) => {
                tracing::debug!(group, error = %err, "no discovery of an admission rule's group");
                continue;
            }
        };
        let versions: Vec<String> = api.versions().map(str::to_owned).collect();
        for version in versions {
            for (resource, _) in api.versioned_resources(&version) {
                if resources
                    .iter()
                    .any(|(g, p)| g == group && *p == resource.plural)
                {
                    found
                        .entry((group.to_owned(), resource.plural.clone()))
                        .or_insert(resource.kind.clone());
                }
            }
        }
    }
    found
}

/// A fresh instance, initialised, connected and asked for its declaration.
async fn start_instance(
    recipe: &Recipe,
    indices: &AdmissionIndices,
) -> Result<(AdmissionInstance, wit::AdmissionInfo), String> {
    let pre = crate::guest::declare::v0_2_pre(&recipe.compiled).map_err(|e| e.to_string())?;
    let Some(context) = recipe.context.clone() else {
        return Err("an admission policy is a plugin of contract 0.3, with a 0.2 context".into());
    };
    let mut store = new_store(
        pre.engine(),
        recipe.name.clone(),
        &recipe.limits,
        recipe.access.clone(),
        recipe.log_gate.clone(),
    );
    store.data_mut().limiter.count_into(recipe.memory.clone());
    let (mut instance, info, declared) = instantiate(
        pre,
        indices,
        store,
        &recipe.config,
        recipe.limits.call_deadline,
    )
    .await?;
    let subscriptions = subscribed(&info);
    instance.store.data_mut().v0_2_imports =
        Some(Arc::new(InstanceImports::new(context, subscriptions)));
    Ok((instance, declared))
}

/// What the component `compiled` declares (its webhooks, under the plugin's key), from a throw-away instance
/// that is not connected to any cluster, checked against `policy`'s grants as a load is
/// (a resource that is not built in is resolved through the grants' kinds, without
/// discovery): `None` if it is no admission policy. For `kubewasm webhooks`, which needs no
/// cluster.
pub async fn declared_webhooks(
    compiled: &crate::wasm::component::CompiledPlugin,
    policy: &crate::manager::policy::PluginPolicy,
    options: &crate::guest::declare::CheckOptions,
) -> Result<Option<(String, Declaration)>, PluginError> {
    let pre = crate::guest::declare::v0_2_pre(compiled)?;
    let Some(indices) = pre.admission_indices() else {
        return Ok(None);
    };
    let limits = policy.limits.unwrap_or(options.limits);
    let store = new_store(
        pre.engine(),
        "webhooks".into(),
        &limits,
        Arc::new(crate::cache::access::Access::empty(policy.grants.clone())),
        Arc::new(crate::guest::log_gate::LogGate::new(options.logs)),
    );
    let invalid = |what: String| PluginError::InvalidDeclaration {
        file: compiled.file.clone(),
        plugin: crate::guest::declare::label_of(&compiled.file).to_string(),
        what,
    };
    let (_, info, declared) =
        instantiate(pre, indices, store, &policy.config, limits.call_deadline)
            .await
            .map_err(|e| invalid(format!("admission: {e}")))?;
    let declaration = declaration(declared)
        .validate()
        .map_err(|e| invalid(format!("admission declaration of {}: {e}", info.name)))?;
    let key = crate::model::identity::PluginKey::of(&compiled.file)?;
    authority::check(
        &declaration,
        &policy.grants,
        &policy.writes,
        &Discovered::new(),
        key.as_str(),
    )
    .map_err(|what| PluginError::WebhookNotGranted {
        file: compiled.file.clone(),
        plugin: key.to_string(),
        what,
    })?;
    tracing::debug!(plugin = %key, name = %info.name, "declared webhooks read");
    Ok(Some((key.to_string(), declaration)))
}

/// Instantiates the component in `store`, calls `init` with `config` and `declare`.
async fn instantiate(
    pre: &crate::contracts::v0_2::PluginPre,
    indices: &AdmissionIndices,
    mut store: Store<HostState>,
    config: &str,
    deadline: Duration,
) -> Result<
    (
        AdmissionInstance,
        crate::contracts::v0_2::kubewasm::controller::types::PluginInfo,
        wit::AdmissionInfo,
    ),
    String,
> {
    let pre_plugin = pre.plugin_indices();
    let pre = pre.instance_pre();
    let zero = || Duration::ZERO;
    let instance = match guarded(&mut store, deadline, zero, async |s| {
        pre.instantiate_async(s).await.map(Ok)
    })
    .await
    {
        Outcome::Ok(i) => i,
        Outcome::GuestError(e) | Outcome::Failed(_, e) => {
            return Err(format!("instantiation failed: {e}"));
        }
    };
    let plugin = pre_plugin
        .ok_or("an admission policy declares through `plugin@0.2.0`")?
        .load(&mut store, &instance)
        .map_err(|e| format!("{e:#}"))?;
    let admission = indices
        .load(&mut store, &instance)
        .map_err(|e| format!("{e:#}"))?;
    let info = match guarded(&mut store, deadline, zero, async |s| {
        plugin.call_init(s, config).await
    })
    .await
    {
        Outcome::Ok(info) => info,
        Outcome::GuestError(e) => return Err(format!("init failed: {e}")),
        Outcome::Failed(kind, e) => return Err(format!("init {}: {e}", kind.as_str())),
    };
    let declared = match guarded(&mut store, deadline, zero, async |s| {
        admission.call_declare(s).await
    })
    .await
    {
        Outcome::Ok(d) => d,
        Outcome::GuestError(e) => return Err(format!("declare failed: {e}")),
        Outcome::Failed(kind, e) => return Err(format!("declare {}: {e}", kind.as_str())),
    };
    Ok((AdmissionInstance { store, admission }, info, declared))
}

fn wit_request(r: &Request) -> wit::AdmissionRequest {
    wit::AdmissionRequest {
        uid: r.uid.clone(),
        operation: match r.operation {
            Operation::Create => wit::Operation::Create,
            Operation::Update => wit::Operation::Update,
            Operation::Delete => wit::Operation::Delete,
            Operation::Connect => wit::Operation::Connect,
        },
        kind: wit::GroupVersionKind {
            group: r.kind.group.clone(),
            version: r.kind.version.clone(),
            kind: r.kind.kind.clone(),
        },
        resource: wit::GroupVersionResource {
            group: r.resource.group.clone(),
            version: r.resource.version.clone(),
            resource: r.resource.resource.clone(),
        },
        sub_resource: r.sub_resource.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        object: r.object_json().map(str::to_owned),
        old_object: r.old_object_json().map(str::to_owned),
        user_info: wit::UserInfo {
            username: r.user_info.username.clone(),
            uid: r.user_info.uid.clone(),
            groups: r.user_info.groups.clone(),
            extra: r
                .user_info
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        dry_run: r.dry_run.unwrap_or(false),
    }
}

/// The host's model of what the guest declared (checked afterwards).
fn declaration(info: wit::AdmissionInfo) -> Declaration {
    Declaration {
        validating: info.validating.map(webhook),
        mutating: info.mutating.map(webhook),
    }
}

fn webhook(w: wit::Webhook) -> Webhook {
    Webhook {
        rules: w.rules.into_iter().map(rule).collect(),
        failure_policy: match w.failure_policy {
            wit::FailurePolicy::Fail => FailurePolicy::Fail,
            wit::FailurePolicy::Ignore => FailurePolicy::Ignore,
        },
        side_effects: match w.side_effects {
            wit::SideEffects::None => SideEffects::None,
            wit::SideEffects::NoneOnDryRun => SideEffects::NoneOnDryRun,
        },
        timeout_seconds: w.timeout_seconds,
        namespace_selector: w.namespace_selector.map(selector),
        object_selector: w.object_selector.map(selector),
    }
}

fn rule(r: wit::Rule) -> Rule {
    Rule {
        operations: r
            .operations
            .into_iter()
            .map(|o| match o {
                wit::Operation::Create => Operation::Create,
                wit::Operation::Update => Operation::Update,
                wit::Operation::Delete => Operation::Delete,
                wit::Operation::Connect => Operation::Connect,
            })
            .collect(),
        api_groups: r.api_groups,
        api_versions: r.api_versions,
        resources: r.resources,
        scope: match r.scope {
            wit::Scope::Cluster => Scope::Cluster,
            wit::Scope::Namespaced => Scope::Namespaced,
            wit::Scope::Any => Scope::Any,
        },
    }
}

fn selector(s: wit::LabelSelector) -> LabelSelector {
    LabelSelector {
        match_labels: s.match_labels.into_iter().collect(),
        match_expressions: s
            .match_expressions
            .into_iter()
            .map(|r| SelectorRequirement {
                key: r.key,
                operator: match r.operator {
                    wit::SelectorOperator::In => SelectorOperator::In,
                    wit::SelectorOperator::NotIn => SelectorOperator::NotIn,
                    wit::SelectorOperator::Exists => SelectorOperator::Exists,
                    wit::SelectorOperator::DoesNotExist => SelectorOperator::DoesNotExist,
                },
                values: r.values,
            })
            .collect(),
    }
}

//! The write client: the host's side of the 0.2 contract's `client` import.
//!
//! One [`WriteClient`] per plugin writes through kube's dynamic API (raw requests on the
//! discovered resource, no typed objects: the guest's JSON goes to the server as it is and the
//! server's JSON comes back as it is). Each call is, in order:
//! 0. its namespace, name and kind are the checked types of [`crate::model::names`] (an object given
//!    as JSON is checked here as it is parsed): a guest string that fails the API server's
//!    rules is refused as `Invalid`, counted and logged as below, and nothing is sent;
//! 1. checked against the plugin's [`WriteGrants`] (and, with leader election, whether this
//!    replica leads): a refusal is `NotGranted`, counted, logged with the plugin's name (the
//!    first at once, then at most one line a second per plugin and kind, with how many went
//!    unlogged), and nothing is sent;
//! 2. checked against the plugin's token bucket (client-go's default 5 writes/s, burst 10): a
//!    write whose token comes within [`MAX_PACE`] (1 s) waits for it; one that would wait
//!    longer is refused at once as `TooManyRequests`, counted and logged as a refusal;
//! 3. sent under a wall-clock limit (discovery included): the kind is resolved through
//!    discovery to a served resource, whose group and kind the grants are checked against
//!    again, and the URL is built from that resource and the checked namespace and name, each
//!    percent-encoded as one path segment; no answer in time is `Timeout`;
//! 4. answered with the server's object, or its metav1.Status as a [`WriteError`].
//!
//! Every write names the plugin as its field manager (server-side apply included) and in its
//! User-Agent (`kubewasm/VERSION plugin/NAME`), so the API server's audit log attributes it.
//! A write the server could not answer usefully (no connection, a timeout, a 5xx, a 403 for
//! the host's credentials) is logged as a warning with the plugin's name. The write metrics
//! name the kind only of a granted write whose kind a grant names or discovery has resolved,
//! and [`OTHER_KIND`] otherwise: a guest inventing kinds makes no new series.

mod error;
pub(crate) mod events;
mod grants;
pub(crate) mod impersonation;
pub(crate) mod refusals;
mod user_agent;

use crate::leader_gate::LeaderGate;
use std::sync::Arc;
use std::time::Duration;
pub use user_agent::{USER_AGENT_VALUE, plugin_user_agent};

use http::header::{HeaderValue, USER_AGENT};
use kube::api::{
    ApiResource, DeleteParams, GroupVersionKind, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use kube::core::Request;
use kubewasm_informer::KindResolver;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::time::Instant;

use crate::client::impersonation::{IMPERSONATE_USER, PluginAccount};
use crate::guest::escape::Escaped;
use crate::model::declared::Gvk;
use crate::model::grants::describe;
use crate::model::names::{InvalidName, Kind, Namespace, ObjectName, path_segment};
use crate::reconcile::rate_limit::TokenBucket;
pub use refusals::Refusal;
use refusals::RefusalLog;

pub use error::{InvalidCause, WriteError};
pub use grants::{WriteGrant, WriteGrants, WriteVerb};

/// Limits on one plugin's writes.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientOptions {
    /// Writes per second, sustained (client-go's default: 5).
    pub qps: f64,
    /// Writes allowed at once above that rate (client-go's default: 10).
    pub burst: u32,
    /// The wall-clock limit of one API call, discovery included.
    pub call_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            qps: 5.0,
            burst: 10,
            call_timeout: Duration::from_secs(10),
        }
    }
}

impl ClientOptions {
    /// Checks the values make sense; the message names the bad one.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Err(format!(
                "writes per second must be positive, got {}",
                self.qps
            ));
        }
        if self.burst == 0 {
            return Err("the write burst must be at least 1".into());
        }
        if self.call_timeout.is_zero() {
            return Err("the API call timeout must be positive".into());
        }
        Ok(())
    }
}

/// Receives the write client's measurements (metrics live outside this module). Calls come
/// from guest calls in progress: implementations must be cheap and must not block.
pub trait WriteObserver: Send + Sync {
    /// A write ended: `kind` is the resource's kind, or [`OTHER_KIND`] for a write not granted
    /// or of a kind neither a grant names nor discovery has resolved; `code` is the HTTP code
    /// (`2xx` on success) or what stopped it (`not-granted`, `not-leader`, `rate-limited`,
    /// `timeout`, `unreachable`, `invalid`).
    fn write_call(&self, _plugin: &str, _verb: WriteVerb, _kind: &str, _code: &str) {}
    /// A write was refused before it was sent, for `refusal`.
    fn refused(&self, _plugin: &str, _refusal: Refusal) {}
    /// The Event recorder dropped an event: the object's event budget was spent.
    fn event_dropped(&self, _plugin: &str) {}
}

/// The kind the write metrics give a write that was not granted, or whose kind neither a grant
/// names nor discovery has resolved.
pub const OTHER_KIND: &str = "other";

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoWriteObserver;

impl WriteObserver for NoWriteObserver {}

/// Finds the API resource (plural, scope) of a kind by discovery, once per kind; one is
/// shared by every plugin's client.
pub struct Resources {
    kinds: KindResolver,
}

#[derive(Clone)]
struct Resolved {
    resource: ApiResource,
    namespaced: bool,
}

impl Resources {
    /// Resolves kinds through `client`'s API server.
    pub fn new(client: kube::Client) -> Self {
        Resources::sharing(KindResolver::new(client))
    }

    /// Resolves kinds through `kinds`, sharing what it found with its other users (the host
    /// resolves subscriptions through the same one).
    pub fn sharing(kinds: KindResolver) -> Self {
        Resources { kinds }
    }

    /// Whether discovery has resolved `gvk` to a served resource.
    fn knows(&self, gvk: &Gvk) -> bool {
        self.kinds.known(&wanted(gvk)).is_some()
    }

    async fn resolve(&self, gvk: &Gvk) -> Result<Resolved, WriteError> {
        let (resource, namespaced) =
            self.kinds
                .resolve(&wanted(gvk))
                .await
                .map_err(|e| match e {
                    kube::Error::Discovery(_) => WriteError::NotFound(format!(
                        "the server has no resource {}",
                        describe(gvk)
                    )),
                    other => WriteError::from(other),
                })?;
        Ok(Resolved {
            resource,
            namespaced,
        })
    }
}

fn wanted(gvk: &Gvk) -> GroupVersionKind {
    GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind)
}

/// An object to write to, by resource and name, each checked.
#[derive(Debug, Clone)]
pub struct ObjectRef {
    pub kind: Kind,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<Namespace>,
    pub name: ObjectName,
}

impl ObjectRef {
    /// Checks a guest's reference: the kind's parts, the namespace and the name by the
    /// API server's rules (the name by its resource's).
    pub fn new(gvk: Gvk, namespace: Option<&str>, name: &str) -> Result<Self, InvalidName> {
        let name = ObjectName::new(&gvk.group, name)?;
        Ok(ObjectRef {
            kind: Kind::new(&gvk)?,
            namespace: namespace.map(Namespace::new).transpose()?,
            name,
        })
    }

    pub fn gvk(&self) -> &Gvk {
        self.kind.gvk()
    }

    /// What decides the object's shard: its namespace, and name.
    fn shard_key(&self) -> (Option<&str>, &str) {
        (
            self.namespace.as_ref().map(Namespace::as_str),
            self.name.as_str(),
        )
    }
}

/// A guest string refused as the API server refuses it: `invalid`, with the field at fault.
impl From<InvalidName> for WriteError {
    fn from(error: InvalidName) -> Self {
        let field = match error.field {
            "namespace" => "metadata.namespace",
            "name" => "metadata.name",
            "group" | "version" => "apiVersion",
            other => other,
        };
        WriteError::Invalid {
            message: error.to_string(),
            causes: vec![InvalidCause {
                field: field.to_owned(),
                reason: "FieldValueInvalid".to_owned(),
                message: error.rule.to_owned(),
            }],
        }
    }
}

/// How a patch changes an object; the payloads are the guest's JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchBody {
    /// A JSON merge patch (RFC 7386).
    Merge(String),
    /// A JSON patch (RFC 6902).
    Json(String),
    /// A strategic merge patch.
    Strategic(String),
    /// Server-side apply of `object` (apiVersion, kind, metadata.name and the fields the plugin
    /// owns); `force` takes fields other managers own instead of answering `Conflict`.
    Apply { object: String, force: bool },
}

/// How a delete treats the object's dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Orphan,
    Background,
    Foreground,
}

/// DeleteOptions: preconditions and propagation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// Delete only the object with this uid.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    /// `None`: the resource's default.
    pub propagation: Option<Propagation>,
}

/// What a successful delete did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deleted {
    /// The object is gone.
    Gone,
    /// The object has finalizers: it is marked for deletion; its JSON as it now is.
    Pending(String),
}

/// One plugin's writes. Cheap to share behind an `Arc`; calls may run concurrently.
pub struct WriteClient {
    client: kube::Client,
    plugin: Arc<str>,
    /// `kubewasm/VERSION plugin/NAME`, on every request made for the plugin.
    user_agent: HeaderValue,
    /// `Impersonate-User` on every request made for the plugin (`[impersonation]`).
    impersonate: Option<HeaderValue>,
    grants: WriteGrants,
    options: ClientOptions,
    /// The plugin's write rate limit; `None` for a client whose caller paces its writes (the
    /// Event recorder, which has a budget of its own).
    limiter: Option<Mutex<TokenBucket>>,
    resources: Arc<Resources>,
    observer: Arc<dyn WriteObserver>,
    /// Which refusals reach the log.
    refusals: RefusalLog,
    /// Writes leave this replica only while it leads (always, without leader election).
    leader: LeaderGate,
}

impl WriteClient {
    /// A client for the plugin named `plugin` (its field manager) writing through `client`.
    /// `options` should have passed [`ClientOptions::validate`].
    ///
    /// Build `client` with `kube::Config::default_retry` off: kube otherwise retries 429, 503
    /// and 504 inside one call (up to 15 times) until the call limit, where the guest should
    /// see `TooManyRequests` at once and back off through its workqueue.
    pub fn new(
        client: kube::Client,
        plugin: Arc<str>,
        grants: WriteGrants,
        options: ClientOptions,
        resources: Arc<Resources>,
        observer: Arc<dyn WriteObserver>,
    ) -> Self {
        let limiter = Some(Mutex::new(TokenBucket::new(options.qps, options.burst)));
        WriteClient {
            client,
            user_agent: plugin_user_agent(&plugin),
            impersonate: None,
            plugin,
            grants,
            options,
            limiter,
            resources,
            observer,
            refusals: RefusalLog::default(),
            leader: LeaderGate::always(),
        }
    }

    /// Refuses every write while `gate` says this replica does not lead: no write leaves a
    /// replica that has lost (or not yet won) its Lease.
    pub fn with_leader(mut self, gate: LeaderGate) -> Self {
        self.leader = gate;
        self
    }

    /// Sends every request as `account` (`Impersonate-User`), so the API server authorizes
    /// it by the plugin's own RBAC rather than the host's.
    pub fn impersonating(mut self, account: Option<&PluginAccount>) -> Self {
        self.impersonate = account.map(PluginAccount::header);
        self
    }

    /// Without the client-side write rate limit: for a caller that paces its own writes.
    pub(crate) fn unmetered(mut self) -> Self {
        self.limiter = None;
        self
    }

    /// The plugin's name, which is also its field manager.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Whether the plugin may make `verb` on `resource` (nothing is sent or counted).
    pub fn may(&self, resource: &Gvk, verb: WriteVerb) -> bool {
        self.grants.allows(resource, verb)
    }

    /// Creates `object` (JSON); its apiVersion and kind name the resource, metadata.namespace
    /// where it goes. Answers the created object.
    pub async fn create(&self, object: &str) -> Result<String, WriteError> {
        let verb = WriteVerb::Create;
        let parsed = ParsedObject::parse(object).map_err(|e| self.invalid(verb, e))?;
        let pp = self.post_params();
        let object = (
            parsed.namespace.as_ref().map(Namespace::as_str),
            parsed.name.as_ref().map_or("", ObjectName::as_str),
        );
        self.call(verb, &parsed.kind, object, |r| {
            let ns = parsed.namespace_for(r)?;
            Ok(request(r, ns).create(&pp, parsed.body.clone())?)
        })
        .await
    }

    /// Replaces the object (PUT); metadata.resourceVersion is required, as the precondition.
    pub async fn update(&self, object: &str) -> Result<String, WriteError> {
        self.replace(WriteVerb::Update, object).await
    }

    /// Replaces the object's status subresource, with the same precondition as `update`.
    pub async fn update_status(&self, object: &str) -> Result<String, WriteError> {
        self.replace(WriteVerb::UpdateStatus, object).await
    }

    /// Patches the object. Answers the patched object.
    pub async fn patch(&self, target: &ObjectRef, patch: &PatchBody) -> Result<String, WriteError> {
        self.patch_part(WriteVerb::Patch, target, patch).await
    }

    /// Patches the object's status subresource.
    pub async fn patch_status(
        &self,
        target: &ObjectRef,
        patch: &PatchBody,
    ) -> Result<String, WriteError> {
        self.patch_part(WriteVerb::PatchStatus, target, patch).await
    }

    /// Deletes the object.
    pub async fn delete(
        &self,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<Deleted, WriteError> {
        let preconditions =
            (options.uid.is_some() || options.resource_version.is_some()).then(|| Preconditions {
                uid: options.uid.clone(),
                resource_version: options.resource_version.clone(),
            });
        let dp = DeleteParams {
            preconditions,
            propagation_policy: options.propagation.map(|p| match p {
                Propagation::Orphan => PropagationPolicy::Orphan,
                Propagation::Background => PropagationPolicy::Background,
                Propagation::Foreground => PropagationPolicy::Foreground,
            }),
            ..DeleteParams::default()
        };
        let answer = self
            .call(WriteVerb::Delete, &target.kind, target.shard_key(), |r| {
                let ns = namespace_of(r, target.namespace.as_ref())?;
                Ok(request(r, ns).delete(&path_segment(target.name.as_str()), &dp)?)
            })
            .await?;
        let value: Value = serde_json::from_str(&answer).unwrap_or(Value::Null);
        let pending = value.get("kind").and_then(Value::as_str) != Some("Status")
            && value
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty());
        Ok(if pending {
            Deleted::Pending(answer)
        } else {
            Deleted::Gone
        })
    }

    async fn replace(&self, verb: WriteVerb, object: &str) -> Result<String, WriteError> {
        let parsed = ParsedObject::parse(object).map_err(|e| self.invalid(verb, e))?;
        let name = parsed.name.clone().ok_or_else(|| {
            self.invalid(
                verb,
                WriteError::invalid(format!("{verb}: the object has no metadata.name")),
            )
        })?;
        if parsed.resource_version.is_none() {
            return Err(self.invalid(
                verb,
                WriteError::invalid(format!(
                    "{verb}: metadata.resourceVersion is required (the version read, as the \
                     precondition); use patch to write without one"
                )),
            ));
        }
        let pp = self.post_params();
        let object = (
            parsed.namespace.as_ref().map(Namespace::as_str),
            name.as_str(),
        );
        self.call(verb, &parsed.kind, object, |r| {
            let ns = parsed.namespace_for(r)?;
            let req = request(r, ns);
            let name = path_segment(name.as_str());
            Ok(if verb == WriteVerb::UpdateStatus {
                req.replace_subresource("status", &name, &pp, parsed.body.clone())?
            } else {
                req.replace(&name, &pp, parsed.body.clone())?
            })
        })
        .await
    }

    async fn patch_part(
        &self,
        verb: WriteVerb,
        target: &ObjectRef,
        patch: &PatchBody,
    ) -> Result<String, WriteError> {
        let json = |text: &str| {
            serde_json::from_str::<Value>(text).map_err(|e| {
                self.invalid(
                    verb,
                    WriteError::invalid(format!("{verb}: the patch is not JSON: {e}")),
                )
            })
        };
        let mut params = PatchParams {
            field_manager: Some(self.plugin.to_string()),
            ..PatchParams::default()
        };
        let body = match patch {
            PatchBody::Merge(text) => Patch::Merge(json(text)?),
            PatchBody::Strategic(text) => Patch::Strategic(json(text)?),
            PatchBody::Json(text) => Patch::Json(
                serde_json::from_str::<json_patch::Patch>(text).map_err(|e| {
                    self.invalid(
                        verb,
                        WriteError::invalid(format!(
                            "{verb}: not a JSON patch (a list of RFC 6902 operations): {e}"
                        )),
                    )
                })?,
            ),
            PatchBody::Apply { object, force } => {
                params.force = *force;
                Patch::Apply(json(object)?)
            }
        };
        self.call(verb, &target.kind, target.shard_key(), |r| {
            let ns = namespace_of(r, target.namespace.as_ref())?;
            let req = request(r, ns);
            let name = path_segment(target.name.as_str());
            Ok(if verb == WriteVerb::PatchStatus {
                req.patch_subresource("status", &name, &params, &body)?
            } else {
                req.patch(&name, &params, &body)?
            })
        })
        .await
    }

    /// Refuses a write whose input the host will not send (a guest string that fails the API
    /// server's rules, an object or patch that is not JSON): counted as a call with code
    /// `invalid` and kind [`OTHER_KIND`] and as an `invalid` refusal, logged at most once a
    /// second per plugin. Answers `error`, for the guest.
    pub fn invalid(&self, verb: WriteVerb, error: impl Into<WriteError>) -> WriteError {
        let error = error.into();
        self.observer
            .write_call(&self.plugin, verb, OTHER_KIND, Refusal::Invalid.as_str());
        self.observer.refused(&self.plugin, Refusal::Invalid);
        if let Some(unlogged) = self.refusals.admit(Refusal::Invalid, Instant::now()) {
            let error = error.to_string();
            tracing::warn!(plugin = %self.plugin, %verb, error = %Escaped(&error), unlogged, "write refused: invalid");
        }
        error
    }

    /// Refuses a call about `gvk` that the plugin's read grants do not cover (an Event about
    /// an object it may not read): counted as a call with code `not-granted` and as a
    /// `not-granted` refusal, logged at most once a second per plugin. Answers the refusal,
    /// saying `message`, for the guest.
    pub(crate) fn not_readable(&self, verb: WriteVerb, gvk: &Gvk, message: String) -> WriteError {
        self.observer
            .write_call(&self.plugin, verb, OTHER_KIND, Refusal::NotGranted.as_str());
        self.refused(Refusal::NotGranted, verb, gvk);
        WriteError::refused(Refusal::NotGranted, message)
    }

    fn post_params(&self) -> PostParams {
        PostParams {
            field_manager: Some(self.plugin.to_string()),
            ..PostParams::default()
        }
    }

    /// Leadership, grants, rate limit, wall-clock limit and metrics around one API call on
    /// `object` (namespace, name), which decides the shard.
    async fn call(
        &self,
        verb: WriteVerb,
        kind: &Kind,
        object: (Option<&str>, &str),
        build: impl FnOnce(&Resolved) -> Result<http::Request<Vec<u8>>, WriteError>,
    ) -> Result<String, WriteError> {
        let gvk = kind.gvk();
        let result = self.call_inner(verb, gvk, object, build).await;
        let (code, result) = match result {
            Ok(answer) => ("2xx".to_owned(), Ok(answer)),
            Err(error) => (error.code_label(), Err(error)),
        };
        let bounded = self.grants.names(gvk) || self.resources.knows(gvk);
        let label = if self.grants.allows(gvk, verb) && bounded {
            gvk.kind.as_str()
        } else {
            OTHER_KIND
        };
        self.observer.write_call(&self.plugin, verb, label, &code);
        match &result {
            Err(
                error @ (WriteError::Server { .. }
                | WriteError::Timeout(_)
                | WriteError::Forbidden(_)),
            ) => tracing::warn!(
                plugin = %self.plugin, %verb, resource = %describe(gvk),
                namespace = object.0.unwrap_or(""), name = object.1,
                error = %Escaped(&error.to_string()),
                "write failed"
            ),
            Err(error) => {
                tracing::debug!(plugin = %self.plugin, %verb, resource = %describe(gvk), error = %Escaped(&error.to_string()), "write failed")
            }
            Ok(_) => {}
        }
        result
    }

    /// Counts a refused write, and logs it unless this plugin's refusals of the kind were
    /// logged within the last second (a guest looping on a refused write cannot flood the log).
    fn refused(&self, refusal: Refusal, verb: WriteVerb, gvk: &Gvk) {
        self.observer.refused(&self.plugin, refusal);
        let Some(unlogged) = self.refusals.admit(refusal, Instant::now()) else {
            return;
        };
        let resource = describe(gvk);
        match refusal {
            Refusal::NotLeader => tracing::warn!(
                plugin = %self.plugin, %verb, %resource, lease = self.leader.lease(), unlogged,
                "write refused: this replica is not the leader"
            ),
            Refusal::NotGranted => tracing::warn!(
                plugin = %self.plugin, %verb, %resource, unlogged,
                "write refused: not granted"
            ),
            Refusal::RateLimited => tracing::warn!(
                plugin = %self.plugin, %verb, %resource, unlogged,
                qps = self.options.qps, burst = self.options.burst,
                "write refused: the plugin's write rate limit is exhausted"
            ),
            Refusal::Invalid => tracing::warn!(
                plugin = %self.plugin, %verb, %resource, unlogged,
                "write refused: invalid"
            ),
        }
    }

    /// Reports an event the plugin's Event recorder dropped.
    pub(crate) fn event_dropped(&self) {
        self.observer.event_dropped(&self.plugin);
    }

    async fn call_inner(
        &self,
        verb: WriteVerb,
        gvk: &Gvk,
        (namespace, name): (Option<&str>, &str),
        build: impl FnOnce(&Resolved) -> Result<http::Request<Vec<u8>>, WriteError>,
    ) -> Result<String, WriteError> {
        if !self.leader.leads(namespace, name) {
            let lease = self
                .leader
                .shard_lease(self.leader.shard_of(namespace, name));
            self.refused(Refusal::NotLeader, verb, gvk);
            return Err(WriteError::refused(
                Refusal::NotLeader,
                format!(
                    "this replica is not the leader of Lease {lease}: writes leave the leader \
                     only"
                ),
            ));
        }
        if !self.grants.allows(gvk, verb) {
            self.refused(Refusal::NotGranted, verb, gvk);
            return Err(WriteError::refused(
                Refusal::NotGranted,
                format!(
                    "plugin {} may not {verb} {}: add it to `writes` in `[plugins.{}]` of the \
                     config",
                    self.plugin,
                    describe(gvk),
                    self.plugin
                ),
            ));
        }
        if let Some(limiter) = &self.limiter {
            // The token is reserved (or the reservation cancelled) before anything awaits.
            let paced = {
                let mut bucket = limiter.lock();
                let wait = bucket.reserve(Instant::now());
                if wait <= MAX_PACE.min(self.options.call_timeout) {
                    Ok(wait)
                } else {
                    bucket.cancel();
                    Err(wait)
                }
            };
            if let Ok(wait) = paced
                && !wait.is_zero()
            {
                tokio::time::sleep(wait).await;
            }
            if let Err(wait) = paced {
                self.refused(Refusal::RateLimited, verb, gvk);
                return Err(WriteError::refused(
                    Refusal::RateLimited,
                    format!(
                        "the plugin's write rate limit is exhausted ({} writes/s, burst {}): \
                         next write possible in {wait:?}",
                        self.options.qps, self.options.burst
                    ),
                ));
            }
        }
        let limit = self.options.call_timeout;
        let sent = async {
            let resolved = self.resources.resolve(gvk).await?;
            let served = Gvk {
                group: resolved.resource.group.clone(),
                version: resolved.resource.version.clone(),
                kind: resolved.resource.kind.clone(),
            };
            if !self.grants.allows(&served, verb) {
                return Err(WriteError::NotGranted(format!(
                    "plugin {} may not {verb} {}, which discovery answered for {}",
                    self.plugin,
                    describe(&served),
                    describe(gvk)
                )));
            }
            let mut request = build(&resolved)?;
            request
                .headers_mut()
                .insert(USER_AGENT, self.user_agent.clone());
            if let Some(user) = &self.impersonate {
                request.headers_mut().insert(IMPERSONATE_USER, user.clone());
            }
            Ok::<_, WriteError>(self.client.request_text(request).await?)
        };
        tokio::time::timeout(limit, sent).await.unwrap_or_else(|_| {
            Err(WriteError::Timeout(format!(
                "{verb} {}: no answer within {limit:?}",
                describe(gvk)
            )))
        })
    }
}

/// The longest a write waits for its token: a write the limiter can send within this is paced
/// (as client-go's client-side limiter does, so a burst of writes a little above the rate goes
/// out instead of failing reconciles into growing backoff); a longer wait is refused at once
/// as `too-many-requests`, so no reconcile is held in the limiter.
const MAX_PACE: Duration = Duration::from_secs(1);

impl From<kube::core::request::Error> for WriteError {
    fn from(error: kube::core::request::Error) -> Self {
        WriteError::invalid(format!("cannot build the request: {error}"))
    }
}

/// The request builder for the resource, in `namespace`: the collection's path, each segment
/// percent-encoded (object names are encoded as they are added).
fn request(resource: &Resolved, namespace: Option<&Namespace>) -> Request {
    let r = &resource.resource;
    let mut path = if r.group.is_empty() {
        format!("/api/{}", path_segment(&r.version))
    } else {
        format!(
            "/apis/{}/{}",
            path_segment(&r.group),
            path_segment(&r.version)
        )
    };
    if let Some(ns) = namespace {
        path.push_str("/namespaces/");
        path.push_str(&path_segment(ns.as_str()));
    }
    path.push('/');
    path.push_str(&path_segment(&r.plural));
    Request::new(path)
}

/// The namespace to address: required for namespaced resources, dropped for cluster-scoped.
fn namespace_of<'a>(
    resource: &Resolved,
    namespace: Option<&'a Namespace>,
) -> Result<Option<&'a Namespace>, WriteError> {
    match (resource.namespaced, namespace) {
        (true, Some(ns)) => Ok(Some(ns)),
        (true, None) => Err(WriteError::invalid(format!(
            "{} is namespaced: the namespace is required",
            resource.resource.kind
        ))),
        (false, _) => Ok(None),
    }
}

/// A guest's object for create and update: the resource, name and namespace it names, each
/// checked.
struct ParsedObject {
    kind: Kind,
    namespace: Option<Namespace>,
    name: Option<ObjectName>,
    resource_version: Option<String>,
    body: Vec<u8>,
}

impl ParsedObject {
    fn parse(object: &str) -> Result<Self, WriteError> {
        let value: Value = serde_json::from_str(object)
            .map_err(|e| WriteError::invalid(format!("the object is not JSON: {e}")))?;
        let text = |pointer: &str| {
            value
                .pointer(pointer)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let (Some(api_version), Some(kind)) = (text("/apiVersion"), text("/kind")) else {
            return Err(WriteError::invalid(
                "the object needs apiVersion and kind to name its resource",
            ));
        };
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group.to_owned(), version.to_owned()),
            None => (String::new(), api_version),
        };
        let gvk = Gvk {
            group,
            version,
            kind,
        };
        let name = text("/metadata/name")
            .map(|n| ObjectName::new(&gvk.group, &n))
            .transpose()?;
        Ok(ParsedObject {
            kind: Kind::new(&gvk)?,
            namespace: text("/metadata/namespace")
                .map(|ns| Namespace::new(&ns))
                .transpose()?,
            name,
            resource_version: text("/metadata/resourceVersion"),
            body: object.as_bytes().to_vec(),
        })
    }

    fn namespace_for(&self, resource: &Resolved) -> Result<Option<&Namespace>, WriteError> {
        namespace_of(resource, self.namespace.as_ref())
    }
}

#[cfg(test)]
pub(crate) mod tests;

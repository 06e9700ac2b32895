//! A plugin's declaration: its component instantiated, `init` called with its config string,
//! and what `init` declared checked against its policy (grants, declaration limits) and, for
//! contract 0.2, against the world the component targets. No cluster and no plugin host are
//! needed: `kubewasm check` and `kubewasm rbac` run only this, and loading starts with it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::access::{Access, NAMESPACE_INDEX};
use crate::contracts::v0_2::kubewasm::controller::types as wit;
use crate::contracts::v0_2::{PluginPre, World};
use crate::error::PluginError;
use crate::guest::calls::Outcome;
use crate::guest::instance::{Declaration, Instance, shown};
use crate::guest::log_gate::{LogGate, LogLimits, LogTap};
use crate::manager::policy::PluginPolicy;
use crate::model::declared::{Delivery, Gvk, IndexDecl, IndexSource, PluginInfo, Subscription};
use crate::model::grants::{DeclarationLimits, Limits, describe, same_type};
use crate::model::names::{
    InvalidName, Kind, Namespace, {self},
};
use crate::reconcile::keys::QueueRule;
use crate::reconcile::predicates::UpdateFilter;
use crate::wasm::component::{CompiledPlugin, Linked};
use crate::wasm::engine::PluginEngine;

/// What a declaration is checked with besides the plugin's policy.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Limits for a plugin whose policy sets none.
    pub limits: Limits,
    /// How much `init` may declare.
    pub declarations: DeclarationLimits,
    /// How much the throw-away instance may log.
    pub logs: LogLimits,
    /// Where the plugin's log lines are also kept (`kubewasm test`).
    pub log_tap: Option<LogTap>,
}

/// The contract a component was built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contract {
    /// `kubewasm:controller@0.1.0`, world `controller` (event handlers).
    V0_1,
    /// `kubewasm:controller@0.2.0`, or one of the worlds 0.2.1 adds.
    V0_2(World),
}

impl Contract {
    /// The WIT package and version, e.g. `kubewasm:controller@0.2.0`.
    pub fn package(self) -> &'static str {
        match self {
            Contract::V0_1 => "kubewasm:controller@0.1.0",
            Contract::V0_2(world) => world.package(),
        }
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Contract::V0_1 => f.write_str("kubewasm:controller@0.1.0, world controller"),
            Contract::V0_2(world) => {
                write!(f, "{}, world {}", world.package(), world.as_str())
            }
        }
    }
}

/// A component checked: the contract it was built for and what its `init` declared (for 0.2
/// in the host's model: subscriptions by type).
#[derive(Debug, Clone)]
pub struct Checked {
    pub contract: Contract,
    pub info: PluginInfo,
}

/// Compiles the component (through the engine's compile cache) and calls `init` in a
/// throw-away instance, checking the result against `policy`; nothing is registered and no
/// API server is asked. `source` names the plugin in errors.
pub async fn check(
    engine: &PluginEngine,
    source: &Path,
    bytes: Vec<u8>,
    policy: &PluginPolicy,
    options: &CheckOptions,
) -> Result<Checked, PluginError> {
    let compiled = engine.compile(source, bytes).await?;
    match &*compiled.pre {
        Linked::V0_1(_) => {
            let (_, info) = declare_v0_1(&compiled, policy, options).await?;
            Ok(Checked {
                contract: Contract::V0_1,
                info,
            })
        }
        Linked::V0_2(pre) => {
            let declared = declare_v0_2(&compiled, policy, options).await?;
            Ok(Checked {
                contract: Contract::V0_2(pre.world()),
                info: declared.info,
            })
        }
    }
}

/// Instantiates and initialises a 0.1 component under `policy`, and validates what `init`
/// declared: the instance (labelled with the plugin's name) and its declaration.
pub(crate) async fn declare_v0_1(
    compiled: &CompiledPlugin,
    policy: &PluginPolicy,
    options: &CheckOptions,
) -> Result<(Instance, PluginInfo), PluginError> {
    let limits = policy.limits.unwrap_or(options.limits);
    let file = compiled.file.clone();
    let mut instance = Instance::new(
        compiled,
        label_of(&file),
        limits,
        Arc::new(Access::empty(policy.grants.clone())),
        Arc::new(LogGate::tapped(options.logs, options.log_tap.clone())),
    )
    .await?;
    let Declaration::V0_1(info) = init_outcome(file.clone(), instance.init(&policy.config).await)?
    else {
        return Err(PluginError::Invalid {
            file,
            reason: "a 0.2 component cannot run as a 0.1 plugin".into(),
        });
    };
    validate(&file, &info, policy, &options.declarations)?;
    instance.log_gate().set_declared_name(&info.name);
    Ok((instance, info))
}

/// Instantiates a 0.2 component, calls `init` and checks what it declared against `policy`
/// and against the component's world: the instance (labelled with the plugin's name, its
/// imports not yet connected) and its declaration.
pub(crate) async fn declare_v0_2(
    compiled: &CompiledPlugin,
    policy: &PluginPolicy,
    options: &CheckOptions,
) -> Result<Declared, PluginError> {
    let pre = v0_2_pre(compiled)?;
    let file = compiled.file.clone();
    let limits = policy.limits.unwrap_or(options.limits);
    let mut instance = Instance::new(
        compiled,
        label_of(&file),
        limits,
        Arc::new(Access::empty(policy.grants.clone())),
        Arc::new(LogGate::tapped(options.logs, options.log_tap.clone())),
    )
    .await?;
    let Declaration::V0_2(crate::reconcile::predicates::Declaration {
        info: declared,
        filters,
    }) = init_outcome(file.clone(), instance.init(&policy.config).await)?
    else {
        return Err(PluginError::Invalid {
            file,
            reason: "a 0.1 component cannot run as a 0.2 plugin".into(),
        });
    };
    let invalid = |what: String| PluginError::InvalidDeclaration {
        file: file.clone(),
        plugin: label_of(&file).to_string(),
        what,
    };
    let world = pre.world();
    fits_world(world, &declared).map_err(invalid)?;
    let info = from_v0_2(&declared).map_err(invalid)?;
    validate(&file, &info, policy, &options.declarations)?;
    let rules = resolve_rules(&declared.subscriptions).map_err(invalid)?;
    let events = declared.subscriptions.iter().map(|s| s.events).collect();
    instance.log_gate().set_declared_name(&info.name);
    Ok(Declared {
        info,
        rules,
        filters,
        events,
        world,
        instance,
    })
}

fn gvk(g: &wit::Gvk) -> Gvk {
    Gvk {
        group: g.group.clone(),
        version: g.version.clone(),
        kind: g.kind.clone(),
    }
}

/// The 0.2 declaration in the host's model, as the checks and the wiring shared with 0.1 read
/// it: subscriptions by type, indexes on the type of their subscription handle. A subscription with events or queue
/// rules is `Delivery::Events` (so that status and `kubewasm check` do not call it cache-only),
/// but the 0.2 wiring registers its own handlers: events reach the guest through the version's
/// inbox and queue rules feed the workqueue.
fn from_v0_2(info: &wit::PluginInfo) -> Result<PluginInfo, String> {
    let subscriptions: Vec<Subscription> = info
        .subscriptions
        .iter()
        .map(|s| Subscription {
            gvk: gvk(&s.gvk),
            namespace: s.namespace.clone(),
            label_selector: s.label_selector.clone(),
            field_selector: s.field_selector.clone(),
            resync_seconds: s.resync_seconds,
            delivery: if s.events || !s.queue.is_empty() {
                Delivery::Events
            } else {
                Delivery::CacheOnly
            },
        })
        .collect();
    let indexes = info
        .indexes
        .iter()
        .map(|d| {
            let on = usize::try_from(d.subscription)
                .ok()
                .and_then(|h| subscriptions.get(h))
                .ok_or_else(|| {
                    format!(
                        "index {}: no subscription has handle {}",
                        shown(&d.name),
                        d.subscription
                    )
                })?;
            Ok(IndexDecl {
                name: d.name.clone(),
                gvk: on.gvk.clone(),
                source: match &d.source {
                    wit::IndexSource::Label(k) => IndexSource::Label(k.clone()),
                    wit::IndexSource::Annotation(k) => IndexSource::Annotation(k.clone()),
                    wit::IndexSource::Field(p) => IndexSource::Field(p.clone()),
                    wit::IndexSource::OwnerUid => IndexSource::OwnerUid,
                },
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(PluginInfo {
        name: info.name.clone(),
        subscriptions,
        indexes,
    })
}

/// A 0.2 plugin checked: its declaration in the host's model (for the checks and the wiring) and the
/// queue rules of each subscription.
pub(crate) struct Declared {
    pub(crate) info: PluginInfo,
    pub(crate) rules: Vec<Vec<QueueRule>>,
    /// The updates each rule queues on, as `rules` (0.2.2's predicates).
    pub(crate) filters: Vec<Vec<UpdateFilter>>,
    /// Whether each subscription asked for the event handlers.
    pub(crate) events: Vec<bool>,
    pub(crate) world: World,
    /// The instance whose `init` declared it.
    pub(crate) instance: Instance,
}

/// Checks that what `init` declared fits the component's world: events only for a component
/// with handlers, queue rules only for one with `reconcile`.
fn fits_world(world: World, declared: &wit::PluginInfo) -> Result<(), String> {
    for (handle, sub) in declared.subscriptions.iter().enumerate() {
        if sub.events && !world.has_handlers() {
            return Err(format!(
                "subscription {handle} ({}) asks for events, but the component targets the world \
                 `reconciler`, which has no event handlers",
                shown(&describe(&gvk(&sub.gvk)))
            ));
        }
        if !sub.queue.is_empty() && !world.has_reconcile() {
            return Err(format!(
                "subscription {handle} ({}) has queue rules, but the component targets the world \
                 `{}`, which has no `reconcile`",
                shown(&describe(&gvk(&sub.gvk))),
                world.as_str()
            ));
        }
    }
    Ok(())
}

/// The 0.2 linking of `compiled`; an error if it is a 0.1 component.
pub(crate) fn v0_2_pre(compiled: &CompiledPlugin) -> Result<&PluginPre, PluginError> {
    match &*compiled.pre {
        Linked::V0_2(pre) => Ok(pre),
        Linked::V0_1(_) => Err(PluginError::Invalid {
            file: compiled.file.clone(),
            reason: "a 0.1 component cannot run as a 0.2 plugin".into(),
        }),
    }
}

/// `init` declared something invalid: named by the plugin's key (its file), since the name it
/// declared may be what is wrong.
pub(crate) fn invalid(file: &Path, what: String) -> PluginError {
    PluginError::InvalidDeclaration {
        file: file.to_owned(),
        plugin: label_of(file).to_string(),
        what,
    }
}

/// Checks `init`'s declarations: within `limits`, every subscription valid ([`checked_scope`]),
/// granted and unique, every index on a subscribed resource with a fresh name.
pub(crate) fn validate(
    file: &Path,
    info: &PluginInfo,
    policy: &PluginPolicy,
    limits: &DeclarationLimits,
) -> Result<(), PluginError> {
    let too_many = |what: &str, n: usize, max: usize, key: &str| PluginError::OverLimit {
        file: file.to_owned(),
        what: format!(
            "{n} {what}, more than the limit of {max} (`{key}` in the config's [limits])"
        ),
    };
    if info.name.len() > limits.max_name_bytes {
        return Err(too_many(
            "bytes of plugin name",
            info.name.len(),
            limits.max_name_bytes,
            "max-name-bytes",
        ));
    }
    if info.subscriptions.len() > limits.max_subscriptions {
        return Err(too_many(
            "subscriptions",
            info.subscriptions.len(),
            limits.max_subscriptions,
            "max-subscriptions",
        ));
    }
    if info.indexes.len() > limits.max_indexes {
        return Err(too_many(
            "indexes",
            info.indexes.len(),
            limits.max_indexes,
            "max-indexes",
        ));
    }
    let fields = info
        .indexes
        .iter()
        .filter(|d| matches!(d.source, IndexSource::Field(_)))
        .count();
    if fields > limits.max_field_indexes {
        return Err(too_many(
            "field-path indexes",
            fields,
            limits.max_field_indexes,
            "max-field-indexes",
        ));
    }
    if !policy.writes.is_empty()
        && let Some(Err(reason)) = &policy.impersonate
    {
        return Err(PluginError::NoAccount {
            file: file.to_owned(),
            reason: reason.clone(),
        });
    }
    if info.name.trim().is_empty() {
        return Err(invalid(file, "name: it is empty".into()));
    }
    if info.name.chars().any(crate::guest::escape::needs_escape) {
        return Err(invalid(
            file,
            "name: it holds control characters, line separators or bidirectional overrides \
             (it is written into every log line of the plugin)"
                .into(),
        ));
    }
    for (i, sub) in info.subscriptions.iter().enumerate() {
        checked_scope(sub).map_err(|e| invalid(file, format!("subscription {i}: {e}")))?;
        if !policy.grants.allows(&sub.gvk) {
            return Err(PluginError::NotGranted {
                file: file.to_owned(),
                plugin: label_of(file).to_string(),
                what: describe(&sub.gvk),
            });
        }
        if info.subscriptions[..i]
            .iter()
            .any(|s| same_type(&s.gvk, &sub.gvk))
        {
            return Err(invalid(
                file,
                format!("subscription: {} twice", describe(&sub.gvk)),
            ));
        }
    }
    for (i, decl) in info.indexes.iter().enumerate() {
        checked_index(decl, limits).map_err(|what| invalid(file, format!("index {i}: {what}")))?;
        if !info
            .subscriptions
            .iter()
            .any(|s| same_type(&s.gvk, &decl.gvk))
        {
            return Err(invalid(
                file,
                format!(
                    "index {}: {} is not subscribed",
                    decl.name,
                    describe(&decl.gvk)
                ),
            ));
        }
        let clash = decl.name == NAMESPACE_INDEX
            || info.indexes[..i]
                .iter()
                .any(|d| d.name == decl.name && same_type(&d.gvk, &decl.gvk));
        if clash {
            return Err(invalid(
                file,
                format!("index {}: the name is already taken", decl.name),
            ));
        }
    }
    Ok(())
}

/// An index's name and source checked within `limits`: the name short, of letters, digits, `-`,
/// `_`, `.` and `:`; a label or annotation key a qualified name; a field path short, shallow and
/// made of dot-separated segments of letters, digits, `-`, `_`, `$`, `@` and `/` (no empty
/// segment). A refusal quotes the string cut short and escaped.
pub(crate) fn checked_index(decl: &IndexDecl, limits: &DeclarationLimits) -> Result<(), String> {
    // The string quoted (escaped) and cut to 80 characters: a refusal repeats no 290 KB path.
    let shown = |s: &str| {
        let cut: String = s.chars().take(80).collect();
        if cut.len() < s.len() {
            format!("{cut:?}...")
        } else {
            format!("{cut:?}")
        }
    };
    let name = decl.name.as_bytes();
    let name_ok = !name.is_empty()
        && name
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b':'));
    if name.len() > limits.max_index_name_bytes {
        return Err(format!(
            "name {}: {} bytes, more than the limit of {} (`max-index-name-bytes` in the \
             config's [limits])",
            shown(&decl.name),
            name.len(),
            limits.max_index_name_bytes
        ));
    }
    if !name_ok {
        return Err(format!(
            "name {}: must be letters, digits, '-', '_', '.' and ':'",
            shown(&decl.name)
        ));
    }
    match &decl.source {
        IndexSource::Label(key) => names::qualified_name("label key", key)
            .map(drop)
            .map_err(|e| e.to_string()),
        IndexSource::Annotation(key) => names::qualified_name("annotation key", key)
            .map(drop)
            .map_err(|e| e.to_string()),
        IndexSource::Field(path) => {
            if path.len() > limits.max_field_path_bytes {
                return Err(format!(
                    "field path {}: {} bytes, more than the limit of {} (`max-field-path-bytes` \
                     in the config's [limits])",
                    shown(path),
                    path.len(),
                    limits.max_field_path_bytes
                ));
            }
            let depth = path.split('.').count();
            if depth > limits.max_field_path_depth {
                return Err(format!(
                    "field path {}: {depth} segments, more than the limit of {} \
                     (`max-field-path-depth` in the config's [limits])",
                    shown(path),
                    limits.max_field_path_depth
                ));
            }
            let segment_ok = |s: &str| {
                !s.is_empty()
                    && s.bytes().all(|c| {
                        c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'$' | b'@' | b'/')
                    })
            };
            if path.split('.').all(segment_ok) {
                Ok(())
            } else {
                Err(format!(
                    "field path {}: must be dot-separated segments of letters, digits, '-', '_', \
                     '$', '@' and '/' (`spec.nodeName`)",
                    shown(path)
                ))
            }
        }
        IndexSource::OwnerUid => Ok(()),
    }
}

/// A subscription's resource type, namespace and selectors checked by the API server's rules,
/// as `run`, `check` and `rbac` all check them: its namespace, checked.
pub(crate) fn checked_scope(sub: &Subscription) -> Result<Option<Namespace>, InvalidName> {
    Kind::new(&sub.gvk)?;
    if let Some(selector) = &sub.label_selector {
        names::label_selector(selector)?;
    }
    if let Some(selector) = &sub.field_selector {
        names::field_selector(selector)?;
    }
    sub.namespace.as_deref().map(Namespace::new).transpose()
}

/// A plugin's label in logs and messages: its key, the file name without `.wasm` (or the
/// whole path where that makes no key, for messages about such a file).
pub(crate) fn label_of(file: &Path) -> Arc<str> {
    file.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.display().to_string())
        .into()
}

/// What a call of `init` came to, as the load's result: a guest error or a fault refuses it.
pub(crate) fn init_outcome<T>(file: PathBuf, outcome: Outcome<T>) -> Result<T, PluginError> {
    match outcome {
        Outcome::Ok(info) => Ok(info),
        Outcome::GuestError(reason) => Err(PluginError::InitFailed {
            file,
            reason: shown(&reason).into_owned(),
        }),
        Outcome::Failed(kind, reason) => Err(PluginError::InitTrapped {
            file,
            reason: format!("{}: {}", kind.as_str(), shown(&reason)),
        }),
    }
}

/// The most queue rules one subscription may declare. Rules that differ are `own-key` and one
/// `controlling-owner` per subscription (at most 64 of those by default), and every rule is
/// applied to every event of the subscription on the informer's dispatch path: a declaration
/// of a million rules would have made each event queue a million keys.
pub const MAX_QUEUE_RULES: usize = 64;

/// The queue rules of each subscription of an `init` result, in order, with
/// `controlling-owner(handle)` resolved to the type of subscription `handle`. An unknown handle
/// or more than [`MAX_QUEUE_RULES`] rules on one subscription is an error naming it (the plugin
/// fails to load).
pub(crate) fn resolve_rules(
    subscriptions: &[wit::Subscription],
) -> Result<Vec<Vec<QueueRule>>, String> {
    subscriptions
        .iter()
        .enumerate()
        .map(|(i, subscription)| {
            if subscription.queue.len() > MAX_QUEUE_RULES {
                return Err(format!(
                    "subscription {i} declares {} queue rules, more than the {MAX_QUEUE_RULES} \
                     a subscription may have",
                    subscription.queue.len()
                ));
            }
            subscription
                .queue
                .iter()
                .map(|rule| match rule {
                    wit::QueueRule::OwnKey => Ok(QueueRule::OwnKey),
                    wit::QueueRule::ControllingOwner(handle) => {
                        let owner = usize::try_from(*handle)
                            .ok()
                            .and_then(|h| subscriptions.get(h))
                            .ok_or_else(|| {
                                format!(
                                    "subscription {i} queues the owner of subscription {handle}, \
                                     which does not exist ({} subscriptions)",
                                    subscriptions.len()
                                )
                            })?;
                        Ok(QueueRule::ControllingOwner {
                            group: owner.gvk.group.clone(),
                            kind: owner.gvk.kind.clone(),
                        })
                    }
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::grants::{Grants, ResourcePattern};

    fn gvk(kind: &str) -> Gvk {
        Gvk {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    fn sub(kind: &str) -> Subscription {
        Subscription {
            gvk: gvk(kind),
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync_seconds: None,
            delivery: Delivery::Events,
        }
    }

    fn info(subs: Vec<Subscription>, indexes: Vec<IndexDecl>) -> PluginInfo {
        PluginInfo {
            name: "p".into(),
            subscriptions: subs,
            indexes,
        }
    }

    fn check(info: &PluginInfo, grants: Grants) -> Result<(), PluginError> {
        let policy = PluginPolicy {
            grants,
            ..PluginPolicy::default()
        };
        validate(
            Path::new("p.wasm"),
            info,
            &policy,
            &DeclarationLimits::default(),
        )
    }

    #[test]
    fn ungranted_subscription_is_refused_naming_file_and_resource() {
        let err = check(&info(vec![sub("Secret")], vec![]), Grants::default()).unwrap_err();
        assert!(matches!(err, PluginError::NotGranted { .. }));
        let msg = err.to_string();
        assert!(msg.contains("p.wasm") && msg.contains("v1/Secret"), "{msg}");
        let grants = Grants::only(vec![ResourcePattern::new("", "Secret")]);
        assert!(check(&info(vec![sub("Secret")], vec![]), grants).is_ok());
    }

    /// A plugin that may write, whose file name makes no service account name, is refused
    /// (its writes would have no account to go as); one that writes nothing still loads.
    #[test]
    fn a_writer_without_a_valid_account_is_refused() {
        use crate::client::impersonation::PluginAccount;
        use crate::client::{WriteGrant, WriteGrants};
        use crate::model::names::Namespace;
        let bad = PluginAccount::for_plugin(&Namespace::new("ops").unwrap(), "Bad_Name");
        let writes = WriteGrants::only(vec![
            WriteGrant::new(ResourcePattern::new("", "ConfigMap"), None).unwrap(),
        ]);
        let policy = |writes: WriteGrants| PluginPolicy {
            grants: Grants::only(vec![ResourcePattern::new("*", "*")]),
            writes,
            impersonate: Some(bad.clone()),
            ..PluginPolicy::default()
        };
        let info = info(vec![sub("ConfigMap")], vec![]);
        let limits = DeclarationLimits::default();
        let err =
            validate(Path::new("p.wasm"), &info, &policy(writes.clone()), &limits).unwrap_err();
        assert!(matches!(err, PluginError::NoAccount { .. }), "{err}");
        assert!(err.to_string().contains("p.wasm"), "{err}");
        validate(
            Path::new("p.wasm"),
            &info,
            &policy(WriteGrants::none()),
            &limits,
        )
        .expect("a plugin that writes nothing sends nothing as anyone");
        let good = PluginPolicy {
            impersonate: Some(PluginAccount::for_plugin(
                &Namespace::new("ops").unwrap(),
                "good",
            )),
            ..policy(writes)
        };
        validate(Path::new("good.wasm"), &info, &good, &limits).expect("a valid account");
    }

    #[test]
    fn duplicate_subscription_is_refused() {
        let err = check(
            &info(vec![sub("Pod"), sub("Pod")], vec![]),
            Grants::default(),
        );
        assert!(matches!(err, Err(PluginError::InvalidDeclaration { .. })));
    }

    #[test]
    fn index_on_an_unsubscribed_resource_is_refused() {
        let decl = IndexDecl {
            name: "by-node".into(),
            gvk: gvk("Pod"),
            source: IndexSource::Field("spec.nodeName".into()),
        };
        let err = check(
            &info(vec![sub("ConfigMap")], vec![decl.clone()]),
            Grants::default(),
        );
        assert!(matches!(err, Err(PluginError::InvalidDeclaration { .. })));
        assert!(check(&info(vec![sub("Pod")], vec![decl]), Grants::default()).is_ok());
    }

    #[test]
    fn declarations_over_the_limits_are_refused_with_the_limit_and_its_key() {
        let limits = DeclarationLimits {
            max_name_bytes: 10,
            max_subscriptions: 2,
            max_indexes: 1,
            ..DeclarationLimits::default()
        };
        let policy = PluginPolicy::default();
        let run = |info: &PluginInfo| validate(Path::new("p.wasm"), info, &policy, &limits);
        let mut long = info(vec![sub("Pod")], vec![]);
        long.name = "n".repeat(10 << 20);
        let msg = run(&long).unwrap_err().to_string();
        assert!(
            msg.starts_with("p.wasm: ")
                && msg.contains("10485760 bytes of plugin name")
                && msg.contains("max-name-bytes"),
            "{}",
            &msg[..msg.len().min(300)]
        );
        assert!(msg.len() < 300, "the refusal does not repeat the name");
        let subs = info(vec![sub("Pod"), sub("ConfigMap"), sub("Secret")], vec![]);
        let msg = run(&subs).unwrap_err().to_string();
        assert!(
            msg.contains("3 subscriptions") && msg.contains("limit of 2"),
            "{msg}"
        );
        let decl = |n: usize| IndexDecl {
            name: format!("i{n}"),
            gvk: gvk("Pod"),
            source: IndexSource::Label(format!("l{n}")),
        };
        let many = info(vec![sub("Pod")], (0..100_000).map(decl).collect());
        let msg = run(&many).unwrap_err().to_string();
        assert!(
            msg.contains("100000 indexes") && msg.contains("max-indexes"),
            "{msg}"
        );
        assert!(run(&info(vec![sub("Pod")], vec![decl(0)])).is_ok());
        let mut control = info(vec![sub("Pod")], vec![]);
        control.name = "a\nb".into();
        assert!(run(&control).is_err());
    }

    fn index(name: &str, source: IndexSource) -> IndexDecl {
        IndexDecl {
            name: name.into(),
            gvk: gvk("ConfigMap"),
            source,
        }
    }

    /// The declaration of the issue: 128 field paths of ~290 KB each, with read grants only.
    #[test]
    fn huge_field_paths_are_refused_short_of_the_informer() {
        let path = format!("data.{}", "k.".repeat(145_000)) + "k";
        let huge: Vec<IndexDecl> = (0..128)
            .map(|i| index(&format!("i{i}"), IndexSource::Field(path.clone())))
            .collect();
        let err = check(&info(vec![sub("ConfigMap")], huge), Grants::default()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("128 field-path indexes") && msg.contains("max-field-indexes"),
            "{msg}"
        );
        let one = vec![index("i", IndexSource::Field(path.clone()))];
        let msg = check(&info(vec![sub("ConfigMap")], one), Grants::default())
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("index 0: field path") && msg.contains("max-field-path-bytes"),
            "{msg}"
        );
        assert!(msg.len() < 500, "the refusal does not repeat the path");
    }

    #[test]
    fn index_sources_are_checked_by_their_syntax_and_limits() {
        let ok = [
            index("by-app", IndexSource::Label("app".into())),
            index(
                "by_team.v1:x",
                IndexSource::Annotation("example.com/team".into()),
            ),
            index("by-node", IndexSource::Field("spec.nodeName".into())),
            index(
                "by-image",
                IndexSource::Field("spec.containers.image".into()),
            ),
            index("by-owner", IndexSource::OwnerUid),
        ];
        for decl in &ok {
            checked_index(decl, &DeclarationLimits::default()).expect("a sane index");
        }
        let deep = (0..17).map(|_| "a").collect::<Vec<_>>().join(".");
        let bad = [
            index("", IndexSource::OwnerUid),
            index("a b", IndexSource::OwnerUid),
            index("a\nb", IndexSource::OwnerUid),
            index(&"n".repeat(64), IndexSource::OwnerUid),
            index("l", IndexSource::Label("".into())),
            index("l", IndexSource::Label("a/b/c".into())),
            index("l", IndexSource::Label("app\n".into())),
            index("l", IndexSource::Label("x".repeat(64))),
            index(
                "a",
                IndexSource::Annotation(format!("{}/x", "p".repeat(254))),
            ),
            index("f", IndexSource::Field("".into())),
            index("f", IndexSource::Field("spec..x".into())),
            index("f", IndexSource::Field("spec.x.".into())),
            index("f", IndexSource::Field("spec.x y".into())),
            index("f", IndexSource::Field("spec.\u{1b}[2J".into())),
            index("f", IndexSource::Field(deep)),
            index("f", IndexSource::Field("a".repeat(257))),
        ];
        for decl in &bad {
            let err = checked_index(decl, &DeclarationLimits::default()).unwrap_err();
            assert!(!err.contains('\n') && !err.contains('\u{1b}'), "{err}");
        }
        let err = check(
            &info(vec![sub("ConfigMap")], vec![bad[2].clone()]),
            Grants::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, PluginError::InvalidDeclaration { .. }),
            "{err}"
        );
    }

    #[test]
    fn control_characters_in_a_name_are_refused_and_never_echoed() {
        for name in ["p\nWARN forged", "p\u{2028}WARN forged", "p\u{202e}forged"] {
            let mut named = info(vec![sub("Pod")], vec![]);
            named.name = name.into();
            let msg = check(&named, Grants::default()).unwrap_err().to_string();
            // The refusal names the plugin by its file, not by the name it declared.
            assert!(
                msg.contains("control characters, line separators or bidirectional overrides")
                    && !msg.contains("forged")
                    && !msg.contains('\n'),
                "{msg}"
            );
        }
    }

    #[test]
    fn redeclaring_the_namespace_index_is_refused() {
        let decl = IndexDecl {
            name: "namespace".into(),
            gvk: gvk("Pod"),
            source: IndexSource::Label("ns".into()),
        };
        let err = check(&info(vec![sub("Pod")], vec![decl]), Grants::default());
        assert!(matches!(err, Err(PluginError::InvalidDeclaration { .. })));
    }

    fn subscription(group: &str, kind: &str, queue: Vec<wit::QueueRule>) -> wit::Subscription {
        wit::Subscription {
            gvk: wit::Gvk {
                group: group.into(),
                version: "v1".into(),
                kind: kind.into(),
            },
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync_seconds: None,
            events: false,
            queue,
        }
    }

    #[test]
    fn owner_handles_resolve_to_the_owner_subscriptions_type() {
        let subscriptions = [
            subscription(
                "samplecontroller.k8s.io",
                "Foo",
                vec![wit::QueueRule::OwnKey],
            ),
            subscription(
                "apps",
                "Deployment",
                vec![wit::QueueRule::ControllingOwner(0)],
            ),
        ];
        let rules = resolve_rules(&subscriptions).unwrap();
        let foo_owner = QueueRule::ControllingOwner {
            group: "samplecontroller.k8s.io".into(),
            kind: "Foo".into(),
        };
        assert_eq!(rules, [vec![QueueRule::OwnKey], vec![foo_owner]]);
        let dangling = [subscription(
            "apps",
            "Deployment",
            vec![wit::QueueRule::ControllingOwner(3)],
        )];
        let error = resolve_rules(&dangling).unwrap_err();
        assert!(error.contains("subscription 3"), "{error}");
    }

    #[test]
    fn a_subscription_with_more_queue_rules_than_the_limit_is_refused() {
        let at_limit = [subscription(
            "",
            "ConfigMap",
            vec![wit::QueueRule::OwnKey; MAX_QUEUE_RULES],
        )];
        assert_eq!(resolve_rules(&at_limit).unwrap()[0].len(), MAX_QUEUE_RULES);
        let over = [
            subscription("", "ConfigMap", vec![wit::QueueRule::OwnKey]),
            subscription(
                "",
                "Secret",
                vec![wit::QueueRule::ControllingOwner(0); MAX_QUEUE_RULES + 1],
            ),
        ];
        let error = resolve_rules(&over).unwrap_err();
        assert!(
            error.contains("subscription 1 declares 65 queue rules"),
            "{error}"
        );
    }
}

//! Write kubewasm plugins that act, in Rust: the SDK of contract `kubewasm:controller@0.2`.
//!
//! A plugin is a type implementing [`Controller`]: `init` returns its state and a
//! [`PluginInfo`] (name, subscriptions with what each queues, indexes); the host then calls
//! [`Controller::reconcile`] with keys from the plugin's workqueue, and the event handlers for
//! subscriptions that ask for events. Writes go through the typed [`Api`], events through
//! [`record_event`], extra keys through [`queue`]. Errors are Rust enums ([`ApiError`]); a
//! reconcile answers an [`Action`] or an [`Error`] (retried with backoff).
//!
//! ```no_run
//! use kubewasm_guest_v0_2::k8s_openapi::api::core::v1::ConfigMap;
//! use kubewasm_guest_v0_2::{Action, Controller, Error, Key, PluginInfo, QueueRule, subscribe};
//!
//! struct Stamp;
//!
//! impl Controller for Stamp {
//!     fn init(_config: &str) -> Result<(Self, PluginInfo), Error> {
//!         let info = PluginInfo {
//!             name: "stamp".into(),
//!             subscriptions: vec![subscribe::<ConfigMap>(false, vec![QueueRule::OwnKey])],
//!             indexes: Vec::new(),
//!         };
//!         Ok((Stamp, info))
//!     }
//!
//!     fn reconcile(&mut self, key: Key) -> Result<Action, Error> {
//!         let api = kubewasm_guest_v0_2::Api::<ConfigMap>::namespaced(
//!             key.namespace.as_deref().unwrap_or("default"),
//!         );
//!         let patch = serde_json::json!({"metadata": {"labels": {"stamped": "yes"}}});
//!         api.patch(&key.name, &kubewasm_guest_v0_2::Patch::Merge(patch))?;
//!         Ok(Action::Done)
//!     }
//! }
//!
//! kubewasm_guest_v0_2::export_controller!(Stamp);
//! ```
//!
//! The handlers are exported as `batch-handler` (`kubewasm:controller@0.2.1`): the host hands
//! over waiting events in one call and the SDK calls [`Controller::on_add`] and friends for
//! each, in order. A component built with this crate is a `batch-controller` of 0.2.2 (its
//! `plugin` is 0.2.2's, whose queue rules carry predicates) and needs a host that knows 0.2.2.
//!
//! This is a separate crate from `kubewasm-guest` (0.1) on purpose: a component carries the
//! world of every binding it was built with, so one crate cannot serve both contracts.

extern crate self as kubewasm_guest_v0_2;

#[doc(hidden)]
pub mod bindings;
mod cache;
mod client;
mod error;
pub mod log;
pub mod queue;
#[doc(hidden)]
pub mod runtime;

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use bindings::exports::kubewasm::controller0_2_2::plugin::{
    PluginInfo, Predicate, QueueSpec, Subscription,
};
pub use bindings::kubewasm::controller0_2_0::client::{EventType, Propagation};
pub use bindings::kubewasm::controller0_2_0::types::PageRequest;
pub use bindings::kubewasm::controller0_2_0::types::{Gvk, IndexDecl, IndexSource, Key, QueueRule};
pub use cache::{Cache, Page, first_page};
pub use client::{Api, DeleteParams, Deleted, Patch, gvk};
pub use error::{ApiError, Error, InvalidCause};
pub use k8s_openapi;
pub use serde_json;
#[doc(hidden)]
pub use wit_bindgen::rt as wit_bindgen_rt;

use bindings::kubewasm::controller0_2_0::client as wit_client;

/// The controller chapter of the guest guide (`docs/controllers.md`), its Rust examples compiled
/// as doc tests so the chapter cannot drift from the SDK.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/controllers.md")]
pub struct ControllerGuide;

/// What to do with a key after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing until something queues the key again.
    Done,
    /// Reconcile again after this long even if nothing changes (capped at about 49 days).
    RequeueAfter(Duration),
}

/// A plugin. Every method but `init` has a default: implement the ones the plugin uses.
pub trait Controller: Sized + 'static {
    /// Called once per instance: the plugin's state and declaration.
    fn init(config: &str) -> Result<(Self, PluginInfo), Error>;

    /// Brings the world in line with the object `key` names (read it from the cache; it may be
    /// gone). Level-based: it must not depend on which event queued the key.
    fn reconcile(&mut self, _key: Key) -> Result<Action, Error> {
        Ok(Action::Done)
    }

    /// An object of subscription `subscription` appeared.
    fn on_add(&mut self, _subscription: u32, _object: &str, _initial: bool) -> Result<(), Error> {
        Ok(())
    }

    /// An object changed.
    fn on_update(&mut self, _subscription: u32, _old: &str, _new: &str) -> Result<(), Error> {
        Ok(())
    }

    /// An object went away.
    fn on_delete(
        &mut self,
        _subscription: u32,
        _object: &str,
        _unknown: bool,
    ) -> Result<(), Error> {
        Ok(())
    }
}

/// A subscription to every object of `K`: `events` asks for the handlers, `queue` says what
/// each change queues for `reconcile`: [`QueueRule`]s (every change queues) or [`QueueSpec`]s
/// (`QueueRule::OwnKey.when(&[Predicate::Generation])`: only the changes named).
pub fn subscribe<K: k8s_openapi::Resource>(
    events: bool,
    queue: impl IntoIterator<Item = impl Into<QueueSpec>>,
) -> Subscription {
    Subscription {
        gvk: gvk::<K>(),
        namespace: None,
        label_selector: None,
        field_selector: None,
        resync_seconds: None,
        events,
        queue: queue.into_iter().map(Into::into).collect(),
    }
}

impl From<QueueRule> for QueueSpec {
    /// The rule on every change (0.2.0's behaviour).
    fn from(rule: QueueRule) -> Self {
        QueueSpec {
            rule,
            when: Vec::new(),
        }
    }
}

impl QueueRule {
    /// This rule only on updates that change one of `predicates` (adds and deletes always
    /// queue): `QueueRule::OwnKey.when(&[Predicate::Generation])` is controller-runtime's
    /// `GenerationChangedPredicate`, so the controller's own status writes queue nothing.
    pub fn when(self, predicates: &[Predicate]) -> QueueSpec {
        QueueSpec {
            rule: self,
            when: predicates.to_vec(),
        }
    }
}

impl IndexDecl {
    /// Index `name` over subscription `subscription`: each object under the value of its label
    /// `key` (objects without it are not indexed).
    pub fn label(name: &str, subscription: u32, key: &str) -> IndexDecl {
        IndexDecl::new(name, subscription, IndexSource::Label(key.to_owned()))
    }

    /// Index `name`: each object under the value of its annotation `key`.
    pub fn annotation(name: &str, subscription: u32, key: &str) -> IndexDecl {
        IndexDecl::new(name, subscription, IndexSource::Annotation(key.to_owned()))
    }

    /// Index `name`: each object under the value at the dotted `path` (`spec.nodeName`). A
    /// string, number or bool indexes as its text; a list of them as each element; a path
    /// through a list (`spec.rules.host`) takes the field of each of its elements.
    pub fn field(name: &str, subscription: u32, path: &str) -> IndexDecl {
        IndexDecl::new(name, subscription, IndexSource::Field(path.to_owned()))
    }

    /// Index `name`: each object under the UID of every owner reference (its owners' objects
    /// find it with `by_index(name, owner_uid)`).
    pub fn owner_uid(name: &str, subscription: u32) -> IndexDecl {
        IndexDecl::new(name, subscription, IndexSource::OwnerUid)
    }

    fn new(name: &str, subscription: u32, source: IndexSource) -> IndexDecl {
        IndexDecl {
            subscription,
            name: name.to_owned(),
            source,
        }
    }
}

/// Records a Kubernetes Event about `object` (aggregated and rate-limited by the host, written
/// in the background).
pub fn record_event<K>(
    object: &K,
    event_type: EventType,
    reason: &str,
    message: &str,
) -> Result<(), ApiError>
where
    K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta>,
{
    record_event_for(gvk::<K>(), object.metadata(), event_type, reason, message)
}

/// Records a Kubernetes Event about any object, named by its type and metadata: for objects the
/// plugin holds as JSON or as a type of its own that does not implement `k8s_openapi::Resource`.
pub fn record_event_for(
    regarding: Gvk,
    meta: &ObjectMeta,
    event_type: EventType,
    reason: &str,
    message: &str,
) -> Result<(), ApiError> {
    let event = wit_client::Event {
        regarding: bindings::kubewasm::controller0_2_0::types::ObjectRef {
            gvk: regarding,
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
        },
        uid: meta.uid.clone(),
        event_type,
        reason: reason.to_owned(),
        message: message.to_owned(),
    };
    wit_client::record_event(&event).map_err(ApiError::from)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;

    use super::*;

    #[test]
    fn a_rule_alone_queues_on_every_change_and_when_names_its_predicates() {
        let every: QueueSpec = QueueRule::OwnKey.into();
        assert!(matches!(every.rule, QueueRule::OwnKey));
        assert!(every.when.is_empty());
        let spec = QueueRule::ControllingOwner(3).when(&[Predicate::Generation, Predicate::Labels]);
        assert!(matches!(spec.rule, QueueRule::ControllingOwner(3)));
        assert!(matches!(
            spec.when[..],
            [Predicate::Generation, Predicate::Labels]
        ));
    }

    #[test]
    fn an_index_names_its_subscription_and_its_source() {
        let by_node = IndexDecl::field("node", 2, "spec.nodeName");
        assert_eq!((by_node.name.as_str(), by_node.subscription), ("node", 2));
        assert!(matches!(by_node.source, IndexSource::Field(ref p) if p == "spec.nodeName"));
        assert!(matches!(
            IndexDecl::label("app", 0, "app.kubernetes.io/name").source,
            IndexSource::Label(ref k) if k == "app.kubernetes.io/name"
        ));
        assert!(matches!(
            IndexDecl::annotation("owner", 1, "example.com/owner").source,
            IndexSource::Annotation(ref k) if k == "example.com/owner"
        ));
        assert!(matches!(
            IndexDecl::owner_uid("owners", 3).source,
            IndexSource::OwnerUid
        ));
    }

    #[test]
    fn subscribe_takes_rules_or_specs_and_names_the_type() {
        let plain = subscribe::<Deployment>(true, [QueueRule::OwnKey]);
        assert_eq!(
            (
                plain.gvk.group.as_str(),
                plain.gvk.version.as_str(),
                plain.gvk.kind.as_str()
            ),
            ("apps", "v1", "Deployment")
        );
        assert!(plain.events);
        assert_eq!(plain.queue.len(), 1);
        let filtered = subscribe::<Deployment>(
            false,
            [
                QueueRule::OwnKey.when(&[Predicate::Generation]),
                QueueRule::ControllingOwner(0).into(),
            ],
        );
        assert_eq!(filtered.queue.len(), 2);
        assert!(matches!(
            filtered.queue[0].when[..],
            [Predicate::Generation]
        ));
        assert!(filtered.queue[1].when.is_empty());
    }
}

//! Write kubewasm admission policies in Rust: the SDK of contract `kubewasm:controller@0.3.0`,
//! world `admission-policy`.
//!
//! A policy is a type implementing [`Policy`]: `init` returns its state and a [`PluginInfo`]
//! (its name, and the cache-only subscriptions and indexes it reads during a review);
//! [`Policy::webhooks`] declares a validating webhook, a mutating one or both; the host then
//! calls [`Policy::validate`] and [`Policy::mutate`] once per review with a [`Review`], the
//! request with its objects parsed. A validation answers a [`Verdict`] (allow, or deny with a
//! message and a status code); a mutation answers a [`Mutation`], usually the review's object
//! with a [`Patch`] applied ([`Review::patched`]). An [`Error`] from any of them fails the
//! review, and the webhook's failure policy answers it.
//!
//! ```no_run
//! use kubewasm_guest_v0_3::k8s_openapi::api::core::v1::ConfigMap;
//! use kubewasm_guest_v0_3::{
//!     AdmissionInfo, Error, Mutation, Patch, PluginInfo, Policy, Review, Rule, Verdict, Webhook,
//! };
//!
//! struct NoPasswords;
//!
//! impl Policy for NoPasswords {
//!     fn init(_config: &str) -> Result<(Self, PluginInfo), Error> {
//!         Ok((NoPasswords, PluginInfo { name: "no-passwords".into(), subscriptions: vec![], indexes: vec![] }))
//!     }
//!
//!     fn webhooks(&self) -> Result<AdmissionInfo, Error> {
//!         let config_maps = Webhook::new([Rule::of::<ConfigMap>()]);
//!         Ok(AdmissionInfo { validating: Some(config_maps.clone()), mutating: Some(config_maps) })
//!     }
//!
//!     fn validate(&mut self, review: &Review) -> Result<Verdict, Error> {
//!         let config_map: Option<ConfigMap> = review.object_as()?;
//!         let data = config_map.and_then(|c| c.data).unwrap_or_default();
//!         Ok(if data.contains_key("password") {
//!             Verdict::deny("keep passwords in a Secret").with_code(422)
//!         } else {
//!             Verdict::allow()
//!         })
//!     }
//!
//!     fn mutate(&mut self, review: &Review) -> Result<Mutation, Error> {
//!         review.patched(&Patch::new().set(&["metadata", "labels", "checked"], "yes"))
//!     }
//! }
//!
//! kubewasm_guest_v0_3::export_policy!(NoPasswords);
//! ```
//!
//! This is a crate of its own, beside `kubewasm-guest-v0-2`, on purpose: a component carries
//! the world of every binding it was built with, so a policy built with the controller SDK
//! would claim the controller exports too.

extern crate self as kubewasm_guest_v0_3;

#[doc(hidden)]
pub mod bindings;
mod cache;
mod error;
pub mod log;
mod patch;
mod review;
#[doc(hidden)]
pub mod runtime;
mod webhook;

pub use bindings::kubewasm::controller0_2_0::types::{
    Gvk, IndexDecl, IndexSource, PluginInfo, Subscription,
};
pub use bindings::kubewasm::controller0_3_0::admission_types::{
    AdmissionInfo, AdmissionRequest, FailurePolicy, GroupVersionKind, GroupVersionResource,
    LabelSelector, Mutation, Operation, Rule, Scope, SelectorOperator, SelectorRequirement,
    SideEffects, UserInfo, Verdict, Webhook,
};
pub use cache::Cache;
pub use error::Error;
pub use k8s_openapi;
pub use patch::{Patch, PatchError};
pub use review::Review;
pub use serde_json;
#[doc(hidden)]
pub use wit_bindgen::rt as wit_bindgen_rt;

/// The admission chapter of the guest guide (`docs/admission.md`), its Rust examples compiled
/// as doc tests so the chapter cannot drift from the SDK.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/admission.md")]
pub struct AdmissionGuide;

/// An admission policy. `init` and `webhooks` are required; a policy implements the handler of
/// each webhook it declares (the default answers an error: the failure policy decides).
pub trait Policy: Sized + 'static {
    /// Called once per instance: the policy's state and declaration (`config` is the plugin's
    /// config string from the host's config file, empty when none is set).
    fn init(config: &str) -> Result<(Self, PluginInfo), Error>;

    /// The webhooks the policy serves, asked once per instance after `init`.
    fn webhooks(&self) -> Result<AdmissionInfo, Error>;

    /// Answers a review for the validating webhook.
    fn validate(&mut self, _review: &Review) -> Result<Verdict, Error> {
        Err(Error("this policy declares no validating webhook".into()))
    }

    /// Answers a review for the mutating webhook.
    fn mutate(&mut self, _review: &Review) -> Result<Mutation, Error> {
        Err(Error("this policy declares no mutating webhook".into()))
    }
}

/// The type `K` by group, version and kind, as subscriptions name it.
pub fn gvk<K: k8s_openapi::Resource>() -> Gvk {
    Gvk {
        group: K::GROUP.to_owned(),
        version: K::VERSION.to_owned(),
        kind: K::KIND.to_owned(),
    }
}

/// A cache-only subscription to every object of `K`: what a policy reads during a review, with
/// [`Cache`] at its position in `PluginInfo::subscriptions`, and indexed with
/// [`IndexDecl::field`] and its siblings. A policy has no events and no
/// queue; the host keeps the cache and answers reads from it.
pub fn subscribe<K: k8s_openapi::Resource>() -> Subscription {
    Subscription {
        gvk: gvk::<K>(),
        namespace: None,
        label_selector: None,
        field_selector: None,
        resync_seconds: None,
        events: false,
        queue: Vec::new(),
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::networking::v1::Ingress;

    use super::*;

    #[test]
    fn an_index_names_its_subscription_and_its_source() {
        let hosts = IndexDecl::field("host", 0, "spec.rules.host");
        assert_eq!((hosts.name.as_str(), hosts.subscription), ("host", 0));
        assert!(matches!(hosts.source, IndexSource::Field(ref p) if p == "spec.rules.host"));
        assert!(matches!(
            IndexDecl::label("app", 1, "app").source,
            IndexSource::Label(ref k) if k == "app"
        ));
        assert!(matches!(
            IndexDecl::annotation("owner", 1, "example.com/owner").source,
            IndexSource::Annotation(ref k) if k == "example.com/owner"
        ));
        assert!(matches!(
            IndexDecl::owner_uid("owners", 2).source,
            IndexSource::OwnerUid
        ));
    }

    #[test]
    fn a_subscription_is_cache_only_and_names_its_type() {
        let ingresses = subscribe::<Ingress>();
        assert_eq!(
            (
                ingresses.gvk.group.as_str(),
                ingresses.gvk.version.as_str(),
                ingresses.gvk.kind.as_str()
            ),
            ("networking.k8s.io", "v1", "Ingress")
        );
        assert!(!ingresses.events);
        assert!(ingresses.queue.is_empty());
    }
}

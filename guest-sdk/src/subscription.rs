//! [`Subscription`]: one informer a plugin asks the host to run (or share) for it.

use crate::bindings::kubewasm::controller::types as wit;
use crate::{Kind, Resource};

/// What a subscription asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Handler calls for every add, update and delete, and cache queries.
    Events,
    /// Cache queries only (a lister-only dependency): the host runs the informer but never calls
    /// a handler for it.
    CacheOnly,
}

/// A resource to watch, optionally narrowed to a namespace and selectors.
///
/// ```
/// # use kubewasm_guest::{Subscription, k8s_openapi::api::core::v1::Pod};
/// let web_pods = Subscription::to::<Pod>()
///     .namespace("shop")
///     .labels("app=web,tier in (front,back)")
///     .resync_seconds(300);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub(crate) resource: Resource,
    pub(crate) namespace: Option<String>,
    pub(crate) label_selector: Option<String>,
    pub(crate) field_selector: Option<String>,
    pub(crate) resync_seconds: Option<u32>,
    pub(crate) delivery: Delivery,
}

impl Subscription {
    /// Every object of the Rust type's resource, in every namespace, with events.
    pub fn to<K: Kind>() -> Self {
        Self::resource(K::resource())
    }

    /// Every object of `resource`, in every namespace, with events (for custom resources).
    pub fn resource(resource: Resource) -> Self {
        Subscription {
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
            resync_seconds: None,
            delivery: Delivery::Events,
        }
    }

    /// Watch only `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects matching a label selector in the API server's syntax.
    pub fn labels(mut self, selector: impl Into<String>) -> Self {
        self.label_selector = Some(selector.into());
        self
    }

    /// Only objects matching a field selector in the API server's syntax.
    pub fn fields(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// Replay every cached object as an update (`old` = `new`) this often.
    pub fn resync_seconds(mut self, seconds: u32) -> Self {
        self.resync_seconds = Some(seconds);
        self
    }

    /// Ask only for cache access, no events.
    pub fn cache_only(mut self) -> Self {
        self.delivery = Delivery::CacheOnly;
        self
    }

    /// The subscribed resource.
    pub fn resource_type(&self) -> &Resource {
        &self.resource
    }

    pub(crate) fn to_wit(&self) -> wit::Subscription {
        wit::Subscription {
            gvk: self.resource.to_wit(),
            namespace: self.namespace.clone(),
            label_selector: self.label_selector.clone(),
            field_selector: self.field_selector.clone(),
            resync_seconds: self.resync_seconds,
            delivery: match self.delivery {
                Delivery::Events => wit::Delivery::Events,
                Delivery::CacheOnly => wit::Delivery::CacheOnly,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn builder_fills_every_wit_field() {
        let subscription = Subscription::to::<Pod>()
            .namespace("ns")
            .labels("app=web")
            .fields("spec.nodeName=n1")
            .resync_seconds(60)
            .cache_only();
        let wit = subscription.to_wit();
        assert_eq!(wit.gvk.kind, "Pod");
        assert_eq!(wit.namespace.as_deref(), Some("ns"));
        assert_eq!(wit.label_selector.as_deref(), Some("app=web"));
        assert_eq!(wit.field_selector.as_deref(), Some("spec.nodeName=n1"));
        assert_eq!(wit.resync_seconds, Some(60));
        assert!(matches!(wit.delivery, wit::Delivery::CacheOnly));
    }

    #[test]
    fn default_subscription_is_everything_with_events() {
        let wit = Subscription::to::<Pod>().to_wit();
        assert!(wit.namespace.is_none() && wit.label_selector.is_none());
        assert!(wit.field_selector.is_none() && wit.resync_seconds.is_none());
        assert!(matches!(wit.delivery, wit::Delivery::Events));
    }
}

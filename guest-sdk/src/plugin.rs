//! [`Plugin`]: what a controller's `init` returns: its state, subscriptions, indexes and typed
//! handlers, and the dispatch of raw events to those handlers.

use serde::de::DeserializeOwned;

use crate::bindings::kubewasm::controller::types as wit;
use crate::event::RawEvent;
use crate::{Delivery, Error, Event, Index, Resource, Subscription};

/// A handler with its type erased: parses the raw event into its own type, then runs.
type Handler<C> = Box<dyn FnMut(&mut C, &Resource, RawEvent<'_>) -> Result<(), Error>>;

/// A plugin under construction and, once `init` returned it, at work.
///
/// ```
/// # use kubewasm_guest::{Error, Event, Index, Plugin, Subscription};
/// # use kubewasm_guest::k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
/// #[derive(Default)]
/// struct Counter { seen: usize }
///
/// let plugin = Plugin::new("counter", Counter::default())
///     .watch(Subscription::to::<ReplicaSet>(), |counter: &mut Counter, _: Event<ReplicaSet>| {
///         counter.seen += 1;
///         Ok(())
///     })
///     .subscribe(Subscription::to::<Pod>())
///     .index(Index::owner_uid::<Pod>("by-owner"));
/// ```
pub struct Plugin<C> {
    name: String,
    state: C,
    subscriptions: Vec<Subscription>,
    indexes: Vec<Index>,
    /// One entry per subscription with [`Delivery::Events`], same resource.
    handlers: Vec<(Resource, Handler<C>)>,
}

impl<C: 'static> Plugin<C> {
    /// A plugin named `name` (for the host's logs and metrics) holding `state`.
    pub fn new(name: impl Into<String>, state: C) -> Self {
        Plugin {
            name: name.into(),
            state,
            subscriptions: Vec::new(),
            indexes: Vec::new(),
            handlers: Vec::new(),
        }
    }

    /// Subscribes with events delivered to `handler`, each object parsed once into `T`: a
    /// k8s-openapi type, [`DynamicObject`](crate::DynamicObject), `serde_json::Value` or any serde
    /// type that fits the resource's JSON.
    pub fn watch<T, F>(self, subscription: Subscription, mut handler: F) -> Self
    where
        T: DeserializeOwned + 'static,
        F: FnMut(&mut C, Event<T>) -> Result<(), Error> + 'static,
    {
        self.watch_with_resource(subscription, move |state: &mut C, _: &Resource, event| {
            handler(state, event)
        })
    }

    /// Like [`Plugin::watch`], for one handler serving several resources: it is told which
    /// resource each event belongs to (list answers may omit `kind`).
    pub fn watch_with_resource<T, F>(mut self, subscription: Subscription, mut handler: F) -> Self
    where
        T: DeserializeOwned + 'static,
        F: FnMut(&mut C, &Resource, Event<T>) -> Result<(), Error> + 'static,
    {
        let subscription = Subscription {
            delivery: Delivery::Events,
            ..subscription
        };
        let resource = subscription.resource.clone();
        self.handlers.push((
            resource,
            Box::new(
                move |state: &mut C, resource: &Resource, raw: RawEvent<'_>| {
                    let event = raw.parse::<T>().map_err(|source| Error::Decode {
                        resource: resource.clone(),
                        source,
                    })?;
                    handler(state, resource, event)
                },
            ),
        ));
        self.subscriptions.push(subscription);
        self
    }

    /// Subscribes for cache access only (no handler is called for this resource), e.g. the
    /// Pods a Deployment controller looks up.
    pub fn subscribe(mut self, subscription: Subscription) -> Self {
        self.subscriptions.push(subscription.cache_only());
        self
    }

    /// Declares an index the host computes on one of the subscribed resources.
    pub fn index(mut self, index: Index) -> Self {
        self.indexes.push(index);
        self
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The controller's state.
    pub fn state(&self) -> &C {
        &self.state
    }

    /// The controller's state, mutably.
    pub fn state_mut(&mut self) -> &mut C {
        &mut self.state
    }

    /// What `init` tells the host; an error when a resource is subscribed to twice (the host
    /// allows one subscription per resource).
    pub(crate) fn info(&self) -> Result<wit::PluginInfo, Error> {
        for (at, subscription) in self.subscriptions.iter().enumerate() {
            let resource = &subscription.resource;
            if self.subscriptions[..at]
                .iter()
                .any(|s| &s.resource == resource)
            {
                return Err(Error::msg(format!(
                    "plugin {} subscribes to {resource} twice",
                    self.name
                )));
            }
        }
        Ok(wit::PluginInfo {
            name: self.name.clone(),
            subscriptions: self
                .subscriptions
                .iter()
                .map(Subscription::to_wit)
                .collect(),
            indexes: self.indexes.iter().map(Index::to_wit).collect(),
        })
    }

    /// Delivers one event to the handler of its resource.
    pub(crate) fn dispatch(
        &mut self,
        resource: &wit::Gvk,
        event: RawEvent<'_>,
    ) -> Result<(), Error> {
        let Some((resource, handler)) = self.handlers.iter_mut().find(|(r, _)| r.is(resource))
        else {
            return Err(Error::msg(format!(
                "plugin {} has no handler for {}",
                self.name,
                Resource::from(resource.clone())
            )));
        };
        handler(&mut self.state, resource, event)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};

    use super::*;
    use crate::DynamicObject;

    #[derive(Default)]
    struct Seen(Vec<String>);

    fn plugin() -> Plugin<Seen> {
        Plugin::new("test", Seen::default())
            .watch(
                Subscription::to::<Pod>(),
                |seen: &mut Seen, event: Event<Pod>| {
                    let name = event.object().metadata.name.clone().unwrap_or_default();
                    seen.0.push(format!("pod {name}"));
                    Ok(())
                },
            )
            .watch_with_resource(
                Subscription::to::<ConfigMap>().namespace("ns"),
                |seen: &mut Seen, resource: &Resource, event: Event<DynamicObject>| {
                    seen.0
                        .push(format!("{} {}", resource.kind, event.object().name()));
                    Ok(())
                },
            )
            .subscribe(Subscription::to::<Deployment>())
            .index(Index::owner_uid::<Pod>("by-owner"))
    }

    #[test]
    fn info_lists_subscriptions_with_their_delivery_and_indexes() {
        let info = plugin().info().unwrap();
        assert_eq!(info.name, "test");
        let kinds: Vec<_> = info
            .subscriptions
            .iter()
            .map(|s| {
                (
                    s.gvk.kind.as_str(),
                    matches!(s.delivery, wit::Delivery::Events),
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [("Pod", true), ("ConfigMap", true), ("Deployment", false)]
        );
        assert_eq!(info.subscriptions[1].namespace.as_deref(), Some("ns"));
        assert_eq!(info.indexes.len(), 1);
    }

    #[test]
    fn dispatch_routes_each_resource_to_its_handler() {
        let mut plugin = plugin();
        let pod = Resource::of::<Pod>().to_wit();
        let cm = Resource::of::<ConfigMap>().to_wit();
        let added = |object| RawEvent::Added {
            object,
            in_initial_list: false,
        };
        plugin
            .dispatch(&pod, added(r#"{"metadata":{"name":"p1"}}"#))
            .unwrap();
        plugin
            .dispatch(&cm, added(r#"{"metadata":{"name":"c1"}}"#))
            .unwrap();
        assert_eq!(plugin.state().0, ["pod p1", "ConfigMap c1"]);
    }

    #[test]
    fn dispatch_without_a_handler_is_an_error() {
        let mut plugin = plugin();
        let deployment = Resource::of::<Deployment>().to_wit();
        let event = RawEvent::Added {
            object: "{}",
            in_initial_list: true,
        };
        let error = plugin.dispatch(&deployment, event).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("no handler for apps/v1 Deployment")
        );
    }

    #[test]
    fn undecodable_objects_are_reported_with_their_resource() {
        let mut plugin = plugin();
        let pod = Resource::of::<Pod>().to_wit();
        let event = RawEvent::Added {
            object: r#"{"metadata":{"name":7}}"#,
            in_initial_list: false,
        };
        let error = plugin.dispatch(&pod, event).unwrap_err();
        assert!(matches!(error, Error::Decode { ref resource, .. } if resource.kind == "Pod"));
        assert!(plugin.state().0.is_empty());
    }

    #[test]
    fn subscribing_twice_to_a_resource_fails_init() {
        let plugin = plugin().subscribe(Subscription::to::<Pod>());
        let error = plugin.info().unwrap_err();
        assert!(error.to_string().contains("subscribes to v1 Pod twice"));
    }
}

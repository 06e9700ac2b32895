//! A guest of the 0.2 world `controller` on the raw wit-bindgen bindings: it subscribes to
//! ConfigMaps (events, own key queued), and its reconcile touches the `queue` and `client`
//! imports, so the component exports and imports all of the 0.2 contract. The host's contract
//! tests check its exports against the host's 0.2 bindings.

wit_bindgen::generate!({
    path: "../../../wit/0.2",
    world: "controller",
});

use exports::kubewasm::controller::{handler, plugin, reconcile};
use kubewasm::controller::types::{Gvk, Key, PluginInfo, QueueRule, Subscription};
use kubewasm::controller::{cache, client, log, queue};

struct Guest;

impl plugin::Guest for Guest {
    fn init(_config: String) -> Result<PluginInfo, String> {
        Ok(PluginInfo {
            name: "contract-v0-2".into(),
            subscriptions: vec![Subscription {
                gvk: Gvk {
                    group: String::new(),
                    version: "v1".into(),
                    kind: "ConfigMap".into(),
                },
                namespace: None,
                label_selector: None,
                field_selector: None,
                resync_seconds: None,
                events: true,
                queue: vec![QueueRule::OwnKey],
            }],
            indexes: Vec::new(),
        })
    }
}

impl handler::Guest for Guest {
    fn on_add(_subscription: u32, _object: String, _in_initial_list: bool) -> Result<(), String> {
        Ok(())
    }

    fn on_update(_subscription: u32, _old: String, _new: String) -> Result<(), String> {
        Ok(())
    }

    fn on_delete(_subscription: u32, _object: String, _unknown: bool) -> Result<(), String> {
        Ok(())
    }
}

impl reconcile::Guest for Guest {
    fn reconcile(key: Key) -> Result<reconcile::Action, String> {
        let object = cache::get(key.subscription, key.namespace.as_deref(), &key.name)
            .map_err(|e| format!("{e:?}"))?;
        if object.is_none() {
            log::log(log::Level::Info, &format!("{} is gone", key.name));
            return Ok(reconcile::Action::Done);
        }
        let copy = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"copy-"}}"#;
        if let Err(error) = client::create(copy) {
            queue::add_after(&key, 1000)?;
            return Err(format!("{error:?}"));
        }
        Ok(reconcile::Action::RequeueAfter(60_000))
    }
}

export!(Guest);

//! A 0.2 plugin on the Rust SDK: every ConfigMap it is queued for gets the label
//! `stamped=yes` (by merge patch), and an Event says so.

use kubewasm_guest_v0_2::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_guest_v0_2::{
    Action, Api, Controller, Error, EventType, Key, Patch, PluginInfo, QueueRule, record_event,
    serde_json, subscribe,
};

struct Stamp;

impl Controller for Stamp {
    fn init(_config: &str) -> Result<(Self, PluginInfo), Error> {
        let info = PluginInfo {
            name: "sdk-v0-2-stamp".into(),
            subscriptions: vec![subscribe::<ConfigMap>(false, vec![QueueRule::OwnKey])],
            indexes: Vec::new(),
        };
        Ok((Stamp, info))
    }

    fn reconcile(&mut self, key: Key) -> Result<Action, Error> {
        let api = Api::<ConfigMap>::namespaced(key.namespace.as_deref().unwrap_or("default"));
        let patch = serde_json::json!({"metadata": {"labels": {"stamped": "yes"}}});
        let stamped = api.patch(&key.name, &Patch::Merge(patch))?;
        record_event(
            &stamped,
            EventType::Normal,
            "Stamped",
            "labelled stamped=yes",
        )?;
        Ok(Action::Done)
    }
}

kubewasm_guest_v0_2::export_controller!(Stamp);

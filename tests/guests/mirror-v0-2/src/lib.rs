//! A 0.2 controller on the Rust SDK: for each ConfigMap labelled `kubewasm.io/mirror=true` it
//! keeps a ConfigMap `NAME-mirror` with the same data, owned by it (controller owner
//! reference). Its one subscription queues a ConfigMap's own key and its controlling owner's,
//! so a change to a mirror reconciles its source. Every reconcile logs
//! `RECONCILED namespace/name resourceVersion` (the version read from the cache, `gone` when
//! the object is not there), every refused write `REFUSED reason`, and every event its
//! handlers receive `EVENT add|update|delete name`, for the tests to read.

use kubewasm_guest_v0_2::bindings::kubewasm::controller0_2_0::{cache, log};
use kubewasm_guest_v0_2::k8s_openapi::api::core::v1::ConfigMap;
use kubewasm_guest_v0_2::k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, OwnerReference,
};
use kubewasm_guest_v0_2::{
    Action, Api, ApiError, Controller, Error, Key, PluginInfo, QueueRule, serde_json, subscribe,
};

const LABEL: &str = "kubewasm.io/mirror";

struct Mirror;

fn cached(namespace: &str, name: &str) -> Result<Option<ConfigMap>, Error> {
    let json = cache::get(0, Some(namespace), name).map_err(|e| Error(format!("{e:?}")))?;
    json.map(|j| serde_json::from_str(&j).map_err(|e| Error(e.to_string())))
        .transpose()
}

fn refused(e: ApiError) -> Error {
    log::log(log::Level::Info, &format!("REFUSED {e:?}"));
    Error(format!("{e:?}"))
}

impl Controller for Mirror {
    /// `config`: the plugin's name (default `mirror`).
    fn init(config: &str) -> Result<(Self, PluginInfo), Error> {
        let info = PluginInfo {
            name: if config.is_empty() { "mirror" } else { config }.into(),
            subscriptions: vec![subscribe::<ConfigMap>(
                true,
                vec![QueueRule::OwnKey, QueueRule::ControllingOwner(0)],
            )],
            indexes: Vec::new(),
        };
        Ok((Mirror, info))
    }

    fn reconcile(&mut self, key: Key) -> Result<Action, Error> {
        let namespace = key.namespace.clone().unwrap_or_default();
        let source = cached(&namespace, &key.name)?;
        let version = source
            .as_ref()
            .and_then(|s| s.metadata.resource_version.clone())
            .unwrap_or_else(|| "gone".into());
        log::log(
            log::Level::Info,
            &format!("RECONCILED {namespace}/{} {version}", key.name),
        );
        let Some(source) = source else {
            return Ok(Action::Done);
        };
        let labelled = source
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL))
            .is_some_and(|v| v == "true");
        if !labelled {
            return Ok(Action::Done);
        }
        let name = format!("{}-mirror", key.name);
        let api = Api::<ConfigMap>::namespaced(&namespace);
        match cached(&namespace, &name)? {
            None => {
                let mirror = ConfigMap {
                    metadata: ObjectMeta {
                        name: Some(name),
                        namespace: Some(namespace.clone()),
                        owner_references: Some(vec![OwnerReference {
                            api_version: "v1".into(),
                            kind: "ConfigMap".into(),
                            name: key.name.clone(),
                            uid: source.metadata.uid.clone().unwrap_or_default(),
                            controller: Some(true),
                            block_owner_deletion: None,
                        }]),
                        ..ObjectMeta::default()
                    },
                    data: source.data.clone(),
                    ..ConfigMap::default()
                };
                api.create(&mirror).map_err(refused)?;
            }
            Some(mut mirror) if mirror.data != source.data => {
                mirror.data = source.data.clone();
                api.update(&mirror).map_err(refused)?;
            }
            Some(_) => {}
        }
        Ok(Action::Done)
    }

    fn on_add(&mut self, _subscription: u32, object: &str, _initial: bool) -> Result<(), Error> {
        event("add", object)
    }

    fn on_update(&mut self, _subscription: u32, _old: &str, new: &str) -> Result<(), Error> {
        event("update", new)
    }

    fn on_delete(&mut self, _subscription: u32, object: &str, _unknown: bool) -> Result<(), Error> {
        event("delete", object)
    }
}

fn event(kind: &str, object: &str) -> Result<(), Error> {
    let object: ConfigMap = serde_json::from_str(object).map_err(|e| Error(e.to_string()))?;
    let name = object.metadata.name.unwrap_or_default();
    log::log(log::Level::Info, &format!("EVENT {kind} {name}"));
    Ok(())
}

kubewasm_guest_v0_2::export_controller!(Mirror);

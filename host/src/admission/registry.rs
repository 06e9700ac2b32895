//! The admission policies the webhook server answers for, by plugin name. The plugin host
//! registers a policy when a plugin of contract 0.3 loads; a reload registers the new
//! version over the old one in one step (reviews already in the old version finish there,
//! the next ones go to the new one: none is refused), and unloading removes it.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use super::declaration::Declaration;
use crate::plugin::AdmissionPolicy;

/// Shared by the plugin host and the webhook server. Cheap to clone.
#[derive(Clone)]
pub struct AdmissionRegistry {
    policies: Arc<RwLock<BTreeMap<String, Arc<AdmissionPolicy>>>>,
    /// Counts registrations and removals, for whoever keeps webhook configurations in step.
    changes: watch::Sender<u64>,
}

impl Default for AdmissionRegistry {
    fn default() -> Self {
        AdmissionRegistry {
            policies: Arc::default(),
            changes: watch::channel(0).0,
        }
    }
}

impl AdmissionRegistry {
    /// The policy of the plugin called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<AdmissionPolicy>> {
        self.policies.read().get(name).cloned()
    }

    /// Marked changed whenever a policy is registered, replaced or removed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Every registered plugin's declaration, by name.
    pub fn declarations(&self) -> Vec<(String, Declaration)> {
        self.policies
            .read()
            .iter()
            .map(|(n, p)| (n.clone(), p.declaration().clone()))
            .collect()
    }

    /// Serves `policy` under its name, replacing what was there; dropping the answer
    /// unregisters it unless a newer version has replaced it meanwhile.
    pub(crate) fn register(&self, policy: Arc<AdmissionPolicy>) -> AdmissionRegistration {
        let name = policy.name().to_owned();
        self.policies.write().insert(name.clone(), policy.clone());
        self.changes.send_modify(|n| *n += 1);
        AdmissionRegistration {
            registry: self.clone(),
            name,
            policy,
        }
    }
}

/// A policy being served; dropped when its plugin version stops.
pub(crate) struct AdmissionRegistration {
    registry: AdmissionRegistry,
    name: String,
    policy: Arc<AdmissionPolicy>,
}

impl AdmissionRegistration {
    /// The policy registered.
    pub(crate) fn policy(&self) -> &Arc<AdmissionPolicy> {
        &self.policy
    }
}

impl Drop for AdmissionRegistration {
    fn drop(&mut self) {
        let mut map = self.registry.policies.write();
        if map
            .get(&self.name)
            .is_some_and(|p| Arc::ptr_eq(p, &self.policy))
        {
            map.remove(&self.name);
            drop(map);
            self.registry.changes.send_modify(|n| *n += 1);
        }
    }
}

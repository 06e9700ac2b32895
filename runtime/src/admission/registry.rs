//! The admission policies the webhook server answers for, by plugin name. The plugin host
//! registers a policy when a plugin of contract 0.3 loads; a reload registers the new
//! version over the old one in one step (reviews already in the old version finish there,
//! the next ones go to the new one: none is refused), and unloading removes it.
//!
//! It also keeps, per policy, why its webhook configurations could not be stored in the API
//! server (set by whoever configures it: the loopback configurator of `kubewasm dev`), for
//! `/plugins` and `/readyz`.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use crate::admission::declaration::{Declaration, FailurePolicy, WebhookKind};
use crate::admission::policy::AdmissionPolicy;

/// Shared by the plugin host and the webhook server. Cheap to clone.
#[derive(Clone)]
pub struct AdmissionRegistry {
    policies: Arc<RwLock<BTreeMap<String, Arc<AdmissionPolicy>>>>,
    /// Counts registrations and removals, for whoever keeps webhook configurations in step.
    changes: watch::Sender<u64>,
    /// Why a policy's configurations are not stored, by plugin name (absent: stored, or
    /// nobody configures this API server).
    unconfigured: Arc<RwLock<BTreeMap<String, String>>>,
}

impl Default for AdmissionRegistry {
    fn default() -> Self {
        AdmissionRegistry {
            policies: Arc::default(),
            changes: watch::channel(0).0,
            unconfigured: Arc::default(),
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

    /// Records which policies' configurations could not be stored, and why (`errors`, by
    /// plugin name): it replaces what was recorded.
    pub fn set_unconfigured(&self, errors: BTreeMap<String, String>) {
        *self.unconfigured.write() = errors;
    }

    /// Why the configurations of the plugin called `name` are not stored in the API server.
    pub fn unconfigured(&self, name: &str) -> Option<String> {
        self.unconfigured.read().get(name).cloned()
    }

    /// `Err` naming every loaded policy with a webhook of failure policy `Fail` whose
    /// configurations could not be stored: the API server does not call it, so what it
    /// must refuse goes through, and this replica should not be called ready.
    pub fn readiness(&self) -> Result<(), String> {
        let unconfigured = self.unconfigured.read();
        let policies = self.policies.read();
        let failing: Vec<String> = unconfigured
            .iter()
            .filter(|(name, _)| {
                policies.get(*name).is_some_and(|p| {
                    [WebhookKind::Validating, WebhookKind::Mutating]
                        .into_iter()
                        .filter_map(|k| p.declaration().webhook(k))
                        .any(|h| h.failure_policy == FailurePolicy::Fail)
                })
            })
            .map(|(name, error)| format!("{name:?} ({error})"))
            .collect();
        if failing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the webhook configurations of admission policies with failurePolicy Fail are \
                 not stored in the API server: {}",
                failing.join("; ")
            ))
        }
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

//! The set of servable resources: the built-ins plus those registered by CRDs.

use parking_lot::RwLock;

use crate::resource::{self, ResourceInfo};

/// Servable resources; CRD writes add and remove entries.
pub(crate) struct Registry {
    resources: RwLock<Vec<ResourceInfo>>,
}

impl Registry {
    pub fn with_builtins() -> Registry {
        Registry {
            resources: RwLock::new(resource::builtins()),
        }
    }

    /// The resource served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<ResourceInfo> {
        self.resources
            .read()
            .iter()
            .find(|r| r.group == group && r.version == version && r.plural == plural)
            .cloned()
    }

    /// The resource with this apiVersion and kind.
    pub fn find_kind(&self, api_version: &str, kind: &str) -> Option<ResourceInfo> {
        self.resources
            .read()
            .iter()
            .find(|r| r.api_version() == api_version && r.kind == kind)
            .cloned()
    }

    /// Every servable resource.
    pub fn all(&self) -> Vec<ResourceInfo> {
        self.resources.read().clone()
    }

    /// Every resource served at `group/version`.
    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<ResourceInfo> {
        self.resources
            .read()
            .iter()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    /// Each non-core group with its versions, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.resources.read().iter().filter(|r| !r.group.is_empty()) {
            match groups.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) if !versions.contains(&r.version) => {
                    versions.push(r.version.clone());
                }
                Some(_) => {}
                None => groups.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        groups
    }

    /// Replaces the resources of `group/plural` with `resources` (a CRD was created or updated).
    pub fn register(&self, group: &str, plural: &str, resources: Vec<ResourceInfo>) {
        let mut all = self.resources.write();
        all.retain(|r| !(r.group == group && r.plural == plural));
        all.extend(resources);
    }

    /// Removes `group/plural` (its CRD was deleted).
    pub fn unregister(&self, group: &str, plural: &str) {
        self.resources
            .write()
            .retain(|r| !(r.group == group && r.plural == plural));
    }
}

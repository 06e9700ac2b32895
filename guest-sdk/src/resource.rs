//! Resource types (group, version, kind) and the [`Kind`] trait tying Rust types to them.

use std::fmt;

use crate::bindings::kubewasm::controller::types::Gvk as WitResource;

/// A Kubernetes resource type: `group` is empty for the core group (`""`, `"v1"`, `"Pod"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    /// The API group, `""` for core (`apps`, `batch`, `example.com`).
    pub group: String,
    /// The version within the group (`v1`, `v1beta1`).
    pub version: String,
    /// The kind, singular and CamelCase (`Pod`, `ReplicaSet`).
    pub kind: String,
}

impl Resource {
    /// A resource from its group (`""` for core), version and kind.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    /// The resource of a Rust type, e.g. `Resource::of::<Pod>()`.
    pub fn of<K: Kind>() -> Self {
        K::resource()
    }

    /// The `apiVersion` of the resource's objects: `group/version`, or `version` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether this is the resource of the WIT record `other`, without allocating.
    pub(crate) fn is(&self, other: &WitResource) -> bool {
        self.group == other.group && self.version == other.version && self.kind == other.kind
    }

    pub(crate) fn to_wit(&self) -> WitResource {
        WitResource {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: self.kind.clone(),
        }
    }
}

impl From<WitResource> for Resource {
    fn from(resource: WitResource) -> Self {
        Resource {
            group: resource.group,
            version: resource.version,
            kind: resource.kind,
        }
    }
}

/// `apps/v1 Deployment`, `v1 Pod`.
impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version(), self.kind)
    }
}

/// A Rust type whose values are objects of one fixed resource.
///
/// Every k8s-openapi resource type implements it. For a custom resource, implement it on your own
/// serde type, or use [`DynamicObject`](crate::DynamicObject) with an explicit [`Resource`].
pub trait Kind {
    /// The resource this type's objects belong to.
    fn resource() -> Resource;
}

impl<K: k8s_openapi::Resource> Kind for K {
    fn resource() -> Resource {
        Resource::new(K::GROUP, K::VERSION, K::KIND)
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn k8s_openapi_types_name_their_resource() {
        assert_eq!(Resource::of::<Pod>(), Resource::new("", "v1", "Pod"));
        assert_eq!(
            Resource::of::<Deployment>(),
            Resource::new("apps", "v1", "Deployment")
        );
    }

    #[test]
    fn api_version_leaves_out_the_empty_core_group() {
        assert_eq!(Resource::of::<Pod>().api_version(), "v1");
        assert_eq!(
            Resource::of::<Deployment>().to_string(),
            "apps/v1 Deployment"
        );
    }

    #[test]
    fn is_compares_with_the_wit_record() {
        let pod = Resource::of::<Pod>();
        assert!(pod.is(&pod.to_wit()));
        assert!(!pod.is(&Resource::of::<Deployment>().to_wit()));
    }
}

//! The few fields ready-pods reads, as its own serde types.
//!
//! k8s-openapi's `Deployment`, `ReplicaSet` and `Pod` would work as well (the SDK takes any serde
//! type), but their deserializers carry the whole pod spec schema: the component grew to 725 KB
//! and took seconds to compile on first load. These types skip every field they do not name.

use kubewasm_guest::{Kind, Resource};
use serde::Deserialize;

/// The part of `metadata` ready-pods uses.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    #[serde(default)]
    pub name: String,
    pub namespace: Option<String>,
    #[serde(default)]
    pub uid: String,
    pub deletion_timestamp: Option<String>,
}

impl Meta {
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// `spec.replicas` of a Deployment or ReplicaSet (the API server defaults it to 1).
#[derive(Debug, Default, Deserialize)]
pub struct ReplicasSpec {
    pub replicas: Option<i32>,
}

/// An `apps/v1` Deployment: metadata and wanted replicas.
#[derive(Debug, Default, Deserialize)]
pub struct Deployment {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: Option<ReplicasSpec>,
}

/// An `apps/v1` ReplicaSet: metadata and wanted replicas.
#[derive(Debug, Default, Deserialize)]
pub struct ReplicaSet {
    #[serde(default)]
    pub metadata: Meta,
    pub spec: Option<ReplicasSpec>,
}

/// A `v1` Pod: metadata and status conditions.
#[derive(Debug, Default, Deserialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: Meta,
    pub status: Option<PodStatus>,
}

#[derive(Debug, Default, Deserialize)]
pub struct PodStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// One of `status.conditions`.
#[derive(Debug, Default, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

impl Kind for Deployment {
    fn resource() -> Resource {
        Resource::new("apps", "v1", "Deployment")
    }
}

impl Kind for ReplicaSet {
    fn resource() -> Resource {
        Resource::new("apps", "v1", "ReplicaSet")
    }
}

impl Kind for Pod {
    fn resource() -> Resource {
        Resource::new("", "v1", "Pod")
    }
}

impl Deployment {
    /// Wanted replicas; 1 when unset, as the API server defaults it.
    pub fn wanted(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|spec| spec.replicas)
            .unwrap_or(1)
    }
}

impl ReplicaSet {
    /// Wanted replicas; 1 when unset, as the API server defaults it.
    pub fn wanted(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|spec| spec.replicas)
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json;

    use super::*;

    #[test]
    fn api_server_json_decodes_skipping_unnamed_fields() {
        let rs: ReplicaSet = serde_json::from_str(
            r#"{"apiVersion":"apps/v1","kind":"ReplicaSet",
                "metadata":{"name":"web-1","namespace":"shop","uid":"u1","labels":{"a":"b"}},
                "spec":{"replicas":3,"template":{"spec":{"containers":[]}}},
                "status":{"replicas":3}}"#,
        )
        .unwrap();
        assert_eq!(rs.metadata.key(), "shop/web-1");
        assert_eq!(rs.metadata.uid, "u1");
        assert_eq!(rs.wanted(), 3);
    }

    #[test]
    fn missing_replicas_default_to_one() {
        let deployment: Deployment = serde_json::from_str(r#"{"metadata":{"name":"d"}}"#).unwrap();
        assert_eq!(deployment.wanted(), 1);
        assert_eq!(deployment.metadata.key(), "d");
    }

    #[test]
    fn kinds_match_the_k8s_resources() {
        use kubewasm_guest::k8s_openapi::api::{apps, core};
        assert_eq!(Resource::of::<Pod>(), Resource::of::<core::v1::Pod>());
        assert_eq!(
            Resource::of::<ReplicaSet>(),
            Resource::of::<apps::v1::ReplicaSet>()
        );
        assert_eq!(
            Resource::of::<Deployment>(),
            Resource::of::<apps::v1::Deployment>()
        );
    }
}

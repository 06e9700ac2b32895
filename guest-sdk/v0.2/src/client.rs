//! A typed client over the host's `client` import: `Api<K>` for any k8s-openapi type (or your
//! own type implementing `k8s_openapi::Resource`, for custom resources).

use std::marker::PhantomData;

use k8s_openapi::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::kubewasm::controller0_2_0::client as wit;
use crate::bindings::kubewasm::controller0_2_0::types::{Gvk, ObjectRef};
use crate::error::ApiError;

/// How a patch changes an object.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// A JSON merge patch, e.g. `json!({"spec": {"replicas": 3}})`.
    Merge(Value),
    /// A JSON patch (a list of operations).
    Json(Value),
    /// A strategic merge patch (built-in kinds).
    Strategic(Value),
}

/// How a delete treats dependents; preconditions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// Delete only the object with this uid.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    /// `None`: the resource's default.
    pub propagation: Option<wit::Propagation>,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted<K> {
    Gone,
    /// Finalizers hold the object: it is marked for deletion.
    Pending(K),
}

/// Writes objects of type `K` in one namespace (or cluster-wide for cluster-scoped types).
///
/// ```no_run
/// use kubewasm_guest_v0_2::Api;
/// use kubewasm_guest_v0_2::k8s_openapi::api::core::v1::ConfigMap;
///
/// let api = Api::<ConfigMap>::namespaced("default");
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("settings".into());
/// let created = api.create(&cm)?;
/// # Ok::<(), kubewasm_guest_v0_2::ApiError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Api<K> {
    namespace: Option<String>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Api<K>
where
    K: Resource + Serialize + DeserializeOwned,
{
    /// Objects in `namespace`.
    pub fn namespaced(namespace: &str) -> Self {
        Api {
            namespace: Some(namespace.to_owned()),
            kind: PhantomData,
        }
    }

    /// Cluster-scoped objects.
    pub fn cluster() -> Self {
        Api {
            namespace: None,
            kind: PhantomData,
        }
    }

    /// Creates `object` (in this Api's namespace unless it names one). Answers it as stored.
    pub fn create(&self, object: &K) -> Result<K, ApiError> {
        decode(&wit::create(&self.encode(object)?))
    }

    /// Replaces `object`; its metadata.resourceVersion is the precondition (`Conflict` when
    /// stale).
    pub fn update(&self, object: &K) -> Result<K, ApiError> {
        decode(&wit::update(&self.encode(object)?))
    }

    /// Replaces `object`'s status, with the same precondition.
    pub fn update_status(&self, object: &K) -> Result<K, ApiError> {
        decode(&wit::update_status(&self.encode(object)?))
    }

    /// Patches the object `name`.
    pub fn patch(&self, name: &str, patch: &Patch) -> Result<K, ApiError> {
        decode(&wit::patch(&self.target(name), &body(patch)))
    }

    /// Patches the status of the object `name`.
    pub fn patch_status(&self, name: &str, patch: &Patch) -> Result<K, ApiError> {
        decode(&wit::patch_status(&self.target(name), &body(patch)))
    }

    /// Server-side apply of `object` (the fields this plugin owns), with the plugin's name as
    /// field manager; `force` takes fields other managers own. Creates it if absent.
    pub fn apply(&self, name: &str, object: &K, force: bool) -> Result<K, ApiError> {
        let apply = wit::PatchBody::Apply(wit::ApplyPatch {
            object: self.encode(object)?,
            force,
        });
        decode(&wit::patch(&self.target(name), &apply))
    }

    /// Deletes the object `name`.
    pub fn delete(&self, name: &str, params: &DeleteParams) -> Result<Deleted<K>, ApiError> {
        let options = wit::DeleteOptions {
            uid: params.uid.clone(),
            resource_version: params.resource_version.clone(),
            propagation: params.propagation,
        };
        match wit::delete(&self.target(name), &options).map_err(ApiError::from)? {
            wit::Deleted::Gone => Ok(Deleted::Gone),
            wit::Deleted::Pending(json) => Ok(Deleted::Pending(serde_json::from_str(&json)?)),
        }
    }

    fn target(&self, name: &str) -> ObjectRef {
        ObjectRef {
            gvk: gvk::<K>(),
            namespace: self.namespace.clone(),
            name: name.to_owned(),
        }
    }

    /// The object's JSON, with this Api's namespace filled in when it has none.
    fn encode(&self, object: &K) -> Result<String, ApiError> {
        let mut value = serde_json::to_value(object)?;
        if let (Some(namespace), Some(meta)) = (
            &self.namespace,
            value.get_mut("metadata").and_then(Value::as_object_mut),
        ) {
            meta.entry("namespace")
                .or_insert_with(|| Value::String(namespace.clone()));
        }
        Ok(value.to_string())
    }
}

/// The resource type of `K`, as the contract names it.
pub fn gvk<K: Resource>() -> Gvk {
    Gvk {
        group: K::GROUP.to_owned(),
        version: K::VERSION.to_owned(),
        kind: K::KIND.to_owned(),
    }
}

fn body(patch: &Patch) -> wit::PatchBody {
    match patch {
        Patch::Merge(v) => wit::PatchBody::Merge(v.to_string()),
        Patch::Json(v) => wit::PatchBody::Json(v.to_string()),
        Patch::Strategic(v) => wit::PatchBody::Strategic(v.to_string()),
    }
}

fn decode<K: DeserializeOwned>(answer: &Result<String, wit::ApiError>) -> Result<K, ApiError> {
    match answer {
        Ok(json) => Ok(serde_json::from_str(json)?),
        Err(error) => Err(ApiError::from(error.clone())),
    }
}

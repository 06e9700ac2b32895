//! The identity of a shared informer.

use kube::discovery::ApiResource;

/// What one shared informer watches: a resource, optionally narrowed to a namespace and
/// selectors. Handlers asking for equal keys share one informer and one cache.
#[derive(Clone, Hash, Eq, PartialEq, Debug)]
pub struct InformerKey {
    /// The resource (group, version, kind, plural).
    pub resource: ApiResource,
    /// Only this namespace; `None` for all namespaces or cluster-scoped resources.
    pub namespace: Option<String>,
    /// A label selector in API server syntax (`app=web,tier!=db`).
    pub label_selector: Option<String>,
    /// A field selector in API server syntax (`spec.nodeName=node-1`).
    pub field_selector: Option<String>,
}

impl InformerKey {
    /// A key for every object of `resource`, in all namespaces.
    pub fn all(resource: ApiResource) -> InformerKey {
        InformerKey {
            resource,
            namespace: None,
            label_selector: None,
            field_selector: None,
        }
    }

    /// The same key narrowed to `namespace`.
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> InformerKey {
        self.namespace = Some(namespace.into());
        self
    }

    /// The same key narrowed by a label selector.
    pub fn with_label_selector(mut self, selector: impl Into<String>) -> InformerKey {
        self.label_selector = Some(selector.into());
        self
    }

    /// The same key narrowed by a field selector.
    pub fn with_field_selector(mut self, selector: impl Into<String>) -> InformerKey {
        self.field_selector = Some(selector.into());
        self
    }

    /// The collection's URL path, e.g. `/apis/apps/v1/namespaces/ns/deployments`. The
    /// namespace is percent-encoded as one path segment: whatever it holds, the path names
    /// this resource's collection (the plugin host refuses invalid namespaces before this).
    pub fn collection_path(&self) -> String {
        let mut path = if self.resource.group.is_empty() {
            format!("/api/{}", self.resource.version)
        } else {
            format!("/apis/{}/{}", self.resource.group, self.resource.version)
        };
        if let Some(ns) = &self.namespace {
            path.push_str("/namespaces/");
            path.push_str(&path_segment(ns));
        }
        path.push('/');
        path.push_str(&self.resource.plural);
        path
    }
}

/// What a URL path segment may hold unencoded: checked names need no encoding, and anything
/// else is encoded rather than trusted to be a single segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'/')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// `segment` percent-encoded as one URL path segment.
pub fn path_segment(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_paths_for_core_and_grouped_resources() {
        let cm = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        assert_eq!(
            InformerKey::all(cm.clone()).collection_path(),
            "/api/v1/configmaps"
        );
        assert_eq!(
            InformerKey::all(cm.clone())
                .in_namespace("ns")
                .collection_path(),
            "/api/v1/namespaces/ns/configmaps"
        );
        assert_eq!(
            InformerKey::all(cm)
                .in_namespace("default/secrets?x=")
                .collection_path(),
            "/api/v1/namespaces/default%2Fsecrets%3Fx=/configmaps"
        );
        let dep = ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&());
        assert_eq!(
            InformerKey::all(dep).collection_path(),
            "/apis/apps/v1/deployments"
        );
    }
}

//! The built-in kinds with a protobuf schema, and their messages.

mod generated;

use crate::schema::Message;

/// Every kind with a schema: `(apiVersion, kind, message)`, sorted.
pub use generated::KINDS;

/// The message of a kind, if this crate has its schema.
pub fn for_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    KINDS
        .binary_search_by(|(v, k, _)| (*v, *k).cmp(&(api_version, kind)))
        .ok()
        .map(|i| KINDS[i].2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_sorted_and_found() {
        assert!(
            KINDS
                .windows(2)
                .all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1))
        );
        for (api_version, kind, message) in KINDS {
            assert!(std::ptr::eq(for_kind(api_version, kind).unwrap(), *message));
        }
        for (api_version, kind) in [
            ("v1", "Pod"),
            ("v1", "Service"),
            ("v1", "ConfigMap"),
            ("apps/v1", "Deployment"),
            ("batch/v1", "Job"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            ("networking.k8s.io/v1", "Ingress"),
            ("coordination.k8s.io/v1", "Lease"),
        ] {
            assert!(
                for_kind(api_version, kind).is_some(),
                "{api_version} {kind}"
            );
        }
        assert!(for_kind("v1", "Nothing").is_none());
        assert!(for_kind("example.com/v1", "Pod").is_none());
    }
}

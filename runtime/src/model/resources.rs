//! Resource names of kinds as kubectl guesses them without discovery, and which built-in
//! resources have no `/status` subresource: what a grant on a kind means in resources, shared by
//! the write client, the webhook-rule check and the host's RBAC generator.

use kube::api::GroupVersionKind;
use kube::discovery::ApiResource;

/// The plural of `kind` as kubectl guesses it without discovery (`Backup` -> `backups`). kube's
/// guess is used, except for the one-letter kind `Y`, which it cannot take (it would underflow
/// where upstream answers `ys`).
pub fn guess_plural(group: &str, version: &str, kind: &str) -> String {
    if kind.eq_ignore_ascii_case("y") {
        return "ys".to_owned();
    }
    ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)).plural
}

/// Whether the resource of `kind` in `group` may have a `/status` subresource: false for the
/// built-in resources known to have none, true otherwise (a custom resource may declare one).
pub fn has_status_subresource(group: &str, kind: &str) -> bool {
    const WITHOUT_STATUS: &[(&str, &str)] = &[
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "ServiceAccount"),
        ("", "Event"),
        ("", "Endpoints"),
        ("", "LimitRange"),
        ("", "PodTemplate"),
        ("events.k8s.io", "Event"),
        ("apps", "ControllerRevision"),
        ("coordination.k8s.io", "Lease"),
        ("discovery.k8s.io", "EndpointSlice"),
        ("rbac.authorization.k8s.io", "Role"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "RoleBinding"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("node.k8s.io", "RuntimeClass"),
        ("networking.k8s.io", "IngressClass"),
        (
            "admissionregistration.k8s.io",
            "MutatingWebhookConfiguration",
        ),
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration",
        ),
    ];
    !WITHOUT_STATUS.contains(&(group, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_and_status_subresources_as_kubectl_guesses_them() {
        assert!(!has_status_subresource("", "ConfigMap"));
        assert_eq!(guess_plural("example.com", "v1", "Y"), "ys");
        assert_eq!(guess_plural("example.com", "v1", "Policy"), "policies");
        assert!(has_status_subresource("example.com", "Backup"));
    }
}

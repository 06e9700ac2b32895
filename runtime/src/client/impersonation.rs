//! Per-plugin impersonation: with `[impersonation]` configured, every request made for a
//! plugin carries `Impersonate-User: system:serviceaccount:NS:plugin-NAME`, so the API server
//! authorizes it by that plugin's own RBAC (which `kubewasm rbac` prints) instead of the host's,
//! which holds every plugin's grants together. A write the host wrongly lets through is still
//! refused by the server.
//!
//! `NAME` is the plugin's file name without `.wasm` (its key in the config), never the name the
//! guest declares in `init`: a guest could declare another plugin's name and borrow its rights.
//! The API server adds the service account's groups (`system:serviceaccounts`,
//! `system:serviceaccounts:NS`) itself when no `Impersonate-Group` is sent, so the host only
//! needs `impersonate` on the plugins' service accounts, not on groups.

use http::HeaderValue;
use http::header::HeaderName;

use crate::model::names::{DNS_LABEL, InvalidName, Namespace, is_dns_label};

/// The header naming the user a request is made as.
pub const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");

/// The service account one plugin's requests impersonate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PluginAccount {
    namespace: Namespace,
    name: String,
}

impl PluginAccount {
    /// What every plugin's service account name starts with, so that it cannot be the host's
    /// own account or another workload's by accident.
    pub const PREFIX: &'static str = "plugin-";

    /// The account of the plugin whose file is `plugin.wasm`: `plugin-PLUGIN` in `namespace`.
    /// Refused unless that is a DNS-1123 label, as the API server requires of a service
    /// account's name (the file name is outside input: nothing is escaped or shortened, so two
    /// plugins never share an account).
    pub fn for_plugin(namespace: &Namespace, plugin: &str) -> Result<Self, InvalidName> {
        let name = format!("{}{plugin}", Self::PREFIX);
        if is_dns_label(&name) {
            Ok(PluginAccount {
                namespace: namespace.clone(),
                name,
            })
        } else {
            Err(InvalidName::new(
                "service account (`plugin-` and the file name)",
                &name,
                DNS_LABEL,
            ))
        }
    }

    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The service account's name, `plugin-NAME`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user the API server knows the account as: `system:serviceaccount:NS:NAME`.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The `Impersonate-User` value for this account.
    pub fn header(&self) -> HeaderValue {
        // A namespace and a DNS label are lowercase letters, digits and '-': always a valid
        // header value.
        HeaderValue::from_str(&self.username()).expect("a DNS label is a valid header value")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(namespace: &str) -> Namespace {
        Namespace::new(namespace).unwrap()
    }

    #[test]
    fn a_plugin_is_its_own_service_account_in_the_configured_namespace() {
        let account = PluginAccount::for_plugin(&ns("kubewasm-plugins"), "mirror").unwrap();
        assert_eq!(account.name(), "plugin-mirror");
        assert_eq!(account.namespace().as_str(), "kubewasm-plugins");
        assert_eq!(
            account.header().to_str().unwrap(),
            "system:serviceaccount:kubewasm-plugins:plugin-mirror"
        );
    }

    #[test]
    fn file_names_that_make_no_service_account_name_are_refused_not_mangled() {
        let longest = "a".repeat(63 - PluginAccount::PREFIX.len());
        assert!(PluginAccount::for_plugin(&ns("ops"), &longest).is_ok());
        for bad in [
            "",
            "Mirror",
            "two words",
            "a_b",
            "x.y",
            "end-",
            "ns:other",
            "a\nImpersonate-User: admin",
            "naïve",
            &format!("{longest}a"),
        ] {
            let err = PluginAccount::for_plugin(&ns("ops"), bad).unwrap_err();
            assert!(err.to_string().contains("DNS-1123 label"), "{bad:?}: {err}");
        }
    }
}

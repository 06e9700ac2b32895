//! The boundary every string a guest names a Kubernetes object with crosses: namespaces, object
//! names, API groups, versions and kinds, and selectors, each checked by the API server's own
//! rules before the host uses it. Code past the boundary (the write client, the informer keys,
//! the RBAC it prints) takes only these types, so a guest string that could address another
//! resource (`default/secrets/x?`, `..`, a NUL byte) never reaches a URL, a cache key or a
//! metric label.

use std::fmt;

use crate::model::declared::Gvk;

/// Why a guest's string was refused; the message names the field and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {value}: {rule}")]
pub struct InvalidName {
    /// What the string was for: `namespace`, `name`, `kind`, ...
    pub field: &'static str,
    /// The string as given, quoted and cut to [`SHOWN`] characters.
    pub value: String,
    pub rule: &'static str,
}

/// How much of a refused string a message repeats.
const SHOWN: usize = 80;

impl InvalidName {
    pub(crate) fn new(field: &'static str, value: &str, rule: &'static str) -> Self {
        let cut: String = value.chars().take(SHOWN).collect();
        let value = if cut.len() < value.len() {
            format!("{cut:?}... ({} bytes)", value.len())
        } else {
            format!("{cut:?}")
        };
        InvalidName { field, value, rule }
    }
}

pub(crate) const DNS_LABEL: &str = "must be a DNS-1123 label: at most 63 lowercase letters, digits and \
                         '-', starting and ending with a letter or digit";
const DNS_SUBDOMAIN: &str = "must be a DNS-1123 subdomain: at most 253 lowercase letters, \
                             digits, '-' and '.', starting and ending with a letter or digit";
const PATH_SEGMENT: &str = "must be 1 to 253 bytes without control characters, '/' or '%', \
                            and not '.' or '..'";
const KIND: &str = "must be 1 to 63 letters, digits and '-', starting with a letter and not \
                    ending with '-'";

/// The longest selector a guest may hand the host, in bytes.
pub const MAX_SELECTOR: usize = 4096;

pub(crate) fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// The API server's DNS-1123 subdomain: dot-separated parts of lowercase letters, digits and
/// `-`, each starting and ending with a letter or digit, at most 253 bytes in all (no limit
/// per part, unlike DNS).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

fn is_path_segment(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s != "."
        && s != ".."
        && !s.chars().any(|c| c.is_control() || c == '/' || c == '%')
}

/// A namespace: a DNS-1123 label, as the API server requires of every namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(String);

impl Namespace {
    /// Checks `namespace` by the API server's rule.
    pub fn new(namespace: &str) -> Result<Self, InvalidName> {
        if is_dns_label(namespace) {
            Ok(Namespace(namespace.to_owned()))
        } else {
            Err(InvalidName::new("namespace", namespace, DNS_LABEL))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An object's name, by the rule of its resource: a DNS-1123 subdomain, as the API server
/// requires of most resources; for the RBAC kinds (which allow `system:...` names) any
/// path segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectName(String);

impl ObjectName {
    /// Checks `name` by the rule of the resources of `group`.
    pub fn new(group: &str, name: &str) -> Result<Self, InvalidName> {
        let (ok, rule) = if group == "rbac.authorization.k8s.io" {
            (is_path_segment(name), PATH_SEGMENT)
        } else {
            (is_dns_subdomain(name), DNS_SUBDOMAIN)
        };
        if ok {
            Ok(ObjectName(name.to_owned()))
        } else {
            Err(InvalidName::new("name", name, rule))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A resource type as a guest names it, checked: its group empty or a DNS-1123 subdomain, its
/// version a DNS-1123 label, its kind what a CustomResourceDefinition may call a kind. Which
/// resource it is (and whether it exists) is discovery's to say.
#[derive(Debug, Clone)]
pub struct Kind(Gvk);

impl Kind {
    /// Checks each part of `gvk`.
    pub fn new(gvk: &Gvk) -> Result<Self, InvalidName> {
        if !(gvk.group.is_empty() || is_dns_subdomain(&gvk.group)) {
            return Err(InvalidName::new("group", &gvk.group, DNS_SUBDOMAIN));
        }
        if !is_dns_label(&gvk.version) {
            return Err(InvalidName::new("version", &gvk.version, DNS_LABEL));
        }
        let b = gvk.kind.as_bytes();
        let kind_ok = !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphabetic()
            && b[b.len() - 1] != b'-'
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-');
        if !kind_ok {
            return Err(InvalidName::new("kind", &gvk.kind, KIND));
        }
        Ok(Kind(gvk.clone()))
    }

    pub fn gvk(&self) -> &Gvk {
        &self.0
    }
}

const QUALIFIED_NAME: &str = "must be a qualified name: an optional DNS-1123 subdomain prefix of at \
                              most 253 bytes and '/', then at most 63 letters, digits, '-', '_' \
                              and '.', starting and ending with a letter or digit";

/// The name part of a qualified name: 1 to 63 letters, digits, `-`, `_` and `.`, starting and
/// ending with a letter or digit.
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks a label or annotation key by the API server's rule (`IsQualifiedName`): `name` or
/// `prefix/name`, the prefix a DNS-1123 subdomain. `what` names the field in the refusal.
pub fn qualified_name<'a>(what: &'static str, key: &'a str) -> Result<&'a str, InvalidName> {
    let ok = match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_qualified_name_part(name),
        None => is_qualified_name_part(key),
    };
    if ok {
        Ok(key)
    } else {
        Err(InvalidName::new(what, key, QUALIFIED_NAME))
    }
}

/// Checks a label selector by the API server's syntax; answers it as given.
pub fn label_selector(selector: &str) -> Result<&str, InvalidName> {
    if selector.len() > MAX_SELECTOR {
        return Err(InvalidName::new(
            "label selector",
            selector,
            "is longer than 4096 bytes",
        ));
    }
    kubewasm_labels::Selector::parse(selector)
        .map(|_| selector)
        .map_err(|_| InvalidName::new("label selector", selector, "does not parse"))
}

/// Checks a field selector by the API server's syntax; answers it as given.
pub fn field_selector(selector: &str) -> Result<&str, InvalidName> {
    if selector.len() > MAX_SELECTOR {
        return Err(InvalidName::new(
            "field selector",
            selector,
            "is longer than 4096 bytes",
        ));
    }
    kubewasm_labels::FieldSelector::parse(selector)
        .map(|_| selector)
        .map_err(|_| InvalidName::new("field selector", selector, "does not parse"))
}

pub use kubewasm_informer::path_segment;

#[cfg(test)]
mod tests {
    use super::*;

    fn gvk(group: &str, version: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn namespaces_are_dns_labels() {
        for ok in ["default", "kube-system", "a", &"a".repeat(63), "team-1"] {
            assert!(Namespace::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "default/secrets?x=",
            "default/secrets/top-secret?x=",
            "..",
            ".",
            "Default",
            "-a",
            "a-",
            "a.b",
            "a%2f",
            "a\0",
            &"a".repeat(64),
        ] {
            let err = Namespace::new(bad).unwrap_err();
            assert_eq!(err.field, "namespace", "{bad}");
        }
    }

    #[test]
    fn names_are_subdomains_or_for_rbac_path_segments() {
        for ok in ["web", "web.v1", "a-b.c-d", &"a".repeat(253)] {
            assert!(ObjectName::new("", ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a..b",
            "a/b",
            "y?",
            "a%2F",
            "Web",
            "a\0",
            "-a",
            &"a".repeat(254),
        ] {
            assert!(ObjectName::new("apps", bad).is_err(), "{bad:?}");
        }
        let rbac = "rbac.authorization.k8s.io";
        assert!(ObjectName::new(rbac, "system:controller:x").is_ok());
        for bad in ["", ".", "..", "a/b", "a%b", "a\nb"] {
            assert!(ObjectName::new(rbac, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn kinds_groups_and_versions_follow_discoverys_shapes() {
        assert!(Kind::new(&gvk("", "v1", "ConfigMap")).is_ok());
        assert!(Kind::new(&gvk("example.com", "v1alpha1", "Backup")).is_ok());
        for (g, v, k) in [
            ("", "v1", "Secret\0"),
            ("", "v1", ""),
            ("", "v1", "Config Map"),
            ("", "v1", "1Map"),
            ("", "v1", &"K".repeat(64)),
            ("a/b", "v1", "X"),
            ("Apps", "v1", "X"),
            ("", "v1/..", "X"),
            ("", "", "X"),
        ] {
            assert!(Kind::new(&gvk(g, v, k)).is_err(), "{g:?} {v:?} {k:?}");
        }
    }

    #[test]
    fn label_and_annotation_keys_are_qualified_names() {
        for ok in [
            "app",
            "app.kubernetes.io/name",
            "example.com/Tier_1",
            "a",
            &"a".repeat(63),
            &format!("{}/x", "p".repeat(253)),
        ] {
            assert_eq!(qualified_name("label", ok), Ok(ok), "{ok}");
        }
        for bad in [
            "",
            "/",
            "a/",
            "/a",
            "a/b/c",
            "-a",
            "a-",
            "Example.com/a",
            "a b",
            "a\nb",
            "a\u{1b}",
            &"a".repeat(64),
            &format!("{}/x", "p".repeat(254)),
            &"a.".repeat(150_000),
        ] {
            let err = qualified_name("label", bad).unwrap_err();
            assert!(err.to_string().len() < 400, "{err}");
        }
    }

    #[test]
    fn selectors_must_parse_and_messages_stay_short() {
        assert_eq!(label_selector("app=web,tier!=db"), Ok("app=web,tier!=db"));
        assert!(label_selector("app=(").is_err());
        assert!(field_selector("metadata.name=x").is_ok());
        assert!(field_selector("metadata.name").is_err());
        let huge = "a".repeat(1 << 20);
        let err = label_selector(&huge).unwrap_err();
        assert!(err.to_string().len() < 300, "{err}");
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(path_segment("web"), "web");
        assert_eq!(
            path_segment("default/secrets/x?y=%"),
            "default%2Fsecrets%2Fx%3Fy=%25"
        );
    }
}

//! Object and namespace names, checked by the API server's rules and worded as it words them.
//!
//! The API server applies three rules: most kinds' names are DNS-1123 subdomains (253
//! characters), namespaces and services are DNS-1123 labels (63), and every name is a valid
//! path segment (not `.` or `..`, no `/` or `%`; RBAC objects and core Events need only that).
//! The checks scan bytes once, without regular expressions: every write runs them.

use serde_json::Value;

use crate::resource::{NameRule, ResourceInfo};
use crate::status::{Status, StatusCause};

/// The longest DNS-1123 subdomain.
const SUBDOMAIN_MAX: usize = 253;
/// The longest DNS-1123 label (and so namespace name).
const LABEL_MAX: usize = 63;
/// A generated name is its prefix, cut to this length, and five random characters (the API
/// server keeps generated names within 63 characters).
pub(crate) const GENERATED_PREFIX_MAX: usize = 58;

const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
     alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character \
     (e.g. 'example.com', regex used for validation is \
     '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric \
     characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  \
     or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Whether `label` (one dot-free part) matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_label_shape(label: &[u8]) -> bool {
    let alphanumeric = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    label.first().is_some_and(alphanumeric)
        && label.last().is_some_and(alphanumeric)
        && label.iter().all(|b| alphanumeric(b) || *b == b'-')
}

fn is_subdomain_shape(name: &str) -> bool {
    name.as_bytes().split(|b| *b == b'.').all(is_label_shape)
}

/// What is wrong with `name` as a DNS-1123 subdomain (empty: nothing).
fn subdomain_problems(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > SUBDOMAIN_MAX {
        problems.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !is_subdomain_shape(name) {
        problems.push(SUBDOMAIN_MESSAGE.to_owned());
    }
    problems
}

/// What is wrong with `name` as a DNS-1123 label (empty: nothing).
fn label_problems(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.len() > LABEL_MAX {
        problems.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !is_label_shape(name.as_bytes()) {
        // A valid subdomain that is no label can only have dots in it.
        problems.push(if is_subdomain_shape(name) {
            "must not contain dots".to_owned()
        } else {
            LABEL_MESSAGE.to_owned()
        });
    }
    problems
}

/// What is wrong with `name` as a path segment (empty: nothing). A prefix (`generateName`) may
/// be `.` or `..`: something follows it.
pub(crate) fn path_segment_problems(name: &str, prefix: bool) -> Vec<String> {
    if !prefix && (name == "." || name == "..") {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|part| name.contains(**part))
        .map(|part| format!("may not contain '{part}'"))
        .collect()
}

/// Whether `namespace` could name a namespace at all (a DNS-1123 label).
pub(crate) fn is_namespace_name(namespace: &str) -> bool {
    namespace.len() <= LABEL_MAX && is_label_shape(namespace.as_bytes())
}

/// What is wrong with `name` under `rule`; a `generateName` prefix is checked with a trailing
/// `-` standing for the characters that will follow it.
fn problems(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        // As the API server masks it: the dash and the character before it become one `a`
        // (only the dash for a two-character prefix).
        let keep = if name.len() == 2 { 1 } else { name.len() - 2 };
        masked = format!("{}a", name.get(..keep).unwrap_or_default());
        masked.as_str()
    } else {
        name
    };
    let mut problems = match rule {
        NameRule::Subdomain => subdomain_problems(name),
        NameRule::Label => label_problems(name),
        NameRule::PathSegment => Vec::new(),
    };
    // Every kind's name is also checked as a path segment; the stricter rules imply it.
    if problems.is_empty() {
        problems = path_segment_problems(name, prefix);
    }
    problems
}

/// The 422 for a new object of `resource` whose `generate_name` and `name` break the kind's
/// rule (`None` when both are valid), with one cause per problem, as the API server words it.
/// A namespace's name also becomes the value of its `kubernetes.io/metadata.name` label, so a
/// name no label value can hold is refused for `metadata.labels` too.
pub(crate) fn check_new(
    resource: &ResourceInfo,
    generate_name: Option<&str>,
    name: &str,
) -> Result<(), Status> {
    let mut causes = Vec::new();
    let mut invalid = |field: &str, value: &str, problem: String| {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".to_owned(),
            message: format!("Invalid value: {}: {problem}", quoted(value)),
            field: field.to_owned(),
        });
    };
    if let Some(prefix) = generate_name.filter(|p| !p.is_empty()) {
        for problem in problems(resource.name_rule, prefix, true) {
            invalid("metadata.generateName", prefix, problem);
        }
    }
    for problem in problems(resource.name_rule, name, false) {
        invalid("metadata.name", name, problem);
    }
    if resource.group.is_empty() && resource.kind == "Namespace" {
        for problem in label_value_problems(name) {
            invalid("metadata.labels", name, problem);
        }
    }
    if causes.is_empty() {
        return Ok(());
    }
    Err(Status::invalid_causes(
        &resource.qualified_kind(),
        name,
        causes,
    ))
}

/// What is wrong with `value` as a label value: at most 63 bytes of alphanumerics, `-`, `_`
/// and `.`, beginning and ending with an alphanumeric (or empty).
fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > LABEL_MAX {
        problems.push(format!("must be no more than {LABEL_MAX} bytes"));
    }
    let bytes = value.as_bytes();
    let valid = bytes.is_empty()
        || (bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')));
    if !valid {
        problems.push(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', \
             '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  \
             or 'my_value',  or '12345', regex used for validation is \
             '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
                .to_owned(),
        );
    }
    problems
}

/// A value as Go's `%q` shows it (JSON string quoting is close enough for names).
fn quoted(value: &str) -> String {
    Value::String(value.to_owned()).to_string()
}

/// The 400 the API server answers when the name in a request path is no path segment
/// (`.`, `..`, or with `%` once decoded).
pub(crate) fn check_path_name(name: &str) -> Result<(), Status> {
    let problems = path_segment_problems(name, false);
    if problems.is_empty() {
        return Ok(());
    }
    Err(Status::bad_request(format!(
        "Name parameter invalid: {}: {}",
        quoted(name),
        problems.join(";")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomains_follow_the_api_servers_pattern_and_length() {
        for good in [
            "a",
            "a.b",
            "a-b.c-d",
            "0",
            &"a".repeat(253),
            &format!("{}.b", "a".repeat(64)),
        ] {
            assert!(subdomain_problems(good).is_empty(), "{good}");
        }
        for bad in [
            "", ".", "..", "a..b", "a.-b", "-a", "a-", "A", "a_b", "a/b", "a%b", "é",
        ] {
            assert_eq!(subdomain_problems(bad), [SUBDOMAIN_MESSAGE], "{bad}");
        }
        assert_eq!(
            subdomain_problems(&"a".repeat(254)),
            ["must be no more than 253 characters"]
        );
    }

    #[test]
    fn labels_refuse_dots_with_their_own_message() {
        assert!(label_problems(&"a".repeat(63)).is_empty());
        assert_eq!(label_problems("a.b"), ["must not contain dots"]);
        assert_eq!(label_problems(".."), [LABEL_MESSAGE]);
        assert_eq!(
            label_problems(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(is_namespace_name("kube-system"));
        assert!(!is_namespace_name("..") && !is_namespace_name("Bad_NS"));
    }

    #[test]
    fn path_segments_refuse_dots_slashes_and_percent_signs() {
        assert!(path_segment_problems("a:B_c", false).is_empty());
        assert_eq!(path_segment_problems("..", false), ["may not be '..'"]);
        assert!(path_segment_problems("..", true).is_empty());
        assert_eq!(
            path_segment_problems("a/%", false),
            ["may not contain '/'", "may not contain '%'"]
        );
        assert_eq!(check_path_name("..").unwrap_err().code, 400);
        assert!(check_path_name("Not_A_Subdomain").is_ok());
    }

    #[test]
    fn a_generate_name_may_end_with_a_dash() {
        assert!(problems(NameRule::Subdomain, "ab-", true).is_empty());
        assert_eq!(problems(NameRule::Subdomain, "ab.", true).len(), 1);
        assert_eq!(problems(NameRule::Subdomain, "-", true).len(), 1);
    }
}

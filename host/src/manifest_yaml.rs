//! YAML that `kubectl apply -f -` reads as it was meant: the output of `kubewasm rbac` and
//! `kubewasm webhooks`.
//!
//! kubectl (like every Go client, through `sigs.k8s.io/yaml`) reads YAML 1.1, where the plain
//! scalars `off`, `on`, `yes`, `no`, `y` and `n` are booleans; serializers that write YAML 1.2
//! leave those strings unquoted, so a namespace selector's label value `off` reached the API
//! server as `false` and the object was refused. Here a string is written plain only when it is
//! unambiguous in both versions, and otherwise as a JSON string (a valid YAML double-quoted
//! scalar).

use serde_json::{Map, Value};

/// `value` as a YAML document.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => write_map(map, 0, false, &mut out),
        Value::Array(items) if !items.is_empty() => write_seq(items, 0, &mut out),
        scalar => {
            out.push_str(&inline(scalar));
            out.push('\n');
        }
    }
    out
}

/// The entries of `map` at `indent`; with `continues_line` the first entry follows a `- `
/// already written.
fn write_map(map: &Map<String, Value>, indent: usize, continues_line: bool, out: &mut String) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !continues_line {
            pad(indent, out);
        }
        out.push_str(&string(key));
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push_str(":\n");
                write_map(inner, indent + 2, false, out);
            }
            // kubectl's own style: a sequence under a key at the key's indent.
            Value::Array(items) if !items.is_empty() => {
                out.push_str(":\n");
                write_seq(items, indent, out);
            }
            scalar => {
                out.push_str(": ");
                out.push_str(&inline(scalar));
                out.push('\n');
            }
        }
    }
}

fn write_seq(items: &[Value], indent: usize, out: &mut String) {
    for item in items {
        pad(indent, out);
        out.push_str("- ");
        match item {
            Value::Object(map) if !map.is_empty() => write_map(map, indent + 2, true, out),
            other => {
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn pad(indent: usize, out: &mut String) {
    out.extend(std::iter::repeat_n(' ', indent));
}

/// A value on one line: a scalar, or an empty or nested-in-a-sequence collection in JSON's
/// flow style (valid YAML).
fn inline(value: &Value) -> String {
    match value {
        Value::String(s) => string(s),
        other => other.to_string(),
    }
}

/// `s` plain when YAML 1.1 and 1.2 both read it back as this string, else JSON-quoted.
fn string(s: &str) -> String {
    if is_plain_safe(s) {
        s.to_owned()
    } else {
        Value::String(s.to_owned()).to_string()
    }
}

/// Letters, digits and `.`, `_`, `/`, `-` only, starting with a letter (so no number, date,
/// or indicator of either version), and none of the words YAML 1.1 or 1.2 read as a boolean or
/// null.
fn is_plain_safe(s: &str) -> bool {
    const WORDS: [&str; 13] = [
        "y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf", "infinity",
        "none",
    ];
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_yaml_1_1_reads_as_a_boolean_is_quoted_and_the_rest_reads_back_the_same() {
        let value = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "kubewasm", "labels": {}},
            "webhooks": [{
                "name": "default-requests.kubewasm.dev",
                "namespaceSelector": {"matchExpressions": [{
                    "key": "kubewasm.dev/default-requests",
                    "operator": "NotIn",
                    "values": ["off", "On", "y", "N", "yes", "no", "null", "~", ""],
                }]},
                "timeoutSeconds": 5,
                "sideEffects": "None",
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
                "caBundle": "LS0tLS1CRUdJTi==",
                "port": "8443",
                "when": "2026-12-02",
                "note": "two words: and a colon\nand a line",
                "nested": [[1, "off"], []],
                "nothing": null,
                "flag": true,
            }],
        });
        let yaml = to_string(&value);
        let back: Value = serde_norway::from_str(&yaml).expect("the output parses");
        assert_eq!(back, value, "{yaml}");
        for word in [
            "off",
            "On",
            "y",
            "N",
            "yes",
            "no",
            "null",
            "None",
            "8443",
            "2026-12-02",
        ] {
            assert!(
                yaml.contains(&format!("\"{word}\"")),
                "{word} quoted in:\n{yaml}"
            );
        }
        assert!(yaml.contains("- \"off\"\n"), "{yaml}");
        assert!(
            yaml.contains("kind: MutatingWebhookConfiguration\n"),
            "{yaml}"
        );
        assert!(yaml.contains("  name: kubewasm\n"), "{yaml}");
        assert!(
            yaml.contains("\n  name: default-requests.kubewasm.dev\n"),
            "{yaml}"
        );
        assert!(yaml.contains("\nwebhooks:\n- "), "{yaml}");
    }

    #[test]
    fn scalars_and_empty_collections_are_documents_too() {
        for value in [json!("off"), json!(3), json!({}), json!([]), json!(null)] {
            let back: Value = serde_norway::from_str(&to_string(&value)).unwrap();
            assert_eq!(back, value);
        }
    }
}

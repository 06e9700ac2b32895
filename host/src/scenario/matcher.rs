//! Partial matching of objects, as kuttl and Chainsaw assert: every field the expected object
//! names must be in the actual one with an equal value; fields it does not name are ignored.
//! A list matches a list of the same length whose items match in order.

use std::fmt;

use serde_json::Value;

/// One field that differs: where, what was expected, what is there (`None`: missing).
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// A path such as `.data.key` or `.spec.containers[0].image`.
    pub path: String,
    pub expected: Value,
    pub actual: Option<Value>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "."
        } else {
            &self.path
        };
        match &self.actual {
            None => write!(f, "{path}: expected {}, missing", self.expected),
            Some(actual) => write!(f, "{path}: expected {}, got {actual}", self.expected),
        }
    }
}

/// The fields where `actual` does not contain `expected`; empty when it matches.
pub fn matches(expected: &Value, actual: &Value) -> Vec<Mismatch> {
    let mut out = Vec::new();
    compare(expected, Some(actual), &mut String::new(), &mut out);
    out
}

fn compare(expected: &Value, actual: Option<&Value>, path: &mut String, out: &mut Vec<Mismatch>) {
    let mismatch = |path: &str, out: &mut Vec<Mismatch>| {
        out.push(Mismatch {
            path: path.to_owned(),
            expected: expected.clone(),
            actual: actual.cloned(),
        })
    };
    match (expected, actual) {
        // An expected null says the field is absent (or null).
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Object(want), Some(Value::Object(have))) => {
            for (key, value) in want {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                compare(value, have.get(key), path, out);
                path.truncate(len);
            }
        }
        (Value::Array(want), Some(Value::Array(have))) if want.len() == have.len() => {
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                compare(w, Some(h), path, out);
                path.truncate(len);
            }
        }
        (Value::Number(want), Some(Value::Number(have))) => {
            if want.as_f64() != have.as_f64() {
                mismatch(path, out);
            }
        }
        (want, Some(have)) if want == have => {}
        _ => mismatch(path, out),
    }
}

/// `apiVersion kind namespace/name` of an object, for messages.
pub fn describe(object: &Value) -> String {
    let text = |pointer: &str| {
        object
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let name = text("/metadata/name");
    let namespace = text("/metadata/namespace");
    let name = match (namespace, name) {
        (_, "") => "(any name)".to_owned(),
        ("", name) => name.to_owned(),
        (ns, name) => format!("{ns}/{name}"),
    };
    format!("{} {} {name}", text("/apiVersion"), text("/kind"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_the_expected_object_leaves_out_are_ignored() {
        let actual = json!({"metadata": {"name": "a", "uid": "1", "labels": {"x": "1", "y": "2"}}, "data": {"k": "v"}});
        assert!(matches(&json!({"metadata": {"labels": {"x": "1"}}}), &actual).is_empty());
        assert!(matches(&json!({}), &actual).is_empty());
        assert!(matches(&json!({"data": {"gone": null}}), &actual).is_empty());
    }

    #[test]
    fn each_differing_field_is_named_with_both_values() {
        let actual = json!({"data": {"k": "w"}, "spec": {"replicas": 2, "ports": [{"port": 80}]}});
        let found = matches(
            &json!({"data": {"k": "v", "extra": "e"}, "spec": {"replicas": 2.0, "ports": [{"port": 81}]}}),
            &actual,
        );
        let lines: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                r#".data.extra: expected "e", missing"#,
                r#".data.k: expected "v", got "w""#,
                r#".spec.ports[0].port: expected 81, got 80"#,
            ]
        );
    }

    #[test]
    fn lists_match_item_by_item_and_only_at_the_same_length() {
        let actual = json!({"l": [1, 2]});
        assert!(matches(&json!({"l": [1, 2]}), &actual).is_empty());
        assert_eq!(matches(&json!({"l": [1]}), &actual)[0].path, ".l");
        assert_eq!(matches(&json!({"l": [2, 1]}), &actual).len(), 2);
        assert_eq!(matches(&json!({"l": {"a": 1}}), &actual)[0].path, ".l");
        assert_eq!(
            matches(&json!({"s": null}), &json!({"s": "x"}))[0].path,
            ".s"
        );
    }

    #[test]
    fn objects_are_described_by_kind_and_name() {
        assert_eq!(
            describe(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}})
            ),
            "v1 ConfigMap ns/a"
        );
        assert_eq!(
            describe(&json!({"apiVersion": "v1", "kind": "Event"})),
            "v1 Event (any name)"
        );
    }
}

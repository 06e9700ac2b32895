//! Partial matching of objects, as kuttl and Chainsaw assert: every field the expected object
//! names must be in the actual one with an equal value; fields it does not name are ignored.
//! A list matches a list of the same length whose items match in order.
//!
//! Where a value alone cannot say what is expected, an operator does: a mapping whose keys all
//! start with `$`, in place of the value.
//!
//! - `{$any: true}`: the field is there, with any value;
//! - `{$absent: true}`: the field is not there (as `null`);
//! - `{$changed: true}`: its value differs from the one it had when the step began (a field that
//!   appears changed; one that goes away changed too);
//! - `{$matches: REGEX}`: a string some part of which the regular expression matches (anchor it
//!   with `^...$` for the whole);
//! - `{$count: N}`: a list with N items, or a mapping with N keys.
//!
//! Operators in one mapping must all hold (`{$changed: true, $matches: "^[0-9a-f]{64}$"}`).

use std::fmt;

use regex::Regex;
use serde_json::{Map, Value};

/// The most a `$matches` pattern may compile to (the regex crate's default is 10 MiB): a
/// scenario's pattern is a short check, and a huge one is a mistake to refuse at parse time.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// One field that differs: where, what was expected, what is there (`None`: missing).
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    /// A path such as `.data.key` or `.spec.containers[0].image`.
    pub path: String,
    /// What was expected, as the failure says it: a JSON value, or words for an operator.
    pub expected: String,
    /// What is there, as JSON, or `None` when the field is missing.
    pub found: Option<String>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() {
            "."
        } else {
            &self.path
        };
        match &self.found {
            None => write!(f, "{path}: expected {}, missing", self.expected),
            Some(found) => write!(f, "{path}: expected {}, got {found}", self.expected),
        }
    }
}

/// One operator of an expected value.
enum Operator<'a> {
    Any,
    Absent,
    Changed,
    Matches(&'a str),
    Count(u64),
}

const OPERATORS: &str = "$any, $absent, $changed, $matches, $count";

/// The operators of `expected` when it is an operator mapping (its keys all start with `$`),
/// or why it is not a valid one.
fn operators(expected: &Map<String, Value>) -> Option<Result<Vec<Operator<'_>>, String>> {
    if expected.is_empty() || !expected.keys().all(|k| k.starts_with('$')) {
        return None;
    }
    let flag = |key: &str, value: &Value, op| match value {
        Value::Bool(true) => Ok(op),
        _ => Err(format!("`{key}` takes `true`, not {value}")),
    };
    let parsed: Result<Vec<Operator<'_>>, String> = expected
        .iter()
        .map(|(key, value)| match key.as_str() {
            "$any" => flag(key, value, Operator::Any),
            "$absent" => flag(key, value, Operator::Absent),
            "$changed" => flag(key, value, Operator::Changed),
            "$matches" => value
                .as_str()
                .map(Operator::Matches)
                .ok_or_else(|| format!("`$matches` takes a regular expression, not {value}")),
            "$count" => value
                .as_u64()
                .map(Operator::Count)
                .ok_or_else(|| format!("`$count` takes a whole number, not {value}")),
            other => Err(format!(
                "`{other}` is not an assert operator (one of {OPERATORS})"
            )),
        })
        .collect();
    Some(parsed.and_then(|ops| {
        if ops.len() > 1 && ops.iter().any(|op| matches!(op, Operator::Absent)) {
            Err("`$absent` stands alone: an absent field has no value to check".into())
        } else {
            Ok(ops)
        }
    }))
}

fn pattern(text: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(text)
        .size_limit(PATTERN_SIZE_LIMIT)
        .build()
}

/// Checks the operators in an expected object: each known, with a value of its kind, each
/// `$matches` a regular expression that compiles; `$changed` only where `changed_allowed`
/// (it needs the object as it was when the step began).
pub fn check_operators(expected: &Value, changed_allowed: bool) -> Result<(), String> {
    check_at(expected, changed_allowed, &mut String::new())
}

fn check_at(expected: &Value, changed_allowed: bool, path: &mut String) -> Result<(), String> {
    match expected {
        Value::Object(map) => match operators(map) {
            Some(ops) => {
                let here = if path.is_empty() { "." } else { path.as_str() };
                let at = |e: String| format!("{here}: {e}");
                for op in ops.map_err(&at)? {
                    match op {
                        Operator::Changed if !changed_allowed => {
                            return Err(at(
                                "`$changed` compares with the object when the step began: \
                                 it is for `exist` only"
                                    .into(),
                            ));
                        }
                        Operator::Matches(text) => {
                            pattern(text).map_err(|e| {
                                at(format!(
                                    "`$matches` {text:?} is not a regular expression: {e}"
                                ))
                            })?;
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
            None => {
                for (key, value) in map {
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    check_at(value, changed_allowed, path)?;
                    path.truncate(len);
                }
                Ok(())
            }
        },
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check_at(item, changed_allowed, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Whether `expected` uses `$changed` anywhere: only then is the object read when the step
/// begins.
pub fn uses_changed(expected: &Value) -> bool {
    match expected {
        Value::Object(map) => map
            .iter()
            .any(|(key, value)| key == "$changed" || uses_changed(value)),
        Value::Array(items) => items.iter().any(uses_changed),
        _ => false,
    }
}

/// The fields where `actual` does not contain `expected`; empty when it matches.
pub fn matches(expected: &Value, actual: &Value) -> Vec<Mismatch> {
    matches_since(expected, actual, None)
}

/// [`matches`], with `previous` the object as it was when the step began (`None`: it did not
/// exist), which `$changed` compares with.
pub fn matches_since(expected: &Value, actual: &Value, previous: Option<&Value>) -> Vec<Mismatch> {
    let mut out = Vec::new();
    compare(
        expected,
        Some(actual),
        previous,
        &mut String::new(),
        &mut out,
    );
    out
}

fn compare(
    expected: &Value,
    actual: Option<&Value>,
    previous: Option<&Value>,
    path: &mut String,
    out: &mut Vec<Mismatch>,
) {
    let mismatch = |path: &str, out: &mut Vec<Mismatch>| {
        out.push(Mismatch {
            path: path.to_owned(),
            expected: expected.to_string(),
            found: actual.map(Value::to_string),
        })
    };
    match (expected, actual) {
        (Value::Object(want), _) if operators(want).is_some() => {
            apply_operators(want, actual, previous, path, out)
        }
        // An expected null says the field is absent (or null).
        (Value::Null, None | Some(Value::Null)) => {}
        (Value::Object(want), Some(Value::Object(have))) => {
            for (key, value) in want {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                let before = previous.and_then(|p| p.get(key));
                compare(value, have.get(key), before, path, out);
                path.truncate(len);
            }
        }
        (Value::Array(want), Some(Value::Array(have))) if want.len() == have.len() => {
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let before = previous.and_then(|p| p.get(i));
                compare(w, Some(h), before, path, out);
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

/// Holds `actual` (and `previous`, its value when the step began) to each operator of `want`.
fn apply_operators(
    want: &Map<String, Value>,
    actual: Option<&Value>,
    previous: Option<&Value>,
    path: &str,
    out: &mut Vec<Mismatch>,
) {
    let actual = actual.filter(|v| !v.is_null());
    let previous = previous.filter(|v| !v.is_null());
    let ops = match operators(want) {
        Some(Ok(ops)) => ops,
        // Refused when the scenario was parsed; said again rather than passed.
        Some(Err(e)) => {
            out.push(Mismatch {
                path: path.to_owned(),
                expected: e,
                found: actual.map(Value::to_string),
            });
            return;
        }
        None => return,
    };
    for op in ops {
        let expected = match op {
            Operator::Any if actual.is_some() => continue,
            Operator::Any => "any value".to_owned(),
            Operator::Absent if actual.is_none() => continue,
            Operator::Absent => "no value".to_owned(),
            Operator::Changed if actual != previous => continue,
            Operator::Changed => match previous {
                Some(before) => format!("a change from {before}"),
                None => "a change (it was missing when the step began)".to_owned(),
            },
            Operator::Matches(text) => match pattern(text) {
                Ok(re)
                    if actual
                        .and_then(Value::as_str)
                        .is_some_and(|s| re.is_match(s)) =>
                {
                    continue;
                }
                Ok(_) => format!("a string matching /{text}/"),
                Err(e) => {
                    format!("a string matching /{text}/, which is not a regular expression ({e})")
                }
            },
            Operator::Count(n) => {
                let items = match actual {
                    Some(Value::Array(items)) => Some(items.len()),
                    Some(Value::Object(map)) => Some(map.len()),
                    _ => None,
                };
                if items.is_some_and(|len| len as u64 == n) {
                    continue;
                }
                if let Some(len) = items {
                    out.push(Mismatch {
                        path: path.to_owned(),
                        expected: format!("{n} items"),
                        found: Some(format!("{len}")),
                    });
                    continue;
                }
                format!("a list or mapping of {n} items")
            }
        };
        out.push(Mismatch {
            path: path.to_owned(),
            expected,
            found: actual.map(Value::to_string),
        });
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

    fn lines(found: Vec<Mismatch>) -> Vec<String> {
        found.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn operators_say_any_value_absent_a_pattern_and_a_count() {
        let actual = json!({"data": {"hash": "0f3a", "mode": "on"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}});
        let holds = json!({"data": {"hash": {"$matches": "^[0-9a-f]{4}$"}, "mode": {"$any": true}, "gone": {"$absent": true}},
            "spec": {"ports": {"$count": 2}}, "metadata": {"$absent": true}});
        assert_eq!(lines(matches(&holds, &actual)), Vec::<String>::new());
        let fails = json!({"data": {"hash": {"$matches": "^[0-9a-f]{64}$"}, "other": {"$any": true}, "mode": {"$absent": true}},
            "spec": {"ports": {"$count": 3}}, "status": {"$count": 0}});
        assert_eq!(
            lines(matches(&fails, &actual)),
            [
                r#".data.hash: expected a string matching /^[0-9a-f]{64}$/, got "0f3a""#,
                r#".data.mode: expected no value, got "on""#,
                ".data.other: expected any value, missing",
                ".spec.ports: expected 3 items, got 2",
                ".status: expected a list or mapping of 0 items, missing",
            ]
        );
        // A pattern matches strings only; `$matches` and `$any` together must both hold.
        let both = json!({"n": {"$matches": "1", "$any": true}});
        assert_eq!(
            lines(matches(&both, &json!({"n": 1}))),
            [".n: expected a string matching /1/, got 1"]
        );
        assert!(matches(&both, &json!({"n": "x1"})).is_empty());
    }

    #[test]
    fn changed_compares_with_the_object_when_the_step_began() {
        let expected = json!({"metadata": {"annotations": {"hash": {"$changed": true}}}, "data": {"list": [{"$changed": true}]}});
        let before = json!({"metadata": {"annotations": {"hash": "a"}}, "data": {"list": [1]}});
        let after = json!({"metadata": {"annotations": {"hash": "b"}}, "data": {"list": [2]}});
        assert!(matches_since(&expected, &after, Some(&before)).is_empty());
        assert_eq!(
            lines(matches_since(&expected, &before, Some(&before))),
            [
                ".data.list[0]: expected a change from 1, got 1",
                r#".metadata.annotations.hash: expected a change from "a", got "a""#,
            ]
        );
        // Appearing is a change; so is going away; an object that did not exist had nothing.
        let appears = json!({"data": {"k": {"$changed": true}}});
        assert!(matches_since(&appears, &json!({"data": {"k": "v"}}), Some(&json!({}))).is_empty());
        assert!(matches_since(&appears, &json!({"data": {"k": "v"}}), None).is_empty());
        assert!(
            matches_since(
                &appears,
                &json!({"data": {}}),
                Some(&json!({"data": {"k": "v"}}))
            )
            .is_empty()
        );
        assert_eq!(
            lines(matches_since(&appears, &json!({"data": {"k": null}}), None)),
            [".data.k: expected a change (it was missing when the step began), missing"]
        );
    }

    #[test]
    fn operators_are_checked_before_the_run() {
        let ok =
            json!({"data": {"k": {"$changed": true, "$matches": "^a+$"}}, "l": [{"$count": 1}]});
        assert_eq!(check_operators(&ok, true), Ok(()));
        let cases = [
            (
                json!({"data": {"k": {"$chnaged": true}}}),
                true,
                ".data.k: `$chnaged` is not an assert operator",
            ),
            (
                json!({"k": {"$any": false}}),
                true,
                ".k: `$any` takes `true`, not false",
            ),
            (
                json!({"k": {"$absent": true, "$any": true}}),
                true,
                "`$absent` stands alone",
            ),
            (
                json!({"k": {"$count": -1}}),
                true,
                "`$count` takes a whole number, not -1",
            ),
            (
                json!({"k": {"$matches": 7}}),
                true,
                "takes a regular expression, not 7",
            ),
            (
                json!({"l": [{"$matches": "(unclosed"}]}),
                true,
                ".l[0]: `$matches` \"(unclosed\" is not a regular expression",
            ),
            (
                json!({"k": {"$matches": "a{1000}{1000}"}}),
                true,
                "is not a regular expression",
            ),
            (json!({"k": {"$changed": true}}), false, "for `exist` only"),
        ];
        for (expected, changed_allowed, want) in cases {
            let err = check_operators(&expected, changed_allowed).unwrap_err();
            assert!(err.contains(want), "{expected}: {err}");
        }
        // A mapping with a key not starting with `$` is plain data, compared as it is.
        let data = json!({"$ref": "#/x", "type": "object"});
        assert_eq!(check_operators(&data, false), Ok(()));
        assert!(matches(&json!({"s": data.clone()}), &json!({"s": data})).is_empty());
        assert!(uses_changed(&json!({"a": [{"b": {"$changed": true}}]})));
        assert!(!uses_changed(&json!({"a": {"$any": true}})));
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

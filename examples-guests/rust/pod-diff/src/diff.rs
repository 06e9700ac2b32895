//! A field-level diff of two JSON documents, as short human-readable changes.

use std::fmt;

use kubewasm_guest::serde_json::Value;

/// Fields that change on every write, or only count changes the diff already shows.
const IGNORED: &[&str] = &[
    "metadata.resourceVersion",
    "metadata.generation",
    "metadata.managedFields",
];

/// Longest value text shown before it is cut with `…`.
const MAX_VALUE_CHARS: usize = 60;

/// One difference at a dotted path.
#[derive(Debug, PartialEq)]
pub enum Change<'a> {
    Changed {
        path: String,
        old: &'a Value,
        new: &'a Value,
    },
    Added {
        path: String,
        new: &'a Value,
    },
    Removed {
        path: String,
    },
}

/// Every difference between `old` and `new`, in field order: objects are compared key by key,
/// lists of the same length item by item (`containers.0.image`), anything else as a whole.
pub fn diff<'a>(old: &'a Value, new: &'a Value) -> Vec<Change<'a>> {
    let mut changes = Vec::new();
    walk(String::new(), old, new, &mut changes);
    changes
}

fn walk<'a>(path: String, old: &'a Value, new: &'a Value, changes: &mut Vec<Change<'a>>) {
    if IGNORED.contains(&path.as_str()) || old == new {
        return;
    }
    match (old, new) {
        (Value::Object(old_map), Value::Object(new_map)) => {
            for (key, old_value) in old_map {
                let child = join(&path, key);
                match new_map.get(key) {
                    Some(new_value) => walk(child, old_value, new_value, changes),
                    None if !IGNORED.contains(&child.as_str()) => {
                        changes.push(Change::Removed { path: child })
                    }
                    None => {}
                }
            }
            for (key, new_value) in new_map {
                let child = join(&path, key);
                if !old_map.contains_key(key) && !IGNORED.contains(&child.as_str()) {
                    changes.push(Change::Added {
                        path: child,
                        new: new_value,
                    });
                }
            }
        }
        (Value::Array(old_items), Value::Array(new_items))
            if old_items.len() == new_items.len() =>
        {
            for (at, (old_item, new_item)) in old_items.iter().zip(new_items).enumerate() {
                walk(join(&path, &at.to_string()), old_item, new_item, changes);
            }
        }
        _ => changes.push(Change::Changed { path, old, new }),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// `path: OLD -> NEW`, `+path=NEW`, `-path`.
impl fmt::Display for Change<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Changed { path, old, new } => {
                write!(f, "{path}: {} -> {}", short(old), short(new))
            }
            Change::Added { path, new } => write!(f, "+{path}={}", short(new)),
            Change::Removed { path } => write!(f, "-{path}"),
        }
    }
}

/// Compact JSON, cut to [`MAX_VALUE_CHARS`] characters.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text;
    }
    let mut cut: String = text.chars().take(MAX_VALUE_CHARS).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json::json;

    use super::*;

    #[test]
    fn nested_objects_are_compared_key_by_key() {
        let old = json!({"status": {"phase": "Pending", "podIP": "10.0.0.1"}});
        let new = json!({"status": {"phase": "Running", "podIP": "10.0.0.1"}});
        let changes: Vec<_> = diff(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(changes, [r#"status.phase: "Pending" -> "Running""#]);
    }

    #[test]
    fn lists_of_equal_length_are_compared_item_by_item() {
        let old = json!({"spec": {"containers": [{"image": "web:1"}, {"image": "log:1"}]}});
        let new = json!({"spec": {"containers": [{"image": "web:2"}, {"image": "log:1"}]}});
        let changes: Vec<_> = diff(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(changes, [r#"spec.containers.0.image: "web:1" -> "web:2""#]);
        let grown = json!({"spec": {"containers": [{"image": "web:1"}]}});
        assert_eq!(diff(&grown, &new).len(), 1);
    }

    #[test]
    fn ignored_fields_never_show_even_when_added_or_removed() {
        let old = json!({"metadata": {"resourceVersion": "1"}});
        let new = json!({"metadata": {"managedFields": []}});
        assert!(diff(&old, &new).is_empty());
    }

    #[test]
    fn long_values_are_cut() {
        let old = json!({"data": {"blob": "a".repeat(100)}});
        let new = json!({"data": {}});
        let added = diff(&new, &old)[0].to_string();
        assert!(added.ends_with('…'));
        assert_eq!(
            added.chars().count(),
            "+data.blob=".len() + MAX_VALUE_CHARS + 1
        );
    }
}

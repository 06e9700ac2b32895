//! [`Patch`]: the edits a mutating policy makes to a review's object, written as paths and
//! values. The contract takes the whole mutated object back and the host computes the JSONPatch
//! the API server applies, so a patch here is applied to a copy of the object
//! ([`Review::patched`](crate::Review::patched)) rather than sent as operations.

use std::fmt;

use serde_json::{Map, Value};

/// Edits of a JSON object, applied in order. A path is a list of segments: object keys as they
/// are (no JSON-pointer escaping: `["metadata", "annotations", "example.com/owner"]`), and in
/// an array a decimal index, or `-` for "after the last element" when setting.
///
/// ```
/// use kubewasm_guest_v0_3::Patch;
/// use kubewasm_guest_v0_3::serde_json::json;
///
/// let patch = Patch::new()
///     .set(&["metadata", "annotations", "example.com/checked-by"], "policy")
///     .set_default(&["spec", "replicas"], 1)
///     .remove(&["metadata", "labels", "debug"]);
/// let mut object = json!({"metadata": {"labels": {"debug": "on", "app": "web"}}});
/// patch.apply(&mut object)?;
/// assert_eq!(
///     object,
///     json!({
///         "metadata": {
///             "labels": {"app": "web"},
///             "annotations": {"example.com/checked-by": "policy"},
///         },
///         "spec": {"replicas": 1},
///     })
/// );
/// # Ok::<(), kubewasm_guest_v0_3::PatchError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Patch {
    edits: Vec<Edit>,
}

#[derive(Debug, Clone, PartialEq)]
enum Edit {
    /// `value` at `path`, creating missing objects on the way; with `keep`, an existing value
    /// stays.
    Set {
        path: Vec<String>,
        value: Value,
        keep: bool,
    },
    /// Nothing at `path`; a path that is already absent is no error.
    Remove { path: Vec<String> },
}

/// Why a patch could not be applied: the object's shape is not what a path says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError {
    /// The path of the edit, joined with `/`.
    pub path: String,
    pub reason: String,
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "patching /{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for PatchError {}

impl Patch {
    /// A patch that changes nothing.
    pub fn new() -> Patch {
        Patch::default()
    }

    /// Sets `path` to `value`, replacing what is there and creating missing objects on the way.
    pub fn set(self, path: &[&str], value: impl Into<Value>) -> Patch {
        self.push_set(path, value.into(), false)
    }

    /// Sets `path` to `value` only when nothing is there: a default that leaves what the user
    /// wrote alone.
    pub fn set_default(self, path: &[&str], value: impl Into<Value>) -> Patch {
        self.push_set(path, value.into(), true)
    }

    /// Removes what is at `path` (nothing to remove is not an error).
    pub fn remove(mut self, path: &[&str]) -> Patch {
        self.edits.push(Edit::Remove { path: owned(path) });
        self
    }

    /// Whether the patch has no edits.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// Applies every edit to `object` in order. On an error `object` may hold the edits before
    /// the failing one: apply to a copy (as [`Review::patched`](crate::Review::patched) does)
    /// when that matters.
    pub fn apply(&self, object: &mut Value) -> Result<(), PatchError> {
        for edit in &self.edits {
            match edit {
                Edit::Set { path, value, keep } => set(object, path, value, *keep),
                Edit::Remove { path } => remove(object, path),
            }
            .map_err(|reason| PatchError {
                path: match edit {
                    Edit::Set { path, .. } | Edit::Remove { path } => path.join("/"),
                },
                reason,
            })?;
        }
        Ok(())
    }

    fn push_set(mut self, path: &[&str], value: Value, keep: bool) -> Patch {
        self.edits.push(Edit::Set {
            path: owned(path),
            value,
            keep,
        });
        self
    }
}

fn owned(path: &[&str]) -> Vec<String> {
    path.iter().map(|s| (*s).to_owned()).collect()
}

/// The element `segment` names in `array`: an index below its length.
fn index(array: &[Value], segment: &str) -> Result<usize, String> {
    segment
        .parse::<usize>()
        .ok()
        .filter(|&i| i < array.len())
        .ok_or_else(|| format!("`{segment}` is not an index of an array of {}", array.len()))
}

fn set(object: &mut Value, path: &[String], value: &Value, keep: bool) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("an empty path names the whole object: set its fields instead".into());
    };
    let mut at = object;
    for segment in parents {
        at = match at {
            Value::Object(map) => map
                .entry(segment.as_str())
                .or_insert_with(|| Value::Object(Map::new())),
            Value::Array(array) => {
                let i = index(array, segment)?;
                &mut array[i]
            }
            other => return Err(format!("`{segment}` is inside {}", kind(other))),
        };
        if at.is_null() {
            *at = Value::Object(Map::new());
        }
    }
    match at {
        Value::Object(map) => {
            if !(keep && map.get(last).is_some_and(|v| !v.is_null())) {
                map.insert(last.clone(), value.clone());
            }
        }
        Value::Array(array) if last == "-" => array.push(value.clone()),
        Value::Array(array) => {
            let i = index(array, last)?;
            if !keep || array[i].is_null() {
                array[i] = value.clone();
            }
        }
        other => return Err(format!("`{last}` is inside {}", kind(other))),
    }
    Ok(())
}

fn remove(object: &mut Value, path: &[String]) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("an empty path names the whole object: it cannot be removed".into());
    };
    let mut at = object;
    for segment in parents {
        let next = match at {
            Value::Object(map) => map.get_mut(segment.as_str()),
            Value::Array(array) => segment
                .parse::<usize>()
                .ok()
                .and_then(move |i| array.get_mut(i)),
            _ => None,
        };
        match next {
            Some(value) => at = value,
            None => return Ok(()),
        }
    }
    match at {
        Value::Object(map) => {
            map.remove(last.as_str());
        }
        Value::Array(array) => {
            if let Some(i) = last.parse::<usize>().ok().filter(|&i| i < array.len()) {
                array.remove(i);
            }
        }
        _ => {}
    }
    Ok(())
}

/// What a value is, for an error message.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn set_creates_missing_objects_and_replaces_what_is_there() {
        let mut object = json!({"metadata": {"name": "app", "labels": null}});
        Patch::new()
            .set(&["metadata", "labels", "tier"], "web")
            .set(&["metadata", "name"], "other")
            .apply(&mut object)
            .unwrap();
        assert_eq!(
            object,
            json!({"metadata": {"name": "other", "labels": {"tier": "web"}}})
        );
    }

    #[test]
    fn set_default_keeps_an_existing_value_and_fills_an_absent_or_null_one() {
        let mut object = json!({"spec": {"replicas": 3, "paused": null}});
        Patch::new()
            .set_default(&["spec", "replicas"], 1)
            .set_default(&["spec", "paused"], false)
            .set_default(&["spec", "strategy", "type"], "Recreate")
            .apply(&mut object)
            .unwrap();
        assert_eq!(
            object,
            json!({"spec": {"replicas": 3, "paused": false, "strategy": {"type": "Recreate"}}})
        );
    }

    #[test]
    fn arrays_are_walked_by_index_and_dash_appends() {
        let mut object = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        Patch::new()
            .set(&["spec", "containers", "1", "image"], "nginx")
            .set(&["spec", "containers", "-"], json!({"name": "c"}))
            .remove(&["spec", "containers", "0"])
            .apply(&mut object)
            .unwrap();
        assert_eq!(
            object,
            json!({"spec": {"containers": [{"name": "b", "image": "nginx"}, {"name": "c"}]}})
        );
    }

    #[test]
    fn a_path_through_a_scalar_or_past_an_array_says_where_it_failed() {
        let mut object = json!({"data": "text", "items": [1]});
        let err = Patch::new()
            .set(&["data", "key"], 1)
            .apply(&mut object)
            .unwrap_err();
        assert_eq!(err.path, "data/key");
        assert!(err.reason.contains("inside a string"), "{err}");
        let err = Patch::new()
            .set(&["items", "5"], 1)
            .apply(&mut object)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`5` is not an index of an array of 1"),
            "{err}"
        );
        assert!(Patch::new().set(&[], 1).apply(&mut object).is_err());
    }

    #[test]
    fn removing_what_is_absent_changes_nothing() {
        let original = json!({"metadata": {"labels": {"a": "1"}}, "list": [0]});
        let mut object = original.clone();
        Patch::new()
            .remove(&["metadata", "annotations", "x"])
            .remove(&["metadata", "labels", "b"])
            .remove(&["list", "7"])
            .remove(&["list", "0", "deeper"])
            .apply(&mut object)
            .unwrap();
        assert_eq!(object, original);
    }
}

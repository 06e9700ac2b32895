//! Deletion propagation: what happens to an owner's dependents when it is deleted, as
//! DeleteOptions ask for it or the owner's finalizers (`orphan`, `foregroundDeletion`) record it.
//! The garbage collector (`gc.rs`) carries it out; a delete (`writes.rs`) chooses it.

use serde_json::{Value, json};

use crate::Status;

/// The finalizer that keeps an owner while its blocking dependents are deleted.
pub(crate) const FOREGROUND: &str = "foregroundDeletion";
/// The finalizer that asks for an owner's dependents to be orphaned.
pub(crate) const ORPHAN: &str = "orphan";

/// What happens to an owner's dependents when it is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    /// The policy DeleteOptions ask for (`propagationPolicy`, or the older `orphanDependents`),
    /// if any; 400 on an unknown policy.
    pub fn requested(options: &Value) -> Result<Option<Propagation>, Status> {
        match options.get("propagationPolicy").and_then(Value::as_str) {
            Some("Background") => return Ok(Some(Propagation::Background)),
            Some("Foreground") => return Ok(Some(Propagation::Foreground)),
            Some("Orphan") => return Ok(Some(Propagation::Orphan)),
            Some(other) => {
                return Err(Status::invalid(format!(
                    "DeleteOptions.propagationPolicy: Unsupported value: \"{other}\": supported \
                     values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
            None => {}
        }
        Ok(
            match options.get("orphanDependents").and_then(Value::as_bool) {
                Some(true) => Some(Propagation::Orphan),
                Some(false) => Some(Propagation::Background),
                None => None,
            },
        )
    }

    /// The policy for deleting `object`: the requested one, else the one its finalizers ask for,
    /// else background.
    pub fn for_object(requested: Option<Propagation>, object: &Value) -> Propagation {
        requested.unwrap_or_else(|| {
            let finalizers = finalizers(object);
            if finalizers.contains(&ORPHAN) {
                Propagation::Orphan
            } else if finalizers.contains(&FOREGROUND) {
                Propagation::Foreground
            } else {
                Propagation::Background
            }
        })
    }

    /// DeleteOptions asking for this policy.
    pub fn as_options(self) -> Value {
        let policy = match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        };
        json!({"propagationPolicy": policy})
    }
}

/// The finalizers an object carries.
pub(crate) fn finalizers(object: &Value) -> Vec<&str> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn propagation_comes_from_options_then_finalizers() {
        let none = Value::Null;
        assert_eq!(Propagation::requested(&none).unwrap(), None);
        let orphan = json!({"orphanDependents": true});
        assert_eq!(
            Propagation::requested(&orphan).unwrap(),
            Some(Propagation::Orphan)
        );
        let fg = json!({"propagationPolicy": "Foreground"});
        assert_eq!(
            Propagation::requested(&fg).unwrap(),
            Some(Propagation::Foreground)
        );
        assert!(Propagation::requested(&json!({"propagationPolicy": "Later"})).is_err());
        let object = json!({"metadata": {"finalizers": ["orphan"]}});
        assert_eq!(Propagation::for_object(None, &object), Propagation::Orphan);
        assert_eq!(
            Propagation::for_object(Some(Propagation::Background), &object),
            Propagation::Background
        );
        assert_eq!(
            Propagation::for_object(None, &json!({})),
            Propagation::Background
        );
    }
}

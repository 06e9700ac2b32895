//! A one-line summary of an object's `spec`.

use kubewasm_guest::DynamicObject;
use kubewasm_guest::serde_json::Value;

/// `key=value` for each top-level field of `spec` in name order (objects and arrays shown as
/// `{..}` and `[..]`), or `no spec`.
pub fn summary(object: &DynamicObject) -> String {
    let Some(Value::Object(spec)) = object.data.get("spec") else {
        return "no spec".to_owned();
    };
    let mut fields: Vec<(&String, &Value)> = spec.iter().collect();
    fields.sort_by_key(|(name, _)| *name);
    let text: Vec<String> = fields
        .into_iter()
        .map(|(name, value)| {
            let value = match value {
                Value::String(s) => s.clone(),
                Value::Object(_) => "{..}".to_owned(),
                Value::Array(_) => "[..]".to_owned(),
                other => other.to_string(),
            };
            format!("{name}={value}")
        })
        .collect();
    if text.is_empty() {
        "empty spec".to_owned()
    } else {
        text.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubewasm_guest::serde_json::{self, json};

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn spec_fields_in_name_order() {
        let backup = object(json!({
            "metadata": {"name": "nightly", "namespace": "shop"},
            "spec": {"target": "configmap/web-config", "schedule": "0 3 * * *", "keep": 7,
                     "paused": false, "labels": {"a": "b"}}
        }));
        assert_eq!(
            summary(&backup),
            "keep=7 labels={..} paused=false schedule=0 3 * * * target=configmap/web-config"
        );
        assert_eq!(summary(&object(json!({"metadata": {}}))), "no spec");
        assert_eq!(
            summary(&object(json!({"metadata": {}, "spec": {}}))),
            "empty spec"
        );
    }
}

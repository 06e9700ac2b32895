//! Reading manifests: YAML or JSON files, several documents per file, `List` kinds expanded.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;
use serde_json::Value;

/// Every object in the `.yaml`, `.yml` and `.json` files directly in `dir`, files in name
/// order; Namespaces first, then CustomResourceDefinitions, so later objects can use them.
pub(crate) fn read_dir(dir: &Path) -> anyhow::Result<Vec<(PathBuf, Value)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading manifests directory {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("reading {}", file.display()))?;
        for document in
            parse_documents(&text).with_context(|| format!("parsing {}", file.display()))?
        {
            objects.push((file.clone(), document));
        }
    }
    objects.sort_by_key(|(_, o)| match o.get("kind").and_then(Value::as_str) {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    });
    Ok(objects)
}

/// The objects in one multi-document YAML (or JSON) text; empty documents are skipped.
pub(crate) fn parse_documents(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut objects = Vec::new();
    for document in serde_norway::Deserializer::from_str(text) {
        let value = Value::deserialize(document)?;
        expand(value, &mut objects);
    }
    Ok(objects)
}

fn expand(value: Value, into: &mut Vec<Value>) {
    match value {
        Value::Null => {}
        Value::Object(mut map)
            if map
                .get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k == "List" || k.ends_with("List"))
                && map.get("items").is_some_and(Value::is_array) =>
        {
            if let Some(Value::Array(items)) = map.remove("items") {
                for item in items {
                    expand(item, into);
                }
            }
        }
        other => into.push(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists_are_flattened() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n";
        let objects = parse_documents(text).unwrap();
        let kinds: Vec<_> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["ConfigMap", "Secret"]);
    }

    #[test]
    fn malformed_yaml_is_an_error() {
        assert!(parse_documents("a: [b").is_err());
    }
}

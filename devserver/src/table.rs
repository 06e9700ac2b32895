//! kubectl's Table output (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): a few
//! columns per kind, computed from the stored objects, so `kubectl get` shows useful columns.

use serde_json::{Map, Value, json};

use crate::Status;
use crate::object::StoredObject;
use crate::resource::ResourceInfo;

/// Whether an `Accept` header asks for a Table.
pub(crate) fn wanted(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("as=Table"))
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    /// A `PartialObjectMetadata` (the default).
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` parameter.
    pub fn parse(param: Option<&str>) -> Result<IncludeObject, Status> {
        match param {
            None | Some("") | Some("Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(other) => Err(Status::bad_request(format!(
                "includeObject must be None, Metadata or Object, not {other:?}"
            ))),
        }
    }
}

/// A cell from the object and the current time (Unix seconds).
type Cell = fn(&Value, i64) -> Value;

/// One column: its name, its OpenAPI type, and how a cell is computed.
struct Column {
    name: String,
    kind: String,
    source: Source,
}

/// Where a cell comes from.
enum Source {
    /// Computed from the object and the current time.
    Computed(Cell),
    /// A CRD printer column: the value at a JSON pointer; dates are shown as ages.
    Path { pointer: String, date: bool },
}

fn column(name: &str, kind: &str, cell: Cell) -> Column {
    Column {
        name: name.to_owned(),
        kind: kind.to_owned(),
        source: Source::Computed(cell),
    }
}

impl Column {
    fn cell(&self, object: &Value, now: i64) -> Value {
        match &self.source {
            Source::Computed(cell) => cell(object, now),
            Source::Path { pointer, date } => match object.pointer(pointer) {
                None | Some(Value::Null) => Value::String("<none>".to_owned()),
                Some(Value::String(t)) if *date => {
                    Value::String(unix_seconds(t).map_or_else(|| t.clone(), |then| age(now, then)))
                }
                Some(value) => value.clone(),
            },
        }
    }
}

fn text(object: &Value, pointer: &str) -> String {
    object
        .pointer(pointer)
        .map(|v| match v {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

fn int(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn len(object: &Value, pointer: &str) -> usize {
    match object.pointer(pointer) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn name(object: &Value, _: i64) -> Value {
    Value::String(text(object, "/metadata/name"))
}

fn created(object: &Value, now: i64) -> Value {
    let created = object
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(unix_seconds);
    Value::String(created.map_or_else(|| "<unknown>".to_owned(), |t| age(now, t)))
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp; `None` if `text` is not one.
fn unix_seconds(text: &str) -> Option<i64> {
    text.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

/// The age at `now` of something from `then` (Unix seconds), as kubectl prints it; a time
/// in the future is an age of zero.
fn age(now: i64, then: i64) -> String {
    human_duration(u64::try_from(now.saturating_sub(then)).unwrap_or(0))
}

/// An age the way kubectl prints it: `45s`, `3m12s`, `15m`, `5h3m`, `2d4h`, `40d`, `3y20d`.
pub(crate) fn human_duration(seconds: u64) -> String {
    let minutes = seconds / 60;
    let hours = minutes / 60;
    let days = hours / 24;
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        }
    } else if minutes < 180 {
        format!("{minutes}m")
    } else if hours < 8 {
        match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        match hours % 24 {
            0 => format!("{days}d"),
            h => format!("{days}d{h}h"),
        }
    } else if hours < 24 * 365 * 2 {
        format!("{days}d")
    } else if hours < 24 * 365 * 8 {
        match days % 365 {
            0 => format!("{}y", days / 365),
            d => format!("{}y{d}d", days / 365),
        }
    } else {
        format!("{}y", days / 365)
    }
}

fn or_none(value: String) -> Value {
    Value::String(if value.is_empty() {
        "<none>".to_owned()
    } else {
        value
    })
}

fn columns(resource: &ResourceInfo) -> Vec<Column> {
    let mut columns = vec![column("Name", "string", name)];
    let extra: Vec<Column> = match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "ConfigMap") => vec![column("Data", "integer", |o, _| {
            Value::from(len(o, "/data") + len(o, "/binaryData"))
        })],
        ("", "Secret") => vec![
            column("Type", "string", |o, _| Value::String(text(o, "/type"))),
            column("Data", "integer", |o, _| Value::from(len(o, "/data"))),
        ],
        ("", "Namespace") => vec![column("Status", "string", |o, _| {
            Value::String(text(o, "/status/phase"))
        })],
        ("", "Pod") => vec![
            column("Ready", "string", |o, _| {
                let ready = o
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .map_or(0, |s| {
                        s.iter()
                            .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                            .count()
                    });
                Value::String(format!("{ready}/{}", len(o, "/spec/containers")))
            }),
            column("Status", "string", |o, _| {
                if o.pointer("/metadata/deletionTimestamp").is_some() {
                    Value::String("Terminating".to_owned())
                } else {
                    Value::String(text(o, "/status/phase"))
                }
            }),
            column("Restarts", "integer", |o, _| {
                let restarts: i64 = o
                    .pointer("/status/containerStatuses")
                    .and_then(Value::as_array)
                    .map_or(0, |s| {
                        s.iter()
                            .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                            .sum()
                    });
                Value::from(restarts)
            }),
        ],
        ("", "Service") => vec![
            column("Type", "string", |o, _| {
                let kind = text(o, "/spec/type");
                Value::String(if kind.is_empty() {
                    "ClusterIP".to_owned()
                } else {
                    kind
                })
            }),
            column("Cluster-IP", "string", |o, _| {
                or_none(text(o, "/spec/clusterIP"))
            }),
        ],
        ("apps", "Deployment") | ("apps", "StatefulSet") => vec![
            column("Ready", "string", |o, _| {
                let wanted = o
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                Value::String(format!("{}/{wanted}", int(o, "/status/readyReplicas")))
            }),
            column("Up-to-date", "integer", |o, _| {
                Value::from(int(o, "/status/updatedReplicas"))
            }),
            column("Available", "integer", |o, _| {
                Value::from(int(o, "/status/availableReplicas"))
            }),
        ],
        ("apps", "ReplicaSet") => vec![
            column("Desired", "integer", |o, _| {
                Value::from(int(o, "/spec/replicas"))
            }),
            column("Current", "integer", |o, _| {
                Value::from(int(o, "/status/replicas"))
            }),
            column("Ready", "integer", |o, _| {
                Value::from(int(o, "/status/readyReplicas"))
            }),
        ],
        ("batch", "Job") => vec![column("Completions", "string", |o, _| {
            let wanted = o
                .pointer("/spec/completions")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            Value::String(format!("{}/{wanted}", int(o, "/status/succeeded")))
        })],
        ("", "Event") | ("events.k8s.io", "Event") => vec![
            column("Last Seen", "string", |o, now| {
                let seen = [
                    "/series/lastObservedTime",
                    "/lastTimestamp",
                    "/deprecatedLastTimestamp",
                    "/eventTime",
                    "/metadata/creationTimestamp",
                ]
                .iter()
                .find_map(|p| o.pointer(p).and_then(Value::as_str).and_then(unix_seconds));
                Value::String(seen.map_or_else(|| "<unknown>".to_owned(), |t| age(now, t)))
            }),
            column("Type", "string", |o, _| Value::String(text(o, "/type"))),
            column("Reason", "string", |o, _| Value::String(text(o, "/reason"))),
            column("Object", "string", |o, _| {
                let about = ["/involvedObject", "/regarding"]
                    .iter()
                    .find_map(|p| o.pointer(p))
                    .unwrap_or(&Value::Null);
                Value::String(format!(
                    "{}/{}",
                    text(about, "/kind").to_lowercase(),
                    text(about, "/name")
                ))
            }),
            column("Message", "string", |o, _| {
                let message = text(o, "/message");
                Value::String(if message.is_empty() {
                    text(o, "/note")
                } else {
                    message
                })
            }),
        ],
        ("coordination.k8s.io", "Lease") => vec![column("Holder", "string", |o, _| {
            or_none(text(o, "/spec/holderIdentity"))
        })],
        _ if !resource.printer_columns.is_empty() => {
            columns.extend(resource.printer_columns.iter().map(|c| Column {
                name: c.name.clone(),
                kind: if c.kind == "date" {
                    "string".to_owned()
                } else {
                    c.kind.clone()
                },
                source: Source::Path {
                    pointer: c.pointer.clone(),
                    date: c.kind == "date",
                },
            }));
            return columns;
        }
        _ => Vec::new(),
    };
    columns.extend(extra);
    columns.push(column("Age", "string", created));
    columns
}

/// A `meta.k8s.io/v1` Table of `objects`; `list_metadata` goes into its `metadata`, and the
/// column definitions are left out when `headers` is false (later watch events).
pub(crate) fn table(
    resource: &ResourceInfo,
    objects: &[&StoredObject],
    list_metadata: Value,
    include: IncludeObject,
    headers: bool,
) -> Result<Value, Status> {
    let columns = columns(resource);
    let now = jiff::Timestamp::now().as_second();
    let definitions: Vec<Value> = if headers {
        columns
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": c.kind,
                    "format": if c.name == "Name" { "name" } else { "" },
                    "description": "",
                    "priority": 0,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut rows = Vec::with_capacity(objects.len());
    for stored in objects {
        let object = stored.to_value()?;
        let cells: Vec<Value> = columns.iter().map(|c| c.cell(&object, now)).collect();
        let mut row = Map::new();
        row.insert("cells".to_owned(), Value::Array(cells));
        match include {
            IncludeObject::None => {}
            IncludeObject::Metadata => {
                row.insert(
                    "object".to_owned(),
                    json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": object.get("metadata").cloned().unwrap_or(Value::Null),
                    }),
                );
            }
            IncludeObject::Object => {
                row.insert("object".to_owned(), object);
            }
        }
        rows.push(Value::Object(row));
    }
    Ok(json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(plural: &str) -> ResourceInfo {
        crate::resource::builtins()
            .into_iter()
            .find(|r| r.plural == plural)
            .unwrap()
    }

    /// The API server's timestamp of `seconds` ago.
    fn ago(seconds: i64) -> String {
        let now = jiff::Timestamp::now().as_second();
        crate::object::api_time(jiff::Timestamp::from_second(now - seconds).unwrap())
    }

    #[test]
    fn pods_show_ready_status_restarts_and_age() {
        let pod = json!({
            "metadata": {"name": "p", "creationTimestamp": ago(90)},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"ready": true, "restartCount": 2}, {"ready": false, "restartCount": 1}]},
        });
        let stored = StoredObject::new(&pod, 1, &[]).unwrap();
        let table = table(
            &resource("pods"),
            &[&stored],
            json!({}),
            IncludeObject::Metadata,
            true,
        )
        .unwrap();
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert_eq!(names, ["Name", "Ready", "Status", "Restarts", "Age"]);
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[0], "p");
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "Running");
        assert_eq!(cells[3], 3);
        let age = cells[4].as_str().unwrap();
        assert!(age.ends_with('s') && age.len() <= 3, "{age}");
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn later_watch_tables_omit_headers_and_objects_on_request() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let stored = StoredObject::new(&cm, 1, &[]).unwrap();
        let table = table(
            &resource("configmaps"),
            &[&stored],
            json!({}),
            IncludeObject::None,
            false,
        )
        .unwrap();
        assert_eq!(table["columnDefinitions"], json!([]));
        assert_eq!(table["rows"][0]["cells"][1], 2);
        assert!(table["rows"][0].get("object").is_none());
    }

    #[test]
    fn crd_printer_columns_replace_the_default_ones() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "additionalPrinterColumns": [
                         {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                         {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                         {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]},
        });
        let resource = crate::resource::from_crd(&crd).unwrap().remove(0);
        let widget = json!({"metadata": {"name": "w",
            "creationTimestamp": ago(30)}, "spec": {"size": 3}});
        let stored = StoredObject::new(&widget, 1, &[]).unwrap();
        let table = table(&resource, &[&stored], json!({}), IncludeObject::None, true).unwrap();
        let cells = &table["rows"][0]["cells"];
        assert_eq!(cells[0], "w");
        assert_eq!(cells[1], 3);
        assert_eq!(cells[2], "<none>");
        assert!(cells[3].as_str().unwrap().ends_with('s'));
        assert_eq!(table["columnDefinitions"].as_array().unwrap().len(), 4);
    }

    #[test]
    fn accept_header_detection() {
        assert!(wanted(Some(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        )));
        assert!(!wanted(Some("application/json")));
        assert!(!wanted(None));
        assert_eq!(
            IncludeObject::parse(Some("Object")).unwrap(),
            IncludeObject::Object
        );
        assert_eq!(IncludeObject::parse(Some("x")).unwrap_err().code, 400);
    }

    #[test]
    fn ages_follow_kubectl_rounding() {
        assert_eq!(human_duration(45), "45s");
        assert_eq!(human_duration(192), "3m12s");
        assert_eq!(human_duration(900), "15m");
        assert_eq!(human_duration(5 * 3600 + 180), "5h3m");
        assert_eq!(human_duration(20 * 3600), "20h");
        assert_eq!(human_duration(52 * 3600), "2d4h");
        assert_eq!(human_duration(40 * 86_400), "40d");
        assert_eq!(human_duration(3 * 365 * 86_400 + 20 * 86_400), "3y20d");
    }

    #[test]
    fn ages_are_read_from_rfc3339_timestamps() {
        let then = unix_seconds("2026-01-02T03:04:05Z").unwrap();
        assert_eq!(then, 1_767_323_045);
        assert_eq!(unix_seconds("2026-01-02T03:04:05.123456Z"), Some(then));
        assert_eq!(unix_seconds("2026-01-02T05:04:05+02:00"), Some(then));
        assert_eq!(unix_seconds("not a time"), None);
        assert_eq!(
            unix_seconds("2026-01-02T03:04:05"),
            None,
            "no offset: not an instant"
        );
        assert_eq!(age(then + 192, then), "3m12s");
        assert_eq!(
            age(then - 5, then),
            "0s",
            "a clock behind the object's is no negative age"
        );
    }
}

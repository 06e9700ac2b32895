//! pod-diff: logs one line for every change to the Pods and ConfigMaps it watches, naming each
//! field that changed, was added or was removed.
//!
//! Config (optional): a label selector narrowing both watches, e.g. `app=web`.

mod diff;

use kubewasm_guest::k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kubewasm_guest::serde_json::Value;
use kubewasm_guest::{Controller, Error, Event, Plugin, Resource, Subscription};

/// Stateless: every line is computed from the event alone.
struct PodDiff;

impl PodDiff {
    /// One handler for both resources: the diff works on the JSON, whatever its kind.
    fn on_change(&mut self, resource: &Resource, event: Event<Value>) -> Result<(), Error> {
        let line = describe(&resource.kind, &event);
        if let Some(line) = line {
            kubewasm_guest::info!("{line}");
        }
        Ok(())
    }
}

impl Controller for PodDiff {
    fn init(config: &str) -> Result<Plugin<Self>, Error> {
        let selector = config.trim();
        let watch = |subscription: Subscription| {
            if selector.is_empty() {
                subscription
            } else {
                subscription.labels(selector)
            }
        };
        Ok(Plugin::new("pod-diff", PodDiff)
            .watch_with_resource(watch(Subscription::to::<Pod>()), Self::on_change)
            .watch_with_resource(watch(Subscription::to::<ConfigMap>()), Self::on_change))
    }
}

kubewasm_guest::export_controller!(PodDiff);

/// The log line for an event; `None` for an update that changed nothing worth telling (a resync,
/// or only `metadata.resourceVersion` / `metadata.generation`).
fn describe(kind: &str, event: &Event<Value>) -> Option<String> {
    let key = object_key(event.object());
    match event {
        Event::Added {
            in_initial_list, ..
        } => {
            let initial = if *in_initial_list {
                " (initial list)"
            } else {
                ""
            };
            Some(format!("{kind} {key} added{initial}"))
        }
        Event::Updated { old, new } => {
            let changes = diff::diff(old, new);
            if changes.is_empty() {
                return None;
            }
            let text: Vec<String> = changes.iter().map(ToString::to_string).collect();
            Some(format!("{kind} {key} changed: {}", text.join("; ")))
        }
        Event::Deleted {
            final_state_unknown,
            ..
        } => {
            let unknown = if *final_state_unknown {
                " (final state unknown)"
            } else {
                ""
            };
            Some(format!("{kind} {key} deleted{unknown}"))
        }
    }
}

/// `namespace/name`, or `name` for cluster-scoped objects.
fn object_key(object: &Value) -> String {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str().unwrap_or("?");
    match metadata["namespace"].as_str() {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use kubewasm_guest::serde_json::json;

    use super::*;

    fn config_map(rv: &str, data: Value) -> Value {
        json!({"metadata": {"name": "app", "namespace": "shop", "resourceVersion": rv}, "data": data})
    }

    #[test]
    fn updates_are_one_line_naming_each_change() {
        let event = Event::Updated {
            old: config_map("1", json!({"color": "red", "size": "L"})),
            new: config_map("2", json!({"color": "blue", "shape": "round"})),
        };
        assert_eq!(
            describe("ConfigMap", &event).unwrap(),
            r#"ConfigMap shop/app changed: data.color: "red" -> "blue"; -data.size; +data.shape="round""#
        );
    }

    #[test]
    fn resyncs_and_version_bumps_log_nothing() {
        let same = config_map("1", json!({"a": "b"}));
        let resync = Event::Updated {
            old: same.clone(),
            new: same,
        };
        assert_eq!(describe("ConfigMap", &resync), None);
        let bump = Event::Updated {
            old: config_map("1", json!({})),
            new: config_map("2", json!({})),
        };
        assert_eq!(describe("ConfigMap", &bump), None);
    }

    #[test]
    fn adds_and_deletes_say_which_object_and_how() {
        let pod = json!({"metadata": {"name": "web-0", "namespace": "shop"}});
        let added = Event::Added {
            object: pod.clone(),
            in_initial_list: true,
        };
        assert_eq!(
            describe("Pod", &added).unwrap(),
            "Pod shop/web-0 added (initial list)"
        );
        let deleted = Event::Deleted {
            object: pod,
            final_state_unknown: true,
        };
        assert_eq!(
            describe("Pod", &deleted).unwrap(),
            "Pod shop/web-0 deleted (final state unknown)"
        );
    }
}

//! custom-resource-log: watches the custom resource kind named in its config string and logs,
//! for every event, the object's top-level `spec` fields and how many objects of that kind its
//! namespace holds.
//!
//! Config (required): the kind as `group/version/Kind`, e.g. `demo.kubewasm.io/v1/Backup` (the
//! CRD in `examples/manifests/40-backup-crd.yaml`). The kind is not known when the guest is
//! compiled: this is the path an operator for a CRD takes first, and the reason `kubewasm rbac`
//! must be given the config file.
//!
//! The per-namespace count is kept from the events (see [`count::Counts`]): O(1) per event,
//! where listing the namespace from the cache on every event would be O(n).

mod count;
mod spec;

use kubewasm_guest::{Controller, DynamicObject, Error, Event, Plugin, Resource, Subscription};

use count::Counts;

/// The objects counted per namespace, and the kind (for log lines).
struct CustomResourceLog {
    kind: String,
    counts: Counts,
}

impl CustomResourceLog {
    fn on_event(&mut self, event: Event<DynamicObject>) -> Result<(), Error> {
        let (what, delta) = match &event {
            Event::Added {
                in_initial_list: true,
                ..
            } => ("added (initial list)", 1),
            Event::Added { .. } => ("added", 1),
            Event::Updated { old, new } if old.data.get("spec") == new.data.get("spec") => {
                // Status, labels or a resync: the spec, which this example reports, is the same.
                return Ok(());
            }
            Event::Updated { .. } => ("changed", 0),
            Event::Deleted { .. } => ("deleted", -1),
        };
        let object = event.object();
        let namespace = object.namespace().unwrap_or("");
        let count = self.counts.add(namespace, delta);
        kubewasm_guest::info!(
            "{} {} {what}: {}; {count} in {}",
            self.kind,
            object.key(),
            spec::summary(object),
            if namespace.is_empty() {
                "the cluster"
            } else {
                namespace
            }
        );
        Ok(())
    }
}

impl Controller for CustomResourceLog {
    fn init(config: &str) -> Result<Plugin<Self>, Error> {
        let resource = parse_kind(config)?;
        let state = CustomResourceLog {
            kind: resource.kind.clone(),
            counts: Counts::default(),
        };
        Ok(Plugin::new("custom-resource-log", state)
            .watch(Subscription::resource(resource), Self::on_event))
    }
}

kubewasm_guest::export_controller!(CustomResourceLog);

/// The resource named by the config string: `group/version/Kind`, or `version/Kind` for the
/// core group.
fn parse_kind(config: &str) -> Result<Resource, Error> {
    let parts: Vec<&str> = config.trim().split('/').collect();
    let valid = |part: &str| !part.is_empty() && !part.contains(char::is_whitespace);
    match *parts.as_slice() {
        [group, version, kind] if [group, version, kind].into_iter().all(valid) => {
            Ok(Resource::new(group, version, kind))
        }
        [version, kind] if [version, kind].into_iter().all(valid) => {
            Ok(Resource::new("", version, kind))
        }
        _ => Err(Error::msg(format!(
            "config must name the kind to watch as group/version/Kind \
             (e.g. demo.kubewasm.io/v1/Backup), got {config:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_the_kind() {
        let backup = parse_kind(" demo.kubewasm.io/v1/Backup\n").unwrap();
        assert_eq!(backup, Resource::new("demo.kubewasm.io", "v1", "Backup"));
        assert_eq!(
            parse_kind("v1/ConfigMap").unwrap(),
            Resource::new("", "v1", "ConfigMap")
        );
        for bad in ["", "Backup", "a//Backup", "a/b/c/d", "demo/v1/Back up"] {
            let err = parse_kind(bad).unwrap_err().to_string();
            assert!(err.contains("group/version/Kind"), "{bad:?}: {err}");
        }
    }
}

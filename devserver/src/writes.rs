//! Create, update, patch and delete: the metadata rules the API server applies to every write.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::Status;
use crate::core::Core;
use crate::lists::{self, Schema};
use crate::managed;
use crate::names::{self, GENERATED_PREFIX_MAX};
use crate::object::{StoredObject, api_time_now, new_uid, store_key};
use crate::patch::{self, PatchType};
use crate::propagation::{self, Propagation, finalizers};
use crate::resource::{self, ResourceInfo};
use crate::scale;
use crate::store::Change;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

/// Which part of the object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main endpoint: everything but the status (when status is a subresource).
    Main,
    /// The `/status` subresource: only the status.
    Status,
    /// The `/scale` subresource: requests and answers are `autoscaling/v1` Scale objects; only
    /// the replica count changes.
    Scale,
}

/// Where a write goes: the resource, the namespace from the URL (if any), and whether it is a
/// dry run (`dryRun=All`: validated and answered, but nothing stored and no side effects).
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    pub resource: &'a ResourceInfo,
    pub namespace: Option<&'a str>,
    pub dry_run: bool,
    /// Who writes: the `fieldManager` parameter, else the client's User-Agent up to its first
    /// `/` (recorded in `managedFields` as an `Update`).
    pub manager: Option<&'a str>,
}

impl<'a> Target<'a> {
    /// The namespace the addressed object lives in: the URL's (`default` when a namespaced
    /// resource is addressed without one), none for a cluster-scoped resource.
    pub(crate) fn object_namespace(&self) -> Option<&'a str> {
        self.resource
            .namespaced
            .then(|| self.namespace.unwrap_or("default"))
    }

    /// A real (not dry-run) write.
    pub fn new(resource: &'a ResourceInfo, namespace: Option<&'a str>) -> Target<'a> {
        Target {
            resource,
            namespace,
            dry_run: false,
            manager: None,
        }
    }
}

impl Core {
    /// Creates `object` in `namespace` (taken from the object, then "default", when `None`).
    pub fn create(
        &self,
        target: &Target<'_>,
        mut object: Value,
    ) -> Result<Arc<StoredObject>, Status> {
        let (resource, namespace) = (target.resource, target.namespace);
        check_type(resource, &mut object)?;
        fold_string_data(resource, &mut object)?;
        type_claim_templates(resource, &mut object);
        let namespace = resolve_namespace(resource, namespace, &object)?;
        if let Some(namespace) = &namespace {
            check_namespace_exists(namespace)?;
        }
        let meta = metadata_mut(&mut object)?;
        let generate_name = meta
            .get("generateName")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let name = match meta.get("name").and_then(Value::as_str) {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => match generate_name.as_deref() {
                Some(prefix) if !prefix.is_empty() => generate_name_from(prefix),
                _ => {
                    return Err(Status::invalid_field(
                        &resource.qualified_kind(),
                        "",
                        "metadata.name",
                        "FieldValueRequired",
                        "Required value: name or generateName is required",
                    ));
                }
            },
        };
        names::check_new(resource, generate_name.as_deref(), &name)?;
        check_data_size(resource, &object, &name)?;
        let meta = metadata_mut(&mut object)?;
        meta.insert("name".into(), Value::String(name.clone()));
        match &namespace {
            Some(ns) => meta.insert("namespace".into(), Value::String(ns.clone())),
            None => meta.remove("namespace"),
        };
        for server_owned in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            meta.remove(server_owned);
        }
        meta.insert("uid".into(), Value::String(new_uid()));
        meta.insert("creationTimestamp".into(), Value::String(api_time_now()));
        label_namespace_name(resource, meta, &name);
        meta.insert("generation".into(), Value::from(1));
        if resource.has_status
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        default_status(resource, &mut object);
        lists::default_keys(&mut object, Schema::of(resource));
        if let Some(manager) = target.manager {
            managed::record_update(None, &mut object, manager, Schema::of(resource));
        }
        let crd = register_crd(resource, &object)?;
        let key = store_key(namespace.as_deref(), &name);
        let stored = self.store.write(
            &resource.storage_key(),
            &key,
            &resource.selectable_fields,
            target.dry_run,
            |current, _| {
                if current.is_some() {
                    return Err(Status::already_exists(&resource.qualified_plural(), &name));
                }
                Ok(Change::Put(object))
            },
        );
        let stored = stored?;
        if target.dry_run {
            return Ok(stored);
        }
        if let Some((group, plural, resources)) = crd {
            self.registry.register(&group, &plural, resources);
        }
        self.collect_after_write(resource, None, &stored)?;
        Ok(stored)
    }

    /// Replaces the object (PUT), answering 409 if `object` carries a stale resourceVersion.
    pub fn update(
        &self,
        target: &Target<'_>,
        name: &str,
        part: Part,
        mut object: Value,
    ) -> Result<Arc<StoredObject>, Status> {
        if part != Part::Scale {
            check_type(target.resource, &mut object)?;
        }
        self.modify(target, name, part, |_| Ok(object))
    }

    /// Applies a patch of `patch_type` to the current object. A server-side apply needs a field
    /// manager (`manager`, the `fieldManager` parameter) and takes ownership of contested fields
    /// with `force`.
    pub fn patch(
        &self,
        target: &Target<'_>,
        name: &str,
        part: Part,
        patch_type: PatchType,
        body: &[u8],
        applier: Option<(&str, bool)>,
    ) -> Result<Arc<StoredObject>, Status> {
        let resource = target.resource;
        let parsed = patch::parse(patch_type, body)?;
        if patch_type == PatchType::Apply {
            let Some((manager, force)) = applier.filter(|(m, _)| !m.is_empty()) else {
                return Err(Status::invalid(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is \
                     required for apply patch",
                ));
            };
            let patch::Patch::Merge(applied) = &parsed else {
                return Err(Status::internal("an apply patch is a merge patch"));
            };
            // The applier's ownership is recorded here, not as an Update.
            let target = &Target {
                manager: None,
                ..*target
            };
            let key = store_key(target.object_namespace(), name);
            if self.store.get(&resource.storage_key(), &key).is_none() {
                let object = parsed.apply_to(Value::Object(Map::new()))?;
                // As the real API server: an apply that creates must name its object.
                if object.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
                    return Err(Status::bad_request(format!(
                        "the name of the object ({name} based on URL) was undeterminable: \
                         name must be provided"
                    )));
                }
                return self.create(
                    target,
                    managed::first_apply(object, manager, Schema::of(resource)),
                );
            }
            return self.modify(target, name, part, |current| {
                let mut merged =
                    managed::apply(&current, applied, manager, force, Schema::of(resource))?;
                if part != Part::Scale {
                    check_type(resource, &mut merged)?;
                }
                Ok(merged)
            });
        }
        self.modify(target, name, part, |current| {
            let mut patched = parsed.apply_to(current)?;
            if part != Part::Scale {
                check_type(resource, &mut patched)?;
            }
            Ok(patched)
        })
    }

    /// Shared by update and patch: `change` turns the current object into the requested one,
    /// then server-owned fields are restored and the status/main split enforced.
    fn modify(
        &self,
        target: &Target<'_>,
        name: &str,
        part: Part,
        change: impl FnOnce(Value) -> Result<Value, Status>,
    ) -> Result<Arc<StoredObject>, Status> {
        let resource = target.resource;
        let namespace = target.object_namespace();
        let key = store_key(namespace, name);
        let plural = resource.qualified_plural();
        let mut crd = None;
        let mut removed = false;
        let mut before = None;
        let stored = self.store.write(
            &resource.storage_key(),
            &key,
            &resource.selectable_fields,
            target.dry_run,
            |current, _| {
                let current = current.ok_or_else(|| Status::not_found(&plural, name))?;
                let old = current.to_value()?;
                let changed = match part {
                    Part::Scale => change(scale::view(resource, &old)?)?,
                    Part::Main | Part::Status => change(old.clone())?,
                };
                let requested_rv = changed
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .filter(|rv| !rv.is_empty())
                    .map(str::to_owned);
                if let Some(rv) = requested_rv
                    && rv != current.resource_version.to_string()
                {
                    return Err(Status::conflict(&plural, name));
                }
                check_identity(&changed, name, namespace)?;
                let mut new = match part {
                    Part::Main => merge_main(resource, &old, changed)?,
                    Part::Status => merge_status(&old, &changed)?,
                    Part::Scale => {
                        merge_main(resource, &old, scale::apply(resource, &old, &changed)?)?
                    }
                };
                fold_string_data(resource, &mut new)?;
                type_claim_templates(resource, &mut new);
                check_data_size(resource, &new, name)?;
                lists::default_keys(&mut new, Schema::of(resource));
                if let Some(manager) = target.manager {
                    managed::record_update(Some(&old), &mut new, manager, Schema::of(resource));
                }
                if same_except(&new, &old, &[], &["resourceVersion"]) {
                    return Ok(Change::Unchanged);
                }
                if resource.group == "apiextensions.k8s.io" {
                    crd = register_crd(resource, &new)?;
                }
                let finished = new.pointer("/metadata/deletionTimestamp").is_some()
                    && finalizers(&new).is_empty();
                removed = finished;
                before = Some(old);
                Ok(if finished {
                    Change::Remove(new)
                } else {
                    Change::Put(new)
                })
            },
        )?;
        if target.dry_run {
            return Ok(stored);
        }
        if let Some((group, plural, resources)) = crd {
            self.registry.register(&group, &plural, resources);
        }
        if removed {
            self.after_removal(resource, &stored)?;
        } else if let Some(old) = before {
            self.collect_after_write(resource, Some(&old), &stored)?;
        }
        Ok(stored)
    }

    /// Deletes the object, or marks it for deletion while finalizers remain. `options` is the
    /// DeleteOptions body: its optional `preconditions` (`uid`, `resourceVersion`) and
    /// propagation policy (what the garbage collector does with the object's dependents).
    pub fn delete(
        &self,
        target: &Target<'_>,
        name: &str,
        options: &Value,
    ) -> Result<Arc<StoredObject>, Status> {
        let resource = target.resource;
        let namespace = target.object_namespace();
        let key = store_key(namespace, name);
        let plural = resource.qualified_plural();
        let requested = Propagation::requested(options)?;
        let has_dependents = self
            .store
            .get(&resource.storage_key(), &key)
            .and_then(|current| current.to_value().ok())
            .and_then(|v| v.pointer("/metadata/uid")?.as_str().map(str::to_owned))
            .is_some_and(|uid| self.has_dependents(&uid));
        let mut removed = false;
        let mut collecting = None;
        let stored = self.store.write(
            &resource.storage_key(),
            &key,
            &resource.selectable_fields,
            target.dry_run,
            |current, _| {
                let current = current.ok_or_else(|| Status::not_found(&plural, name))?;
                let mut object = current.to_value()?;
                let precondition =
                    |field: &str| options.pointer(&format!("/preconditions/{field}"));
                if let Some(uid) = precondition("uid").and_then(Value::as_str)
                    && object.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid)
                {
                    return Err(Status::conflict(&plural, name));
                }
                if let Some(rv) = precondition("resourceVersion").and_then(Value::as_str)
                    && rv != current.resource_version.to_string()
                {
                    return Err(Status::conflict(&plural, name));
                }
                let policy = Propagation::for_object(requested, &object);
                let gc_finalizer = match policy {
                    Propagation::Foreground if has_dependents => Some(propagation::FOREGROUND),
                    Propagation::Orphan if has_dependents => Some(propagation::ORPHAN),
                    _ => None,
                };
                if gc_finalizer.is_none() && finalizers(&object).is_empty() {
                    removed = true;
                    return Ok(Change::Remove(object));
                }
                let meta = metadata_mut(&mut object)?;
                if meta.contains_key("deletionTimestamp") {
                    return Ok(Change::Unchanged);
                }
                if let Some(finalizer) = gc_finalizer {
                    let list = meta
                        .entry("finalizers")
                        .or_insert_with(|| Value::Array(Vec::new()));
                    if let Some(list) = list.as_array_mut()
                        && !list.iter().any(|f| f.as_str() == Some(finalizer))
                    {
                        list.push(Value::String(finalizer.to_owned()));
                    }
                    let uid = meta.get("uid").and_then(Value::as_str).map(str::to_owned);
                    collecting = uid.map(|uid| (policy, uid));
                }
                meta.insert("deletionTimestamp".into(), Value::String(api_time_now()));
                meta.insert("deletionGracePeriodSeconds".into(), Value::from(0));
                Ok(Change::Put(object))
            },
        )?;
        if target.dry_run {
            return Ok(stored);
        }
        if removed {
            self.after_removal(resource, &stored)?;
        }
        match collecting {
            Some((Propagation::Foreground, uid)) => {
                self.delete_dependents_in_foreground(resource, namespace, name, &uid)?;
            }
            Some((Propagation::Orphan, uid)) => {
                self.finish_orphaning(resource, namespace, name, &uid)?
            }
            _ => {}
        }
        Ok(self
            .store
            .get(&resource.storage_key(), &key)
            .unwrap_or(stored))
    }

    /// Side effects of an object leaving the store: a deleted CRD's resource disappears, and a
    /// deleted namespace's objects are deleted (as the namespace controller would).
    pub(crate) fn after_removal(
        &self,
        resource: &ResourceInfo,
        object: &StoredObject,
    ) -> Result<(), Status> {
        if resource.group.is_empty() && resource.kind == "Namespace" {
            let mut seen = Vec::new();
            for namespaced in self.registry.all().iter().filter(|r| r.namespaced) {
                let storage_key = namespaced.storage_key();
                if seen.contains(&storage_key) {
                    continue;
                }
                for name in self.store.names_in_namespace(&storage_key, &object.name) {
                    let target = Target::new(namespaced, Some(&object.name));
                    match self.delete(&target, &name, &Value::Null) {
                        Ok(_) => {}
                        Err(status) if status.code == 404 => {}
                        Err(status) => return Err(status),
                    }
                }
                seen.push(storage_key);
            }
        }
        if resource.group == "apiextensions.k8s.io"
            && resource.plural == "customresourcedefinitions"
        {
            let value = object.to_value()?;
            if let Ok(resources) = resource::from_crd(&value)
                && let Some(first) = resources.first()
            {
                self.registry.unregister(&first.group, &first.plural);
                self.store.drop_collection(&first.storage_key());
            }
        }
        self.collect_after_removal(&object.to_value()?)
    }
}

/// Fills in or checks `apiVersion` and `kind` against the resource (400 on mismatch).
fn check_type(resource: &ResourceInfo, object: &mut Value) -> Result<(), Status> {
    let map = object
        .as_object_mut()
        .ok_or_else(|| Status::bad_request("the request body must be a JSON object"))?;
    let api_version = resource.api_version();
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), Value::String(api_version));
        }
        Some(given) if given == api_version => {}
        Some(given) => {
            return Err(Status::bad_request(format!(
                "the API version in the data ({given}) does not match the expected API version \
                 ({api_version})"
            )));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), Value::String(resource.kind.clone()));
        }
        Some(kind) if kind == resource.kind => {}
        Some(kind) => {
            return Err(Status::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                resource.kind
            )));
        }
    }
    match map.get("metadata") {
        None => {
            map.insert("metadata".into(), Value::Object(Map::new()));
        }
        Some(Value::Object(_)) => {}
        Some(_) => return Err(Status::bad_request("metadata must be a JSON object")),
    }
    Ok(())
}

/// A Secret's `stringData` is write-only: the API server moves it into `data`, base64-encoded.
fn fold_string_data(resource: &ResourceInfo, object: &mut Value) -> Result<(), Status> {
    if !(resource.group.is_empty() && resource.kind == "Secret") {
        return Ok(());
    }
    let Some(map) = object.as_object_mut() else {
        return Ok(());
    };
    let Some(string_data) = map.remove("stringData") else {
        return Ok(());
    };
    let Value::Object(string_data) = string_data else {
        return Err(Status::invalid(
            "Secret: stringData must be a map of strings",
        ));
    };
    let data = map
        .entry("data")
        .or_insert_with(|| Value::Object(Map::new()));
    if data.is_null() {
        *data = Value::Object(Map::new());
    }
    let data = data
        .as_object_mut()
        .ok_or_else(|| Status::invalid("Secret: data must be a map"))?;
    for (key, value) in string_data {
        let text = value
            .as_str()
            .ok_or_else(|| Status::invalid(format!("Secret: stringData.{key} must be a string")))?;
        data.insert(key, Value::String(BASE64.encode(text)));
    }
    Ok(())
}

/// A StatefulSet's claim templates are typed `v1` `PersistentVolumeClaim`, whatever the client
/// sent, as kube-apiserver's conversion of a StatefulSet to the version it answers in types
/// them (and as the protobuf wire, which carries no type for them, renders them).
fn type_claim_templates(resource: &ResourceInfo, object: &mut Value) {
    if !(resource.group == "apps" && resource.kind == "StatefulSet") {
        return;
    }
    let Some(templates) = object
        .pointer_mut("/spec/volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for template in templates.iter_mut().filter_map(Value::as_object_mut) {
        template.insert("apiVersion".into(), Value::String("v1".into()));
        template.insert("kind".into(), Value::String("PersistentVolumeClaim".into()));
    }
}

fn metadata_mut(object: &mut Value) -> Result<&mut Map<String, Value>, Status> {
    object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| Status::bad_request("metadata must be a JSON object"))
}

/// The namespace a new object goes to: the URL's, else the object's, else "default".
fn resolve_namespace(
    resource: &ResourceInfo,
    url_namespace: Option<&str>,
    object: &Value,
) -> Result<Option<String>, Status> {
    if !resource.namespaced {
        return Ok(None);
    }
    let in_body = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty());
    match (url_namespace, in_body) {
        (Some(url), Some(body)) if url != body => Err(Status::bad_request(format!(
            "the namespace of the provided object ({body}) does not match the namespace sent \
             on the request ({url})"
        ))),
        (Some(ns), _) | (None, Some(ns)) => Ok(Some(ns.to_owned())),
        (None, None) => Ok(Some("default".to_owned())),
    }
}

/// An update may not rename or move an object.
fn check_identity(object: &Value, name: &str, namespace: Option<&str>) -> Result<(), Status> {
    let body_name = object.pointer("/metadata/name").and_then(Value::as_str);
    if let Some(body_name) = body_name
        && body_name != name
    {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let body_ns = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty());
    if let (Some(body_ns), Some(url_ns)) = (body_ns, namespace)
        && body_ns != url_ns
    {
        return Err(Status::bad_request(format!(
            "the namespace of the provided object ({body_ns}) does not match the namespace sent \
             on the request ({url_ns})"
        )));
    }
    Ok(())
}

/// The main endpoint's result: the requested object with server-owned metadata (and, for
/// resources with a status subresource, the status) kept from `old`; generation bumped when
/// anything but metadata changed (for resources with a status subresource, the spec: their
/// status only changes through `/status`, which leaves the generation alone).
fn merge_main(resource: &ResourceInfo, old: &Value, mut new: Value) -> Result<Value, Status> {
    let old_meta = old
        .get("metadata")
        .and_then(Value::as_object)
        .ok_or_else(|| Status::internal("stored object without metadata"))?;
    if resource.has_status {
        let map = new
            .as_object_mut()
            .ok_or_else(|| Status::bad_request("the request body must be a JSON object"))?;
        match old.get("status") {
            Some(status) => map.insert("status".into(), status.clone()),
            None => map.remove("status"),
        };
    }
    // With a status subresource the main endpoint cannot change the status (kept above), so
    // skipping it or not is the same; without one, a status change counts like any other.
    let spec_changed = !same_except(old, &new, &["metadata"], &[]);
    let meta = metadata_mut(&mut new)?;
    for owned in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(owned) {
            Some(v) => meta.insert(owned.into(), v.clone()),
            None => meta.remove(owned),
        };
    }
    if spec_changed {
        let generation = old_meta
            .get("generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        meta.insert("generation".into(), Value::from(generation + 1));
    }
    if let Some(name) = old_meta.get("name").and_then(Value::as_str) {
        label_namespace_name(resource, meta, name);
    }
    Ok(new)
}

/// The label the API server gives every Namespace, `kubernetes.io/metadata.name`, holding its
/// name (set on create and on every update, whatever the request said), so selectors on it
/// (a webhook's `namespaceSelector`, a NetworkPolicy) match here as on a cluster.
fn label_namespace_name(resource: &ResourceInfo, meta: &mut Map<String, Value>, name: &str) {
    if !(resource.group.is_empty() && resource.kind == "Namespace") {
        return;
    }
    let labels = meta
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(
            "kubernetes.io/metadata.name".into(),
            Value::String(name.to_owned()),
        );
    }
}

/// The status subresource's result: `old` with only the status taken from `new`.
fn merge_status(old: &Value, new: &Value) -> Result<Value, Status> {
    let mut result = old.clone();
    let map = result
        .as_object_mut()
        .ok_or_else(|| Status::internal("stored object is not a JSON object"))?;
    match new.get("status") {
        Some(status) => map.insert("status".into(), status.clone()),
        None => map.remove("status"),
    };
    Ok(result)
}

/// Whether `a` and `b` are equal apart from the top-level fields `skip` and the metadata
/// fields `skip_meta` (compared in place: writes run under the store lock).
fn same_except(a: &Value, b: &Value, skip: &[&str], skip_meta: &[&str]) -> bool {
    fn fields<'v>(
        map: &'v Map<String, Value>,
        skip: &'v [&str],
    ) -> impl Iterator<Item = (&'v String, &'v Value)> {
        map.iter().filter(move |(k, _)| !skip.contains(&k.as_str()))
    }
    fn same_map(a: &Map<String, Value>, b: &Map<String, Value>, skip: &[&str]) -> bool {
        fields(a, skip).count() == fields(b, skip).count()
            && fields(a, skip).all(|(k, v)| b.get(k) == Some(v))
    }
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    if !same_map(a, b, &[skip, &["metadata"]].concat()) {
        return false;
    }
    if skip.contains(&"metadata") {
        return true;
    }
    match (a.get("metadata"), b.get("metadata")) {
        (Some(Value::Object(ma)), Some(Value::Object(mb))) => same_map(ma, mb, skip_meta),
        (ma, mb) => ma == mb,
    }
}

/// The status the server gives new objects of a few built-in kinds (and a namespace its
/// `spec.finalizers`); a CRD is at once
/// Established (controllers and tests wait for that condition).
fn default_status(resource: &ResourceInfo, object: &mut Value) {
    let status = match (resource.group.as_str(), resource.kind.as_str()) {
        ("", "Namespace") => {
            // The API server's namespace strategy gives every new namespace its finalizer.
            if let Some(map) = object.as_object_mut()
                && !map.get("spec").is_some_and(Value::is_object)
            {
                map.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            }
            json!({"phase": "Active"})
        }
        ("", "Pod") => json!({"phase": "Pending"}),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let names = object
                .pointer("/spec/names")
                .cloned()
                .unwrap_or(Value::Null);
            let stored_versions: Vec<Value> = object
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                        .filter_map(|v| v.get("name").cloned())
                        .collect()
                })
                .unwrap_or_default();
            let now = api_time_now();
            let condition = |kind: &str, reason: &str| {
                json!({"type": kind, "status": "True", "lastTransitionTime": now,
                       "reason": reason, "message": ""})
            };
            json!({
                "acceptedNames": names,
                "storedVersions": stored_versions,
                "conditions": [
                    condition("NamesAccepted", "NoConflicts"),
                    condition("Established", "InitialNamesAccepted"),
                ],
            })
        }
        _ => return,
    };
    if let Some(map) = object.as_object_mut() {
        map.insert("status".into(), status);
    }
}

/// For a CRD: validates it, marks it Established and returns the resources to register.
type CrdRegistration = Option<(String, String, Vec<ResourceInfo>)>;

fn register_crd(resource: &ResourceInfo, object: &Value) -> Result<CrdRegistration, Status> {
    if !(resource.group == "apiextensions.k8s.io" && resource.plural == "customresourcedefinitions")
    {
        return Ok(None);
    }
    let resources = resource::from_crd(object)?;
    let Some(first) = resources.first() else {
        return Err(Status::invalid(
            "CustomResourceDefinition: at least one version must be served",
        ));
    };
    Ok(Some((first.group.clone(), first.plural.clone(), resources)))
}

/// Random suffix characters the API server uses for generateName (no vowels, no look-alikes).
const NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// A name from a `generateName` prefix, as the API server makes one: the prefix cut to 58
/// characters, then five random characters.
fn generate_name_from(prefix: &str) -> String {
    let mut end = prefix.len().min(GENERATED_PREFIX_MAX);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    let mut name = prefix[..end].to_owned();
    for _ in 0..5 {
        let i = rand::random_range(0..NAME_ALPHABET.len());
        name.push(char::from(NAME_ALPHABET[i]));
    }
    name
}

/// Objects may be created in namespaces that do not exist (a development convenience), but not
/// in one that no namespace could ever be: the API server answers 404 for a name that is no DNS
/// label, and fails with 500 for one that is no path segment (`..`), as its namespace lookup
/// trips over the storage key.
fn check_namespace_exists(namespace: &str) -> Result<(), Status> {
    let problems = names::path_segment_problems(namespace, false);
    if !problems.is_empty() {
        let message = format!(
            "invalid resource name {}: [{}]",
            Value::String(namespace.to_owned()),
            problems.join(" ")
        );
        let mut status = Status::internal(format!("Internal error occurred: {message}"));
        status.causes.push(crate::StatusCause {
            reason: String::new(),
            message,
            field: String::new(),
        });
        return Err(status);
    }
    if !names::is_namespace_name(namespace) {
        return Err(Status::not_found("namespaces", namespace));
    }
    Ok(())
}

/// The most a ConfigMap's or a Secret's data may hold, in bytes (the API server's
/// `MaxSecretSize`).
const MAX_DATA_SIZE: usize = 1024 * 1024;

/// A ConfigMap's `data` and `binaryData` values and a Secret's `data` values (decoded) hold at
/// most 1 MiB together, or the API server answers 422.
fn check_data_size(resource: &ResourceInfo, object: &Value, name: &str) -> Result<(), Status> {
    if !resource.group.is_empty() {
        return Ok(());
    }
    let values = |field: &str| {
        object
            .get(field)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|map| map.values().filter_map(Value::as_str))
    };
    // base64 carries 3 bytes in 4 characters, less one per `=` of padding.
    let decoded = |text: &str| {
        let padding = text.bytes().rev().take_while(|b| *b == b'=').count().min(2);
        (text.len() / 4 * 3).saturating_sub(padding)
    };
    let (size, field) = match resource.kind.as_str() {
        "ConfigMap" => (
            values("data").map(str::len).sum::<usize>()
                + values("binaryData").map(decoded).sum::<usize>(),
            "[]",
        ),
        "Secret" => (values("data").map(decoded).sum(), "data"),
        _ => return Ok(()),
    };
    if size <= MAX_DATA_SIZE {
        return Ok(());
    }
    Err(Status::invalid_field(
        &resource.qualified_kind(),
        name,
        field,
        "FieldValueTooLong",
        &format!("Too long: may not be more than {MAX_DATA_SIZE} bytes"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_except_ignores_only_the_named_fields() {
        let a = json!({"metadata": {"name": "a", "resourceVersion": "1"}, "spec": {"x": 1}, "status": {"s": 1}});
        let b = json!({"metadata": {"name": "a", "resourceVersion": "2"}, "spec": {"x": 1}, "status": {"s": 2}});
        assert!(!same_except(&a, &b, &[], &["resourceVersion"]));
        assert!(same_except(&a, &b, &["status"], &["resourceVersion"]));
        assert!(same_except(&a, &b, &["metadata", "status"], &[]));
        let c = json!({"metadata": {"name": "a"}, "spec": {"x": 2}});
        assert!(!same_except(&a, &c, &["metadata", "status"], &[]));
        let d = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "extra": 1});
        assert!(!same_except(&a, &d, &["metadata", "status"], &[]));
    }
}

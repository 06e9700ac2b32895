//! The garbage collector: dependents follow their owners (by `metadata.ownerReferences`) out of
//! the store, as the API server's garbage collector does, but synchronously, as part of the write
//! that makes them garbage.
//!
//! - Background (the default): the owner goes at once, then its dependents (each with its own
//!   propagation, from its finalizers).
//! - Foreground: the owner gets the `foregroundDeletion` finalizer and stays (with a
//!   deletionTimestamp) while dependents with `blockOwnerDeletion: true` remain; dependents are
//!   deleted in the foreground too; the owner goes last.
//! - Orphan (or the `orphan` finalizer): the references to the owner are removed from its
//!   dependents, which stay.
//!
//! A dependent whose owners are all gone (never existed, or carry another uid) is collected when it
//! is written; a reference to an absent owner is removed when another owner remains.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::Status;
use crate::core::Core;
use crate::object::{StoredObject, store_key};
use crate::propagation::{FOREGROUND, ORPHAN, Propagation, finalizers};
use crate::resource::ResourceInfo;
use crate::store::Change;
use crate::writes::Target;

/// An object that names an owner: where it is stored and its current state.
struct Dependent {
    resource: ResourceInfo,
    object: Arc<StoredObject>,
    value: Value,
}

impl Dependent {
    fn target(&self) -> Target<'_> {
        Target::new(&self.resource, self.object.namespace.as_deref())
    }

    /// Whether this dependent keeps the owner `uid` from going in a foreground deletion.
    fn blocks(&self, uid: &str) -> bool {
        owner_references(&self.value)
            .iter()
            .any(|r| ref_uid(r) == Some(uid) && r.get("blockOwnerDeletion") == Some(&json!(true)))
    }
}

/// How an owner reference resolves.
#[derive(Debug, PartialEq, Eq)]
enum OwnerState {
    /// The owner exists with this uid and is not being deleted in the foreground.
    Solid,
    /// No such owner (or one with another uid).
    Absent,
    /// The owner is being deleted in the foreground.
    Waiting,
    /// The owner's kind is not served: left alone.
    Unknown,
}

impl Core {
    /// Every stored object with an owner reference to `uid`.
    fn dependents_of(&self, uid: &str) -> Vec<Dependent> {
        let mut seen = Vec::new();
        let mut found = Vec::new();
        for resource in self.registry.all() {
            let storage_key = resource.storage_key();
            if seen.contains(&storage_key) {
                continue;
            }
            let candidates: Vec<Arc<StoredObject>> = self.store.read(&storage_key, |c, _| {
                c.objects
                    .values()
                    .filter(|o| contains(&o.json, uid.as_bytes()))
                    .cloned()
                    .collect()
            });
            for object in candidates {
                let Ok(value) = object.to_value() else {
                    continue;
                };
                if owner_references(&value)
                    .iter()
                    .any(|r| ref_uid(r) == Some(uid))
                {
                    found.push(Dependent {
                        resource: resource.clone(),
                        object,
                        value,
                    });
                }
            }
            seen.push(storage_key);
        }
        found
    }

    /// Whether the object with `uid` has any dependents.
    pub(crate) fn has_dependents(&self, uid: &str) -> bool {
        !self.dependents_of(uid).is_empty()
    }

    /// Orphans the dependents of the owner `uid` (removes their references to it), then lets
    /// the owner go: its `orphan` finalizer is removed.
    pub(crate) fn finish_orphaning(
        &self,
        owner: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
    ) -> Result<(), Status> {
        for dependent in self.dependents_of(uid) {
            self.remove_owner_references(&dependent, &[uid])?;
        }
        self.remove_finalizer(owner, namespace, name, uid, ORPHAN)
    }

    /// Deletes the dependents of the owner `uid`, which is being deleted in the foreground, each
    /// in the foreground too, then lets the owner go if nothing blocks it.
    pub(crate) fn delete_dependents_in_foreground(
        &self,
        owner: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
    ) -> Result<(), Status> {
        for dependent in self.dependents_of(uid) {
            ignore_not_found(self.delete(
                &dependent.target(),
                &dependent.object.name,
                &Propagation::Foreground.as_options(),
            ))?;
        }
        self.finish_foreground(owner, namespace, name, uid)
    }

    /// Removes the `foregroundDeletion` finalizer from the owner once no dependent with
    /// `blockOwnerDeletion` remains (the owner is then removed if no other finalizer holds it).
    fn finish_foreground(
        &self,
        owner: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
    ) -> Result<(), Status> {
        if self.dependents_of(uid).iter().any(|d| d.blocks(uid)) {
            return Ok(());
        }
        self.remove_finalizer(owner, namespace, name, uid, FOREGROUND)
    }

    /// Removes `finalizer` from the object `name` if it still has `uid`.
    fn remove_finalizer(
        &self,
        resource: &ResourceInfo,
        namespace: Option<&str>,
        name: &str,
        uid: &str,
        finalizer: &str,
    ) -> Result<(), Status> {
        let target = Target::new(resource, namespace);
        let result = self.edit(&target, name, |object| {
            if object.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
                return false;
            }
            let Some(list) = object
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            else {
                return false;
            };
            let before = list.len();
            list.retain(|f| f.as_str() != Some(finalizer));
            list.len() != before
        });
        ignore_not_found(result)
    }

    /// What the collector does after `object` left the store: its dependents are deleted (or
    /// lose the reference, when another owner remains), and owners waiting for it in a
    /// foreground deletion are re-examined.
    pub(crate) fn collect_after_removal(&self, object: &Value) -> Result<(), Status> {
        if let Some(uid) = object.pointer("/metadata/uid").and_then(Value::as_str) {
            for dependent in self.dependents_of(uid) {
                self.collect_if_garbage(&dependent)?;
            }
        }
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        self.release_waiting_owners(namespace, object)
    }

    /// What the collector does after `object` was created or changed: if its owners are all
    /// absent it is deleted; references to absent owners are dropped when another owner
    /// remains; owners it no longer names that wait in a foreground deletion are re-examined.
    pub(crate) fn collect_after_write(
        &self,
        resource: &ResourceInfo,
        old: Option<&Value>,
        stored: &Arc<StoredObject>,
    ) -> Result<(), Status> {
        let value = stored.to_value()?;
        let refs = owner_references(&value);
        if let Some(old) = old {
            let old_refs = owner_references(old);
            if old_refs == refs {
                return Ok(());
            }
            self.release_waiting_owners(stored.namespace.as_deref(), old)?;
        }
        if refs.is_empty() {
            return Ok(());
        }
        self.collect_if_garbage(&Dependent {
            resource: resource.clone(),
            object: Arc::clone(stored),
            value,
        })
    }

    /// The garbage collector's decision for one dependent, from the state of its owners.
    fn collect_if_garbage(&self, dependent: &Dependent) -> Result<(), Status> {
        let namespace = dependent.object.namespace.as_deref();
        let states: Vec<(String, OwnerState)> = owner_references(&dependent.value)
            .iter()
            .filter_map(|r| Some((ref_uid(r)?.to_owned(), self.owner_state(namespace, r))))
            .collect();
        if states.is_empty() {
            return Ok(());
        }
        let solid = states
            .iter()
            .any(|(_, s)| matches!(s, OwnerState::Solid | OwnerState::Unknown));
        if solid {
            let gone: Vec<&str> = states
                .iter()
                .filter(|(_, s)| matches!(s, OwnerState::Absent | OwnerState::Waiting))
                .map(|(uid, _)| uid.as_str())
                .collect();
            if gone.is_empty() {
                return Ok(());
            }
            return self.remove_owner_references(dependent, &gone);
        }
        let waiting = states.iter().any(|(_, s)| *s == OwnerState::Waiting);
        let requested = waiting.then_some(Propagation::Foreground);
        let policy = Propagation::for_object(requested, &dependent.value);
        ignore_not_found(self.delete(
            &dependent.target(),
            &dependent.object.name,
            &policy.as_options(),
        ))
    }

    /// The owners of `object` that wait for it in a foreground deletion may go now.
    fn release_waiting_owners(
        &self,
        namespace: Option<&str>,
        object: &Value,
    ) -> Result<(), Status> {
        for reference in owner_references(object) {
            if self.owner_state(namespace, &reference) != OwnerState::Waiting {
                continue;
            }
            let (Some(owner), Some(name), Some(uid)) = (
                self.owner_resource(&reference),
                reference.get("name").and_then(Value::as_str),
                ref_uid(&reference),
            ) else {
                continue;
            };
            let owner_namespace = if owner.namespaced { namespace } else { None };
            self.finish_foreground(&owner, owner_namespace, name, uid)?;
        }
        Ok(())
    }

    /// The resource an owner reference points at, by apiVersion and kind (any served version
    /// of the group).
    fn owner_resource(&self, reference: &Value) -> Option<ResourceInfo> {
        let api_version = reference.get("apiVersion").and_then(Value::as_str)?;
        let kind = reference.get("kind").and_then(Value::as_str)?;
        self.registry.find_kind(api_version, kind).or_else(|| {
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            self.registry
                .all()
                .into_iter()
                .find(|r| r.group == group && r.kind == kind)
        })
    }

    fn owner_state(&self, namespace: Option<&str>, reference: &Value) -> OwnerState {
        let Some(owner) = self.owner_resource(reference) else {
            return OwnerState::Unknown;
        };
        let (Some(name), Some(uid)) = (
            reference.get("name").and_then(Value::as_str),
            ref_uid(reference),
        ) else {
            return OwnerState::Absent;
        };
        if owner.namespaced && namespace.is_none() {
            return OwnerState::Absent;
        }
        let owner_namespace = if owner.namespaced { namespace } else { None };
        let Some(stored) = self
            .store
            .get(&owner.storage_key(), &store_key(owner_namespace, name))
        else {
            return OwnerState::Absent;
        };
        let Ok(value) = stored.to_value() else {
            return OwnerState::Absent;
        };
        if value.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
            return OwnerState::Absent;
        }
        if value.pointer("/metadata/deletionTimestamp").is_some()
            && finalizers(&value).contains(&FOREGROUND)
        {
            OwnerState::Waiting
        } else {
            OwnerState::Solid
        }
    }

    /// Removes the references to `uids` from a dependent (a metadata-only change).
    fn remove_owner_references(&self, dependent: &Dependent, uids: &[&str]) -> Result<(), Status> {
        let result = self.edit(&dependent.target(), &dependent.object.name, |object| {
            let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
                return false;
            };
            let Some(refs) = meta
                .get_mut("ownerReferences")
                .and_then(Value::as_array_mut)
            else {
                return false;
            };
            let before = refs.len();
            refs.retain(|r| !ref_uid(r).is_some_and(|uid| uids.contains(&uid)));
            if refs.len() == before {
                return false;
            }
            if refs.is_empty() {
                meta.remove("ownerReferences");
            }
            true
        });
        ignore_not_found(result)
    }

    /// A server-side edit of a stored object's metadata: `change` returns whether it changed
    /// anything. The object is removed when the edit leaves a deleted object without finalizers.
    fn edit(
        &self,
        target: &Target<'_>,
        name: &str,
        change: impl FnOnce(&mut Value) -> bool,
    ) -> Result<(), Status> {
        let resource = target.resource;
        let key = store_key(target.object_namespace(), name);
        let plural = resource.qualified_plural();
        let mut removed = false;
        let stored = self.store.write(
            &resource.storage_key(),
            &key,
            &resource.selectable_fields,
            false,
            |current, _| {
                let current = current.ok_or_else(|| Status::not_found(&plural, name))?;
                let mut object = current.to_value()?;
                if !change(&mut object) {
                    return Ok(Change::Unchanged);
                }
                if object.pointer("/metadata/deletionTimestamp").is_some()
                    && finalizers(&object).is_empty()
                {
                    removed = true;
                    return Ok(Change::Remove(object));
                }
                Ok(Change::Put(object))
            },
        )?;
        if removed {
            self.after_removal(resource, &stored)?;
        }
        Ok(())
    }
}

fn ignore_not_found(result: Result<impl Sized, Status>) -> Result<(), Status> {
    match result {
        Ok(_) => Ok(()),
        Err(status) if status.code == 404 => Ok(()),
        Err(status) => Err(status),
    }
}

fn owner_references(object: &Value) -> Vec<Value> {
    object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn ref_uid(reference: &Value) -> Option<&str> {
    reference.get("uid").and_then(Value::as_str)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

//! The host's own model of what a plugin declares: resource types, subscriptions, indexes and
//! the declaration itself. Every contract version's declaration is converted into these once,
//! at the edge (the 0.1 types in `instance.rs`, the 0.2 ones in `declare.rs`); grants, key rules,
//! the cache view and the plugin manager use only these, never a generated binding type.

/// A resource type as a plugin names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Gvk {
    /// The API group (empty for the core group).
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// How a subscription's objects reach the plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Event handlers are called, and the cache can be queried.
    Events,
    /// The cache can be queried; no handler is called.
    CacheOnly,
}

/// One resource type a plugin watches or reads, and which of its objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    pub gvk: Gvk,
    /// Only this namespace (`None`: all, or a cluster-scoped resource).
    pub namespace: Option<String>,
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// How often to replay every cached object as an update (`None`: never).
    pub resync_seconds: Option<u32>,
    pub delivery: Delivery,
}

/// What a declared index computes from each object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexSource {
    /// The value of this label (the key a qualified name: `app`, `example.com/tier`).
    Label(String),
    /// The value of this annotation (the key a qualified name).
    Annotation(String),
    /// The values at this dotted field path (`spec.nodeName`). The path crosses lists: where
    /// it reaches a list it goes on into each element, so `spec.containers.image` yields each
    /// container's image, and a list of scalars at its end yields each element. Strings,
    /// numbers and bools index as their text; objects and nulls not at all.
    Field(String),
    /// The UID of each owner reference.
    OwnerUid,
}

/// An index a plugin declares on one of its subscribed resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDecl {
    pub name: String,
    pub gvk: Gvk,
    pub source: IndexSource,
}

/// What a plugin's `init` declared: its name, subscriptions and indexes (for a 0.2 plugin,
/// subscriptions by type and indexes on the type of their subscription handle).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    pub name: String,
    pub subscriptions: Vec<Subscription>,
    pub indexes: Vec<IndexDecl>,
}

//! What a plugin may read and how much it may use: its read grants (the resources it may
//! subscribe to and query), its instance limits and its declaration limits.

use std::time::Duration;

use crate::model::declared::Gvk;

/// The limits of one plugin instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How much running time one guest call (init or a handler) may use before it is
    /// interrupted (see the README: time waiting on the host does not count).
    pub call_deadline: Duration,
    /// The most linear memory, in bytes, one instance may hold.
    pub memory: usize,
    /// The most JSON, in bytes, one `list-objects` or `by-index` answer may carry; `None`: a
    /// quarter of `memory`. On 0.1 a larger answer is an `invalid` error value, never a fault;
    /// on 0.2 a page ends early at it, and only an object larger on its own is `invalid`.
    pub max_answer: Option<usize>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_deadline: Duration::from_secs(1),
            memory: 64 << 20,
            max_answer: None,
        }
    }
}

impl Limits {
    /// The most JSON one cache query may answer with.
    pub fn answer_budget(&self) -> usize {
        self.max_answer.unwrap_or(self.memory / 4)
    }
}

/// How much a plugin's `init` may declare, and how much indexing what it declares may cost.
/// The defaults are far above what a sane plugin declares; they stop a broken or hostile one
/// from making every `/metrics` scrape huge (a 10 MB name) or every event of a shared informer
/// slow for every plugin on it (100,000 indexes, or 128 field paths of 290 KB each).
///
/// Label and annotation keys are checked as Kubernetes qualified names (a DNS-1123 subdomain
/// prefix of at most 253 bytes, `/`, a name of at most 63), so their size is bounded by syntax;
/// field paths by [`max_field_path_bytes`](Self::max_field_path_bytes) and
/// [`max_field_path_depth`](Self::max_field_path_depth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclarationLimits {
    /// Longest plugin name, in bytes.
    pub max_name_bytes: usize,
    pub max_subscriptions: usize,
    /// Most indexes, of every source together.
    pub max_indexes: usize,
    /// Most field-path indexes. Each one reads the object's JSON again on every add and update
    /// of its informer (label, annotation and owner indexes read parsed metadata only).
    pub max_field_indexes: usize,
    /// Longest index name, in bytes (names are letters, digits, `-`, `_`, `.` and `:`).
    pub max_index_name_bytes: usize,
    /// Longest field path, in bytes.
    pub max_field_path_bytes: usize,
    /// Most segments of a field path (`spec.containers.image` has 3).
    pub max_field_path_depth: usize,
    /// Most values one object is filed under in one index (a field path crossing lists yields
    /// one per element); the values past it are not indexed.
    pub max_index_values: usize,
    /// Longest value kept as an index key, in bytes; an object is not filed under a longer
    /// value (an annotation may hold 256 KB; the index would keep each as a key).
    pub max_index_value_bytes: usize,
}

impl Default for DeclarationLimits {
    fn default() -> Self {
        DeclarationLimits {
            max_name_bytes: 253,
            max_subscriptions: 64,
            max_indexes: 128,
            max_field_indexes: 16,
            max_index_name_bytes: 63,
            max_field_path_bytes: 256,
            max_field_path_depth: 16,
            max_index_values: 64,
            max_index_value_bytes: 1024,
        }
    }
}

/// Matches resources by API group and kind; `*` matches any value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePattern {
    /// The API group (`""` for the core group) or `*`.
    pub group: String,
    /// The kind (`ConfigMap`) or `*`.
    pub kind: String,
}

impl ResourcePattern {
    /// A pattern for one group and kind (either may be `*`).
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        ResourcePattern {
            group: group.into(),
            kind: kind.into(),
        }
    }

    fn matches(&self, resource: &Gvk) -> bool {
        (self.group == "*" || self.group == resource.group)
            && (self.kind == "*" || self.kind == resource.kind)
    }

    /// Whether the pattern names core Secrets explicitly (not through `*`).
    fn names_secrets(&self) -> bool {
        self.group.is_empty() && self.kind == "Secret"
    }
}

/// The resources a plugin may subscribe to and query.
///
/// Secrets are special: a wildcard never grants them; only a pattern naming `""`/`Secret`
/// explicitly does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    allow: Vec<ResourcePattern>,
}

impl Grants {
    /// Everything except Secrets.
    pub fn all_but_secrets() -> Self {
        Grants {
            allow: vec![ResourcePattern::new("*", "*")],
        }
    }

    /// Nothing at all.
    pub fn none() -> Self {
        Grants { allow: Vec::new() }
    }

    /// Exactly the listed patterns.
    pub fn only(allow: Vec<ResourcePattern>) -> Self {
        Grants { allow }
    }

    /// The patterns granted.
    pub fn patterns(&self) -> &[ResourcePattern] {
        &self.allow
    }

    /// Whether the plugin may subscribe to and query `resource`.
    pub fn allows(&self, resource: &Gvk) -> bool {
        let is_secret = resource.group.is_empty() && resource.kind == "Secret";
        self.allow
            .iter()
            .any(|p| p.matches(resource) && (!is_secret || p.names_secrets()))
    }
}

impl ResourcePattern {
    /// `group/Kind` (`core/Pod` for the core group), as `check` and `/plugins` print it.
    pub fn describe(&self) -> String {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        format!("{group}/{}", self.kind)
    }
}

impl Grants {
    /// What the plugin may read, one entry per pattern (`*/*` and the like never include
    /// Secrets; `core/Secret` is shown when it is granted by name).
    pub fn describe(&self) -> Vec<String> {
        self.allow.iter().map(ResourcePattern::describe).collect()
    }
}

impl Default for Grants {
    fn default() -> Self {
        Grants::all_but_secrets()
    }
}

/// `group/version/Kind` (`v1/Pod` for the core group) for messages.
pub(crate) fn describe(resource: &Gvk) -> String {
    if resource.group.is_empty() {
        format!("{}/{}", resource.version, resource.kind)
    } else {
        format!("{}/{}/{}", resource.group, resource.version, resource.kind)
    }
}

/// Whether two resources name the same type (group and kind; any version).
pub(crate) fn same_type(a: &Gvk, b: &Gvk) -> bool {
    a.group == b.group && a.kind == b.kind
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(group: &str, kind: &str) -> Gvk {
        Gvk {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
        }
    }

    #[test]
    fn wildcard_grants_everything_but_secrets() {
        let g = Grants::all_but_secrets();
        assert!(g.allows(&res("", "ConfigMap")));
        assert!(g.allows(&res("apps", "Deployment")));
        assert!(!g.allows(&res("", "Secret")));
    }

    #[test]
    fn secrets_need_an_explicit_grant() {
        let g = Grants::only(vec![ResourcePattern::new("", "Secret")]);
        assert!(g.allows(&res("", "Secret")));
        assert!(!g.allows(&res("", "ConfigMap")));
        let g = Grants::only(vec![ResourcePattern::new("", "*")]);
        assert!(!g.allows(&res("", "Secret")));
    }

    #[test]
    fn a_secret_kind_in_another_group_is_not_special() {
        let g = Grants::all_but_secrets();
        assert!(g.allows(&res("example.com", "Secret")));
    }

    #[test]
    fn no_grants_allow_nothing() {
        assert!(!Grants::none().allows(&res("", "ConfigMap")));
    }
}

//! Maps a request path to what it addresses: a discovery document or a resource.

/// What a request path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Version,
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    ResourceList {
        group: String,
        version: String,
    },
    /// `/openapi/v2` or `/openapi/v3...`
    OpenApi,
    Resource(ResourcePath),
    Unknown,
}

/// A path under a group/version that names a resource, possibly one object and a subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Parses a (percent-decoded) request path.
pub(crate) fn parse(path: &str) -> Route {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "readyz" | "livez", ..] => Route::Health,
        ["openapi", ..] => Route::OpenApi,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let owned = |s: &str| s.to_owned();
    if rest.is_empty() {
        return Route::ResourceList {
            group: owned(group),
            version: owned(version),
        };
    }
    let namespace_subresource = rest.len() == 3 && matches!(rest[2], "status" | "finalize");
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() && !namespace_subresource => {
            (Some(owned(ns)), tail)
        }
        _ => (None, rest),
    };
    if rest.len() > 3 || rest.iter().any(|s| s.is_empty()) {
        return Route::Unknown;
    }
    Route::Resource(ResourcePath {
        group: owned(group),
        version: owned(version),
        namespace,
        plural: owned(rest[0]),
        name: rest.get(1).map(|s| owned(s)),
        subresource: rest.get(2).map(|s| owned(s)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_object_paths() {
        let r = resource("/api/v1/namespaces/ns/configmaps/cm");
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.plural, "configmaps");
        assert_eq!(r.name.as_deref(), Some("cm"));
        let r = resource("/apis/apps/v1/namespaces/ns/deployments/d/status");
        assert_eq!(r.group, "apps");
        assert_eq!(r.subresource.as_deref(), Some("status"));
    }

    #[test]
    fn namespaces_themselves_are_cluster_scoped() {
        let r = resource("/api/v1/namespaces/ns");
        assert_eq!((r.namespace, r.plural.as_str()), (None, "namespaces"));
        let r = resource("/api/v1/namespaces/ns/status");
        assert_eq!(r.name.as_deref(), Some("ns"));
        assert_eq!(r.subresource.as_deref(), Some("status"));
        let r = resource("/api/v1/namespaces/ns/pods");
        assert_eq!(r.namespace.as_deref(), Some("ns"));
        assert_eq!(r.name, None);
    }

    #[test]
    fn discovery_paths() {
        assert_eq!(parse("/api"), Route::CoreVersions);
        assert_eq!(parse("/apis/apps"), Route::Group("apps".into()));
        assert_eq!(
            parse("/apis/apps/v1"),
            Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/nope"), Route::Unknown);
        assert_eq!(parse("/api/v1/a/b/c/d"), Route::Unknown);
    }
}

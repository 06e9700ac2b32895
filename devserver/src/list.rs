//! LIST: a consistent page of a resource at one resourceVersion, with limit and continue.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};

use crate::Status;
use crate::filter::Filter;
use crate::object::StoredObject;
use crate::resource::ResourceInfo;
use crate::store::{Collection, Store};

/// The LIST parameters after parsing.
#[derive(Debug, Default)]
pub(crate) struct ListRequest {
    pub filter: Filter,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
}

impl ListRequest {
    /// The page size honoured. A LIST at `resourceVersion=0` (without `continue` or
    /// `resourceVersionMatch=Exact`) is answered as the API server's watch cache answers it:
    /// everything in one response, `limit` ignored, no continue token.
    fn page_size(&self) -> Option<usize> {
        let any_version = self.resource_version.as_deref() == Some("0")
            && self.continue_token.is_none()
            && self.resource_version_match.as_deref() != Some("Exact");
        self.limit.filter(|l| *l > 0 && !any_version)
    }
}

/// One page of results.
pub(crate) struct Page {
    pub items: Vec<Arc<StoredObject>>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
}

/// Where a page starts: the state at `resource_version`, keys after `after`.
struct Cursor {
    resource_version: Option<u64>,
    after: Option<String>,
}

/// Answers a LIST from the store.
pub(crate) fn list(
    store: &Store,
    storage_key: &str,
    request: &ListRequest,
) -> Result<Page, Status> {
    let cursor = cursor(request)?;
    store.read(storage_key, |collection, current| {
        let snapshot = cursor.resource_version.unwrap_or(current);
        if snapshot > current {
            return Err(Status::new(
                504,
                "Timeout",
                format!("Too large resource version: {snapshot}, current: {current}"),
            ));
        }
        if snapshot < current {
            collection.check_not_expired(snapshot).map_err(|e| {
                if request.continue_token.is_some() {
                    Status::expired(
                        "The provided continue parameter is too old to display a consistent \
                         list result. You can start a new list without the continue parameter.",
                    )
                } else {
                    e
                }
            })?;
        }
        Ok(page(collection, snapshot, cursor.after.as_deref(), request))
    })
}

fn cursor(request: &ListRequest) -> Result<Cursor, Status> {
    let rv = request.resource_version.as_deref().unwrap_or("");
    if let Some(token) = &request.continue_token {
        if !rv.is_empty() && rv != "0" {
            return Err(Status::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (resource_version, after) = decode_continue(token)?;
        return Ok(Cursor {
            resource_version: Some(resource_version),
            after: Some(after),
        });
    }
    let paginated = request.limit.is_some_and(|l| l > 0);
    let exact = match request.resource_version_match.as_deref() {
        // Without resourceVersionMatch, a paginated list at a non-zero version is exact.
        None | Some("") => paginated && !matches!(rv, "" | "0"),
        Some("NotOlderThan") => false,
        Some("Exact") => true,
        Some(other) => {
            return Err(Status::bad_request(format!(
                "unsupported resourceVersionMatch {other:?}"
            )));
        }
    };
    let parsed = match rv {
        "" => None,
        rv => Some(
            rv.parse::<u64>()
                .map_err(|_| Status::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    if exact && matches!(parsed, None | Some(0)) {
        return Err(Status::bad_request(
            "resourceVersionMatch=Exact requires a non-zero resourceVersion",
        ));
    }
    Ok(Cursor {
        resource_version: parsed.filter(|_| exact),
        after: None,
    })
}

/// The objects at `snapshot`, by rebuilding keys changed since then from the history.
fn page(
    collection: &Collection,
    snapshot: u64,
    after: Option<&str>,
    request: &ListRequest,
) -> Page {
    let filter = &request.filter;
    let prefix = filter.key_prefix();
    let mut overlay: BTreeMap<&str, Option<&Arc<StoredObject>>> = BTreeMap::new();
    for event in collection.events_after(snapshot) {
        overlay
            .entry(event.object.key.as_str())
            .or_insert(event.previous.as_ref());
    }
    let lower = match after {
        Some(key) => Bound::Excluded(key),
        None => Bound::Included(prefix.as_str()),
    };
    let in_prefix = |key: &str| key.starts_with(prefix.as_str());
    let mut live = collection
        .objects
        .range::<str, _>((lower, Bound::Unbounded))
        .map(|(k, v)| (k.as_str(), Some(v)))
        .take_while(|(k, _)| in_prefix(k))
        .peekable();
    let mut changed = overlay
        .range::<str, _>((lower, Bound::Unbounded))
        .map(|(k, v)| (*k, *v))
        .take_while(|(k, _)| in_prefix(k))
        .peekable();
    let merged = std::iter::from_fn(move || {
        let next = match (live.peek(), changed.peek()) {
            (None, None) => return None,
            (Some(_), None) => live.next(),
            (None, Some(_)) => changed.next(),
            (Some((l, _)), Some((c, _))) => match l.cmp(c) {
                std::cmp::Ordering::Less => live.next(),
                std::cmp::Ordering::Greater => changed.next(),
                std::cmp::Ordering::Equal => {
                    live.next();
                    changed.next()
                }
            },
        };
        Some(next.and_then(|(_, v)| v))
    })
    .flatten()
    .filter(|o| filter.matches(o));

    let limit = request.page_size().unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut more = false;
    for object in merged {
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(Arc::clone(object));
    }
    let continue_token = more
        .then(|| {
            items
                .last()
                .map(|last| encode_continue(snapshot, &last.key))
        })
        .flatten();
    Page {
        items,
        resource_version: snapshot,
        continue_token,
    }
}

fn encode_continue(resource_version: u64, key: &str) -> String {
    let mut token = format!("{resource_version}-");
    for b in key.bytes() {
        token.push_str(&format!("{b:02x}"));
    }
    token
}

fn decode_continue(token: &str) -> Result<(u64, String), Status> {
    let invalid = || Status::bad_request(format!("invalid continue token {token:?}"));
    let (rv, hex) = token.split_once('-').ok_or_else(invalid)?;
    let rv = rv.parse().map_err(|_| invalid())?;
    if hex.len() % 2 != 0 {
        return Err(invalid());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| invalid())?;
    let key = String::from_utf8(bytes).map_err(|_| invalid())?;
    Ok((rv, key))
}

/// The `<Kind>List` JSON, concatenating the stored objects' bytes.
pub(crate) fn list_body(resource: &ResourceInfo, page: &Page) -> Bytes {
    let size: usize = page.items.iter().map(|o| o.json.len() + 1).sum();
    let mut buf = BytesMut::with_capacity(size + 256);
    buf.put_slice(b"{\"kind\":\"");
    buf.put_slice(resource.kind.as_bytes());
    buf.put_slice(b"List\",\"apiVersion\":\"");
    buf.put_slice(resource.api_version().as_bytes());
    buf.put_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
    buf.put_slice(page.resource_version.to_string().as_bytes());
    buf.put_slice(b"\"");
    if let Some(token) = &page.continue_token {
        buf.put_slice(b",\"continue\":\"");
        buf.put_slice(token.as_bytes());
        buf.put_slice(b"\"");
    }
    buf.put_slice(b"},\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        buf.put_slice(&item.json);
    }
    buf.put_slice(b"]}");
    buf.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Change;
    use serde_json::json;

    fn put(store: &Store, ns: &str, name: &str, data: &str) {
        store
            .write(
                "/configmaps",
                &format!("{ns}/{name}"),
                &[],
                false,
                |_, _| {
                    Ok(Change::Put(json!({
                        "metadata": {"name": name, "namespace": ns}, "data": {"v": data}
                    })))
                },
            )
            .unwrap();
    }

    fn names(page: &Page) -> Vec<String> {
        page.items.iter().map(|o| o.key.clone()).collect()
    }

    #[test]
    fn pages_follow_key_order_and_end_without_token() {
        let store = Store::new(100);
        for name in ["c", "a", "b"] {
            put(&store, "ns", name, "1");
        }
        let mut request = ListRequest {
            limit: Some(2),
            ..ListRequest::default()
        };
        let first = list(&store, "/configmaps", &request).unwrap();
        assert_eq!(names(&first), ["ns/a", "ns/b"]);
        request.continue_token = first.continue_token.clone();
        let second = list(&store, "/configmaps", &request).unwrap();
        assert_eq!(names(&second), ["ns/c"]);
        assert!(second.continue_token.is_none());
        assert_eq!(second.resource_version, first.resource_version);
    }

    #[test]
    fn continued_pages_show_the_snapshot_not_later_writes() {
        let store = Store::new(100);
        put(&store, "ns", "a", "1");
        put(&store, "ns", "b", "1");
        let mut request = ListRequest {
            limit: Some(1),
            ..ListRequest::default()
        };
        let first = list(&store, "/configmaps", &request).unwrap();
        put(&store, "ns", "b", "2");
        put(&store, "ns", "c", "1");
        request.continue_token = first.continue_token.clone();
        let second = list(&store, "/configmaps", &request).unwrap();
        assert_eq!(names(&second), ["ns/b"]);
        let json = std::str::from_utf8(&second.items[0].json).unwrap();
        assert!(json.contains("\"v\":\"1\""), "{json}");
    }

    #[test]
    fn namespace_prefix_excludes_similar_names() {
        let store = Store::new(100);
        put(&store, "ns", "a", "1");
        put(&store, "ns2", "a", "1");
        let request = ListRequest {
            filter: Filter::parse(Some("ns".into()), None, None, &[]).unwrap(),
            ..ListRequest::default()
        };
        assert_eq!(
            names(&list(&store, "/configmaps", &request).unwrap()),
            ["ns/a"]
        );
    }

    #[test]
    fn expired_continue_token_is_gone() {
        let store = Store::new(100);
        put(&store, "ns", "a", "1");
        put(&store, "ns", "b", "1");
        let mut request = ListRequest {
            limit: Some(1),
            ..ListRequest::default()
        };
        let first = list(&store, "/configmaps", &request).unwrap();
        put(&store, "ns", "c", "1");
        store.compact();
        request.continue_token = first.continue_token;
        assert_eq!(
            list(&store, "/configmaps", &request).err().unwrap().code,
            410
        );
    }

    #[test]
    fn paginated_list_at_a_version_without_match_is_exact() {
        let store = Store::new(100);
        put(&store, "ns", "a", "1");
        let rv = store.resource_version();
        put(&store, "ns", "b", "1");
        let mut request = ListRequest {
            resource_version: Some(rv.to_string()),
            ..ListRequest::default()
        };
        assert_eq!(
            names(&list(&store, "/configmaps", &request).unwrap()).len(),
            2
        );
        request.limit = Some(10);
        assert_eq!(
            names(&list(&store, "/configmaps", &request).unwrap()),
            ["ns/a"]
        );
    }

    #[test]
    fn a_list_at_resource_version_zero_ignores_limit_as_the_watch_cache_does() {
        let store = Store::new(100);
        for name in ["a", "b", "c"] {
            put(&store, "ns", name, "1");
        }
        let mut request = ListRequest {
            resource_version: Some("0".into()),
            limit: Some(2),
            ..ListRequest::default()
        };
        let page = list(&store, "/configmaps", &request).unwrap();
        assert_eq!(names(&page), ["ns/a", "ns/b", "ns/c"]);
        assert!(page.continue_token.is_none());
        assert_eq!(page.resource_version, store.resource_version());
        request.resource_version = None;
        let first = list(&store, "/configmaps", &request).unwrap();
        assert_eq!(names(&first).len(), 2, "without a version the limit holds");
        assert!(first.continue_token.is_some());
    }

    #[test]
    fn malformed_continue_token_is_a_bad_request() {
        let store = Store::new(100);
        let request = ListRequest {
            continue_token: Some("zz".into()),
            ..ListRequest::default()
        };
        assert_eq!(
            list(&store, "/configmaps", &request).err().unwrap().code,
            400
        );
    }

    #[test]
    fn body_concatenates_items() {
        let store = Store::new(100);
        put(&store, "ns", "a", "1");
        let page = list(&store, "/configmaps", &ListRequest::default()).unwrap();
        let resource = crate::resource::builtins()
            .into_iter()
            .find(|r| r.plural == "configmaps")
            .unwrap();
        let body: serde_json::Value = serde_json::from_slice(&list_body(&resource, &page)).unwrap();
        assert_eq!(body["kind"], "ConfigMapList");
        assert_eq!(body["items"][0]["metadata"]["name"], "a");
    }
}

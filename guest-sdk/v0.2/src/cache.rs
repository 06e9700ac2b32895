//! Typed reads of the host's informer caches: `Cache<K>` over the `cache` import, answering
//! `K`s instead of JSON text.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use crate::bindings::kubewasm::controller0_2_0::cache as wit;
use crate::bindings::kubewasm::controller0_2_0::types::{CacheError, PageRequest};
use crate::error::Error;

/// A page of typed objects and the token of the next page (`None` on the last).
#[derive(Debug, Clone, PartialEq)]
pub struct Page<K> {
    pub items: Vec<K>,
    pub continue_token: Option<String>,
}

/// Reads the cache of one subscription, whose objects are `K`s.
///
/// ```no_run
/// use kubewasm_guest_v0_2::Cache;
/// use kubewasm_guest_v0_2::k8s_openapi::api::apps::v1::Deployment;
///
/// const DEPLOYMENTS: u32 = 1;
/// let deployments = Cache::<Deployment>::new(DEPLOYMENTS);
/// let web = deployments.get(Some("shop"), "web")?;
/// let labelled = deployments.list(Some("shop"), Some("app=web"))?;
/// # Ok::<(), kubewasm_guest_v0_2::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Cache<K> {
    subscription: u32,
    kind: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> Cache<K> {
    /// The cache of subscription `subscription` (its position in `init`'s declaration).
    pub fn new(subscription: u32) -> Self {
        Cache {
            subscription,
            kind: PhantomData,
        }
    }

    /// The object `name` in `namespace` (`None`: cluster-scoped), `None` if the cache has none.
    pub fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<K>, Error> {
        wit::get(self.subscription, namespace, name)
            .map_err(cache_error)?
            .map(|json| decode(&json))
            .transpose()
    }

    /// Every cached object, in one namespace or all, matching a label selector or all (pages
    /// of the host's default size, read to the end).
    pub fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<K>, Error> {
        all_pages(|page| self.list_page(namespace, label_selector, page))
    }

    /// One page of [`list`](Self::list): at most `limit` objects (0: the host's default) from
    /// `continue_token` (`None`: the first page).
    pub fn list_page(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        page: PageRequest,
    ) -> Result<Page<K>, Error> {
        let answer = wit::list_objects(self.subscription, namespace, label_selector, &page)
            .map_err(cache_error)?;
        decode_page(answer.objects, answer.continue_token)
    }

    /// Every cached object whose index `index` (declared in `init`) holds `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<K>, Error> {
        all_pages(|page| self.by_index_page(index, value, page))
    }

    /// One page of [`by_index`](Self::by_index).
    pub fn by_index_page(
        &self,
        index: &str,
        value: &str,
        page: PageRequest,
    ) -> Result<Page<K>, Error> {
        let answer = wit::by_index(self.subscription, index, value, &page).map_err(cache_error)?;
        decode_page(answer.objects, answer.continue_token)
    }

    /// How many objects [`list`](Self::list) would answer.
    pub fn count(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<u32, Error> {
        wit::count(self.subscription, namespace, label_selector).map_err(cache_error)
    }

    /// Whether the informer has finished its first list.
    pub fn has_synced(&self) -> Result<bool, Error> {
        wit::has_synced(self.subscription).map_err(cache_error)
    }
}

/// The first page: the host's default size.
pub fn first_page() -> PageRequest {
    PageRequest {
        limit: 0,
        continue_token: None,
    }
}

/// Reads pages with `read` from the first until one has no continue token.
fn all_pages<K>(
    mut read: impl FnMut(PageRequest) -> Result<Page<K>, Error>,
) -> Result<Vec<K>, Error> {
    let mut items = Vec::new();
    let mut page = first_page();
    loop {
        let answer = read(page)?;
        items.extend(answer.items);
        match answer.continue_token {
            Some(token) => {
                page = PageRequest {
                    limit: 0,
                    continue_token: Some(token),
                }
            }
            None => return Ok(items),
        }
    }
}

fn decode_page<K: DeserializeOwned>(
    objects: Vec<String>,
    continue_token: Option<String>,
) -> Result<Page<K>, Error> {
    Ok(Page {
        items: objects
            .iter()
            .map(|json| decode(json))
            .collect::<Result<_, _>>()?,
        continue_token,
    })
}

fn decode<K: DeserializeOwned>(json: &str) -> Result<K, Error> {
    serde_json::from_str(json).map_err(|e| Error(format!("a cached object does not decode: {e}")))
}

/// A cache error as a reconcile error, saying what went wrong.
pub(crate) fn cache_error(error: CacheError) -> Error {
    Error(match error {
        CacheError::UnknownSubscription(h) => format!("no subscription has handle {h}"),
        CacheError::UnknownIndex(i) => format!("no index {i:?}"),
        CacheError::Invalid(m) => format!("invalid cache query: {m}"),
        CacheError::TooLarge(max) => format!("page larger than the host's maximum of {max}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_read_to_the_end_in_order() {
        let mut pages = vec![
            Page {
                items: vec![1, 2],
                continue_token: Some("a".into()),
            },
            Page {
                items: vec![3],
                continue_token: None,
            },
        ]
        .into_iter();
        let mut asked = Vec::new();
        let all = all_pages(|page| {
            asked.push(page.continue_token);
            Ok(pages.next().expect("no page asked past the last"))
        });
        assert_eq!(all, Ok(vec![1, 2, 3]));
        assert_eq!(asked, [None, Some("a".to_owned())]);
    }

    #[test]
    fn a_bad_page_fails_the_read_and_bad_json_names_itself() {
        let failed: Result<Vec<u8>, _> = all_pages(|_| Err(Error("boom".into())));
        assert_eq!(failed, Err(Error("boom".into())));
        let bad = decode_page::<serde_json::Value>(vec!["{".into()], None).unwrap_err();
        assert!(bad.0.contains("does not decode"), "{bad}");
        assert_eq!(
            cache_error(CacheError::TooLarge(500)).0,
            "page larger than the host's maximum of 500"
        );
    }
}

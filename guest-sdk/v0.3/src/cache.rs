//! Typed reads of the host's informer caches during a review: `Cache<K>` over the `cache`
//! import, answering `K`s instead of JSON text. A policy subscribes (cache only, see
//! [`subscribe`](crate::subscribe)) in `init` to what it reads.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;

use crate::bindings::kubewasm::controller0_2_0::cache as wit;
use crate::bindings::kubewasm::controller0_2_0::types::{CacheError, PageRequest};
use crate::error::Error;

/// Reads the cache of one subscription, whose objects are `K`s.
///
/// ```no_run
/// use kubewasm_guest_v0_3::Cache;
/// use kubewasm_guest_v0_3::k8s_openapi::api::networking::v1::Ingress;
///
/// const INGRESSES: u32 = 0;
/// let ingresses = Cache::<Ingress>::new(INGRESSES);
/// let same_host = ingresses.by_index("host", "shop.example.com")?;
/// # Ok::<(), kubewasm_guest_v0_3::Error>(())
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

    /// Every cached object, in one namespace or all, matching a label selector or all (read
    /// to the last page).
    pub fn list(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<K>, Error> {
        all_pages(|page| {
            let answer = wit::list_objects(self.subscription, namespace, label_selector, &page)
                .map_err(cache_error)?;
            Ok((answer.objects, answer.continue_token))
        })
    }

    /// Every cached object whose index `index` (declared in `init`) holds `value`.
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<K>, Error> {
        all_pages(|page| {
            let answer =
                wit::by_index(self.subscription, index, value, &page).map_err(cache_error)?;
            Ok((answer.objects, answer.continue_token))
        })
    }

    /// How many objects [`list`](Self::list) would answer.
    pub fn count(
        &self,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<u32, Error> {
        wit::count(self.subscription, namespace, label_selector).map_err(cache_error)
    }

    /// Whether the informer has finished its first list: before it, an empty answer does not
    /// mean there is nothing.
    pub fn has_synced(&self) -> Result<bool, Error> {
        wit::has_synced(self.subscription).map_err(cache_error)
    }
}

/// Reads pages of JSON with `read` from the first (the host's default size) until one has no
/// continue token, decoding every object.
fn all_pages<K: DeserializeOwned>(
    mut read: impl FnMut(PageRequest) -> Result<(Vec<String>, Option<String>), Error>,
) -> Result<Vec<K>, Error> {
    let mut items = Vec::new();
    let mut continue_token = None;
    loop {
        let (objects, next) = read(PageRequest {
            limit: 0,
            continue_token,
        })?;
        for json in &objects {
            items.push(decode(json)?);
        }
        match next {
            Some(token) => continue_token = Some(token),
            None => return Ok(items),
        }
    }
}

fn decode<K: DeserializeOwned>(json: &str) -> Result<K, Error> {
    serde_json::from_str(json).map_err(|e| Error(format!("a cached object does not decode: {e}")))
}

/// A cache error as a review error, saying what went wrong.
fn cache_error(error: CacheError) -> Error {
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
    fn pages_are_read_to_the_end_in_order_and_decoded() {
        let mut pages = vec![
            (vec!["1".to_owned(), "2".to_owned()], Some("a".to_owned())),
            (vec!["3".to_owned()], None),
        ]
        .into_iter();
        let mut asked = Vec::new();
        let all: Result<Vec<u32>, _> = all_pages(|page| {
            asked.push(page.continue_token);
            Ok(pages.next().expect("no page asked past the last"))
        });
        assert_eq!(all, Ok(vec![1, 2, 3]));
        assert_eq!(asked, [None, Some("a".to_owned())]);
    }

    #[test]
    fn a_bad_page_or_object_fails_the_read_and_says_why() {
        let failed: Result<Vec<u8>, _> = all_pages(|_| Err(Error("boom".into())));
        assert_eq!(failed, Err(Error("boom".into())));
        let bad: Result<Vec<u8>, _> = all_pages(|_| Ok((vec!["{".into()], None)));
        assert!(bad.unwrap_err().0.contains("does not decode"));
        assert_eq!(
            cache_error(CacheError::UnknownIndex("host".into())).0,
            "no index \"host\""
        );
    }
}

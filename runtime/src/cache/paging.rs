//! Bounded answers for the 0.2 `cache` queries: results in key order, cut into pages with an
//! opaque continue token, so that no single call hands a guest an unbounded list.
//!
//! A token is the last key of the previous page: the next page starts after it, whatever was
//! added or removed meanwhile (pages are not a snapshot, like the API server's continue without
//! a resourceVersion).

/// Page sizes the host allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimits {
    /// Items per page when the guest asks for limit 0.
    pub default: u32,
    /// The most items per page; a larger limit is `TooLarge`.
    pub max: u32,
}

impl Default for PageLimits {
    fn default() -> Self {
        PageLimits {
            default: 500,
            max: 5000,
        }
    }
}

/// Why a page could not be cut.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// The limit asked for is above the maximum (the payload).
    #[error("a page holds at most {0} items")]
    TooLarge(u32),
    /// The token was not issued by this host.
    #[error("invalid continue token: {0}")]
    BadToken(String),
}

/// One page and the token for the next (`None` on the last page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub continue_token: Option<String>,
}

const TOKEN_PREFIX: &str = "kw1.";

/// The page of `items` that follows `token`, in the order of `key`, of at most `limit` items
/// (0: the default size).
pub fn page<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> &str,
    limit: u32,
    token: Option<&str>,
    limits: PageLimits,
) -> Result<Page<T>, PageError> {
    if limit > limits.max {
        return Err(PageError::TooLarge(limits.max));
    }
    let size = usize::try_from(if limit == 0 { limits.default } else { limit })
        .unwrap_or(usize::MAX)
        .max(1);
    let after = token.map(decode).transpose()?;
    items.sort_unstable_by(|a, b| key(a).cmp(key(b)));
    let start = match &after {
        Some(last) => items.partition_point(|item| key(item) <= last.as_str()),
        None => 0,
    };
    let mut rest: Vec<T> = items.drain(start..).collect();
    let continue_token = (rest.len() > size).then(|| encode(key(&rest[size - 1])));
    rest.truncate(size);
    Ok(Page {
        items: rest,
        continue_token,
    })
}

/// Ends `page` early where its items' `size` would add up to more than `budget` bytes,
/// its continue token then following the last item kept, so that the next page goes on from
/// there. `Err` with the first item's size when that item alone is over: no page can hold it.
pub fn within_budget<T>(
    page: &mut Page<T>,
    key: impl Fn(&T) -> &str,
    size: impl Fn(&T) -> usize,
    budget: usize,
) -> Result<(), usize> {
    let mut total = 0usize;
    let fits = page
        .items
        .iter()
        .take_while(|item| {
            total = total.saturating_add(size(item));
            total <= budget
        })
        .count();
    if fits == page.items.len() {
        return Ok(());
    }
    if fits == 0 {
        return Err(page.items.first().map_or(0, size));
    }
    page.items.truncate(fits);
    page.continue_token = Some(encode(key(&page.items[fits - 1])));
    Ok(())
}

fn encode(key: &str) -> String {
    let mut token = String::with_capacity(TOKEN_PREFIX.len() + key.len() * 2);
    token.push_str(TOKEN_PREFIX);
    for byte in key.bytes() {
        token.push_str(&format!("{byte:02x}"));
    }
    token
}

fn decode(token: &str) -> Result<String, PageError> {
    let bad = || PageError::BadToken(token.chars().take(64).collect());
    let hex = token.strip_prefix(TOKEN_PREFIX).ok_or_else(bad)?;
    if hex.len() % 2 != 0 {
        return Err(bad());
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2).ok_or_else(bad)?, 16).map_err(|_| bad()))
        .collect::<Result<Vec<u8>, _>>()?;
    String::from_utf8(bytes).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        // Out of order on purpose: pages come in key order whatever the store's order.
        (0..n).rev().map(|i| format!("ns/obj-{i:03}")).collect()
    }

    fn limits(default: u32, max: u32) -> PageLimits {
        PageLimits { default, max }
    }

    #[test]
    fn a_page_over_its_byte_budget_ends_early_and_the_next_goes_on_from_there() {
        // Ten keys of 10 bytes each, a budget of 35 bytes: pages of three.
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut page = page(keys(10), |k| k, 0, token.as_deref(), limits(500, 5000)).unwrap();
            within_budget(&mut page, |k| k, String::len, 35).unwrap();
            assert!(page.items.len() <= 3, "{:?}", page.items);
            seen.extend(page.items);
            match page.continue_token {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        let mut all = keys(10);
        all.sort();
        assert_eq!(seen, all);

        let mut whole = page(keys(4), |k| k, 0, None, limits(500, 5000)).unwrap();
        within_budget(&mut whole, |k| k, String::len, 40).unwrap();
        assert_eq!((whole.items.len(), whole.continue_token), (4, None));

        let mut over = page(keys(2), |k| k, 0, None, limits(500, 5000)).unwrap();
        assert_eq!(within_budget(&mut over, |k| k, String::len, 9), Err(10));
    }

    #[test]
    fn pages_walk_every_item_once_in_key_order() {
        let mut seen = Vec::new();
        let mut token: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = page(keys(10), |k| k, 3, token.as_deref(), limits(500, 5000)).unwrap();
            pages += 1;
            seen.extend(page.items);
            match page.continue_token {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, 4);
        let mut expected = keys(10);
        expected.sort();
        assert_eq!(seen, expected);
    }

    #[test]
    fn an_exact_fit_has_no_next_page_and_zero_means_the_default() {
        let one = page(keys(3), |k| k, 3, None, limits(2, 10)).unwrap();
        assert_eq!((one.items.len(), one.continue_token), (3, None));
        let default = page(keys(3), |k| k, 0, None, limits(2, 10)).unwrap();
        assert_eq!(default.items.len(), 2);
        assert!(default.continue_token.is_some());
    }

    #[test]
    fn items_removed_or_added_behind_the_token_do_not_shift_the_next_page() {
        let first = page(keys(6), |k| k, 2, None, limits(500, 5000)).unwrap();
        let token = first.continue_token.unwrap();
        let mut changed = keys(6);
        changed.retain(|k| k != "ns/obj-000");
        changed.push("ns/obj-0005".into());
        let next = page(changed, |k| k, 2, Some(&token), limits(500, 5000)).unwrap();
        assert_eq!(next.items, ["ns/obj-002", "ns/obj-003"]);
    }

    #[test]
    fn too_large_limits_and_foreign_tokens_are_errors() {
        assert_eq!(
            page(keys(3), |k| k, 11, None, limits(2, 10)).unwrap_err(),
            PageError::TooLarge(10)
        );
        for token in ["", "abc", "kw1.zz", "kw1.6", "kw1.ff"] {
            let error = page(keys(3), |k| k, 1, Some(token), limits(2, 10)).unwrap_err();
            assert!(matches!(error, PageError::BadToken(_)), "{token:?}");
        }
    }
}

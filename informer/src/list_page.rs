//! One page of a LIST: what a lister answers and a list body parses into.

use crate::object::Object;

/// One page of a LIST.
#[derive(Debug)]
pub struct ListPage {
    /// The objects on this page.
    pub items: Vec<Object>,
    /// The list's resourceVersion (meaningful on the last page: watch from there).
    pub resource_version: String,
    /// The token for the next page; `None` on the last page.
    pub continue_token: Option<String>,
}

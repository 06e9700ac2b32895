//! A plugin's read access to the shared cache, and its answers cut into bounded pages.

pub(crate) mod access;
pub(crate) mod paging;

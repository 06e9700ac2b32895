//! Kubernetes label and field selectors: parse the API server's syntax and match objects.
//!
//! ```
//! use kubewasm_labels::Selector;
//! let selector = Selector::parse("app=web,tier in (front, back),!legacy").unwrap();
//! let labels = [("app", "web"), ("tier", "front")];
//! let lookup = |key: &str| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
//! assert!(selector.matches(lookup));
//! assert_eq!(selector.to_string(), "app=web,!legacy,tier in (back,front)");
//! ```

mod error;
mod field;
mod label;
mod lexer;
mod validate;

pub use error::ParseError;
pub use field::FieldSelector;
pub use label::Selector;

//! The names a piece of Rust source refers to: every path written in its code (types,
//! expressions, patterns, trait bounds, macro invocations and the tokens inside macro calls),
//! and the leaves of its `use` trees. Comments and literals are not tokens of a parsed file, so
//! nothing in them is ever read; attributes are skipped, and so is code compiled only for tests.

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};
use syn::{Attribute, Ident, ImplItem, Item, Meta, Token, TraitItem, UseTree};

/// A path as written, one string per segment. A path that starts with `::` (an external
/// crate's) has an empty first segment.
pub type Segments = Vec<String>;

/// One leaf of a `use` tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UseLeaf {
    /// `use a::b;`, `use a::b as c;` (name `c`), `use a::{self};` (name `a`); no name for
    /// `use a::Trait as _;`.
    Name {
        name: Option<String>,
        path: Segments,
    },
    /// `use a::*;`: the path of the module whose names are brought in.
    Glob { path: Segments },
}

impl UseLeaf {
    /// The path the leaf names (the module, for a glob).
    pub fn path(&self) -> &Segments {
        match self {
            UseLeaf::Name { path, .. } | UseLeaf::Glob { path } => path,
        }
    }
}

/// What one item's code names.
#[derive(Debug, Default)]
pub struct Names {
    /// Paths in code, in the scope of the module that holds the item.
    pub paths: Vec<Segments>,
    /// The paths of macro calls (`crate::log!`), which name macros only.
    pub macros: Vec<Segments>,
    /// `use` items nested in the item's bodies (a `use` inside a function).
    pub uses: Vec<UseLeaf>,
}

/// The paths and nested `use` leaves of `item`'s code (not `item` itself when it is a `use`,
/// whose leaves are [`use_leaves`]).
pub fn of_item(item: &Item) -> Names {
    let mut names = Names::default();
    visit::visit_item(&mut Collector { names: &mut names }, item);
    names
}

/// The leaves of a `use` tree, each with its whole path.
pub fn use_leaves(tree: &UseTree, leading_colon: bool) -> Vec<UseLeaf> {
    let mut leaves = Vec::new();
    let prefix = if leading_colon {
        vec![String::new()]
    } else {
        Vec::new()
    };
    flatten(tree, prefix, &mut leaves);
    leaves
}

fn flatten(tree: &UseTree, mut prefix: Segments, leaves: &mut Vec<UseLeaf>) {
    match tree {
        UseTree::Path(path) => {
            prefix.push(name(&path.ident));
            flatten(&path.tree, prefix, leaves);
        }
        UseTree::Name(leaf) if leaf.ident == "self" => {
            let name = prefix.last().cloned();
            leaves.push(UseLeaf::Name { name, path: prefix });
        }
        UseTree::Name(leaf) => {
            let name = name(&leaf.ident);
            prefix.push(name.clone());
            leaves.push(UseLeaf::Name {
                name: Some(name),
                path: prefix,
            });
        }
        UseTree::Rename(rename) => {
            let alias = name(&rename.rename);
            if rename.ident != "self" {
                prefix.push(name(&rename.ident));
            }
            leaves.push(UseLeaf::Name {
                name: (alias != "_").then_some(alias),
                path: prefix,
            });
        }
        UseTree::Glob(_) => leaves.push(UseLeaf::Glob { path: prefix }),
        UseTree::Group(group) => {
            for tree in &group.items {
                flatten(tree, prefix.clone(), leaves);
            }
        }
    }
}

/// Whether code under `attrs` is compiled only for tests: `#[cfg(test)]`,
/// `#[cfg(all(test, …))]`, or a test function (`#[test]`, `#[tokio::test]`).
pub fn only_for_tests(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|attr| {
        let path = attr.path();
        if path.segments.last().is_some_and(|s| s.ident == "test") {
            return true;
        }
        path.is_ident("cfg")
            && attr
                .parse_args::<Meta>()
                .is_ok_and(|meta| requires_test(&meta))
    })
}

/// Whether a `cfg` predicate holds only when `test` does.
fn requires_test(predicate: &Meta) -> bool {
    match predicate {
        Meta::Path(path) => path.is_ident("test"),
        Meta::List(list) if list.path.is_ident("all") => list
            .parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
            .is_ok_and(|all| all.iter().any(requires_test)),
        _ => false,
    }
}

/// An identifier as a segment: `r#type` is `type`.
pub fn name(ident: &Ident) -> String {
    ident.unraw().to_string()
}

struct Collector<'a> {
    names: &'a mut Names,
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_attribute(&mut self, _: &'ast Attribute) {}

    fn visit_item(&mut self, item: &'ast Item) {
        if let Item::Use(item_use) = item {
            if !only_for_tests(&item_use.attrs) {
                let leaves = use_leaves(&item_use.tree, item_use.leading_colon.is_some());
                self.names.uses.extend(leaves);
            }
            return;
        }
        if !item_attrs(item).is_some_and(only_for_tests) {
            visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast ImplItem) {
        let attrs = match item {
            ImplItem::Const(c) => &c.attrs,
            ImplItem::Fn(f) => &f.attrs,
            ImplItem::Type(t) => &t.attrs,
            ImplItem::Macro(m) => &m.attrs,
            _ => return visit::visit_impl_item(self, item),
        };
        if !only_for_tests(attrs) {
            visit::visit_impl_item(self, item);
        }
    }

    fn visit_trait_item(&mut self, item: &'ast TraitItem) {
        let attrs = match item {
            TraitItem::Const(c) => &c.attrs,
            TraitItem::Fn(f) => &f.attrs,
            TraitItem::Type(t) => &t.attrs,
            TraitItem::Macro(m) => &m.attrs,
            _ => return visit::visit_trait_item(self, item),
        };
        if !only_for_tests(attrs) {
            visit::visit_trait_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.names.paths.push(segments(path));
        visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.names.macros.push(segments(&mac.path));
        visit::visit_path(self, &mac.path);
        token_paths(mac.tokens.clone(), &mut self.names.paths);
    }
}

fn segments(path: &syn::Path) -> Segments {
    let leading = path.leading_colon.as_ref().map(|_| String::new());
    let names = path.segments.iter().map(|s| name(&s.ident));
    leading.into_iter().chain(names).collect()
}

/// The attributes of an item, for the kinds that can carry `#[cfg(test)]` in practice.
pub fn item_attrs(item: &Item) -> Option<&[Attribute]> {
    Some(match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => return None,
    })
}

/// The paths in a macro call's tokens: each run of identifiers joined by `::`, but a field or
/// method after `.`, a macro variable (`$x`; `$crate` is `crate`) or a path after `::` alone.
fn token_paths(tokens: TokenStream, out: &mut Vec<Segments>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        let TokenTree::Ident(first) = &trees[i] else {
            if let TokenTree::Group(group) = &trees[i] {
                token_paths(group.stream(), out);
            }
            i += 1;
            continue;
        };
        let after = i.checked_sub(1).map(|p| &trees[p]);
        let dollar = after.is_some_and(|t| is_punct(t, '$'));
        let skip = after.is_some_and(|t| is_punct(t, '.'))
            || (dollar && *first != "crate")
            || (i >= 2 && is_colon2(&trees[i - 2], &trees[i - 1]));
        let mut segments = vec![name(first)];
        let mut next = i + 1;
        while is_colon2_at(&trees, next) {
            let Some(TokenTree::Ident(ident)) = trees.get(next + 2) else {
                break;
            };
            segments.push(name(ident));
            next += 3;
        }
        if !skip {
            out.push(segments);
        }
        i = next;
    }
}

fn is_colon2_at(trees: &[TokenTree], at: usize) -> bool {
    matches!((trees.get(at), trees.get(at + 1)), (Some(a), Some(b)) if is_colon2(a, b))
}

fn is_colon2(a: &TokenTree, b: &TokenTree) -> bool {
    matches!(a, TokenTree::Punct(p) if p.as_char() == ':' && p.spacing() == Spacing::Joint)
        && is_punct(b, ':')
}

fn is_punct(tree: &TokenTree, c: char) -> bool {
    matches!(tree, TokenTree::Punct(p) if p.as_char() == c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn joined(paths: &[Segments]) -> Vec<String> {
        paths.iter().map(|p| p.join("::")).collect()
    }

    #[test]
    fn macro_tokens_give_paths_but_not_fields_variables_or_literals() {
        let file = syn::parse_file(
            r#"fn f() { m!(a.b, crate::x::Y, $v::w, "crate::s::T", $crate::z::Q, ::ext::E); }"#,
        )
        .unwrap();
        let names = of_item(&file.items[0]);
        assert_eq!(joined(&names.macros), ["m"]);
        assert_eq!(joined(&names.paths), ["a", "crate::x::Y", "crate::z::Q"]);
    }

    #[test]
    fn grouped_uses_flatten_to_leaves() {
        let file = syn::parse_file("use a::{b::C, d as e, f::{self, *}, G as _};").unwrap();
        let Item::Use(item) = &file.items[0] else {
            panic!("not a use")
        };
        let leaves = use_leaves(&item.tree, false);
        let path = |p: &str| p.split("::").map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(
            leaves,
            [
                UseLeaf::Name {
                    name: Some("C".into()),
                    path: path("a::b::C")
                },
                UseLeaf::Name {
                    name: Some("e".into()),
                    path: path("a::d")
                },
                UseLeaf::Name {
                    name: Some("f".into()),
                    path: path("a::f")
                },
                UseLeaf::Glob { path: path("a::f") },
                UseLeaf::Name {
                    name: None,
                    path: path("a::G")
                },
            ]
        );
    }

    #[test]
    fn test_code_is_recognised() {
        let file = syn::parse_file(
            "#[cfg(test)] fn a() {} #[cfg(all(unix, test))] fn b() {} #[tokio::test] fn c() {}
             #[cfg(any(test, unix))] fn d() {} #[cfg(not(test))] fn e() {}",
        )
        .unwrap();
        let test_only: Vec<bool> = file
            .items
            .iter()
            .map(|item| item_attrs(item).is_some_and(only_for_tests))
            .collect();
        assert_eq!(test_only, [true, true, true, false, false]);
    }
}

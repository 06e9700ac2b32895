//! Name resolution over a [`ModuleTree`], as far as the file graph needs it: a path names an
//! item of the crate when its first segment is `crate`, `self`, `super`, or a name in scope in
//! its module (a child module, an item, a `use` binding, a glob), and each later segment is found
//! in the module before it. Bindings are followed to the item's definition, so a name taken
//! through a re-export (`pub use`) leads to the file that defines it, not to the re-exporting
//! one. A path whose first name is not the crate's (another crate, a local variable, a generic
//! parameter) names nothing here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::tree::{ModuleId, ModuleTree, ROOT};

/// The file-level import graph of one target: an arrow from file A to file B, with the names
/// that make it, when A's code names an item that B defines.
#[derive(Debug, Default)]
pub struct FileGraph {
    pub files: Vec<PathBuf>,
    /// `(from, to)` file indexes, and the names of `to`'s items that `from` names.
    pub arrows: BTreeMap<(usize, usize), BTreeSet<String>>,
}

impl FileGraph {
    /// Builds the graph of `tree`.
    pub fn of(tree: &ModuleTree) -> FileGraph {
        let resolver = Resolver { tree };
        let mut arrows: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
        for (id, module) in tree.modules.iter().enumerate() {
            let paths = (module.refs.iter().map(|path| (path, Namespace::Any))).chain(
                module
                    .macro_refs
                    .iter()
                    .map(|path| (path, Namespace::Macro)),
            );
            for (path, last) in paths {
                if let Some(Target::Item { file, name }) = resolver.resolve(id, path, last, 0)
                    && file != module.file
                {
                    arrows.entry((module.file, file)).or_default().insert(name);
                }
            }
        }
        FileGraph {
            files: tree.files.clone(),
            arrows,
        }
    }

    /// For each file, the files it has an arrow to.
    pub fn successors(&self) -> Vec<Vec<usize>> {
        let mut next = vec![Vec::new(); self.files.len()];
        for &(from, to) in self.arrows.keys() {
            next[from].push(to);
        }
        next
    }
}

/// What a path leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Module(ModuleId),
    /// An item defined in `file`; the segments after it (an associated item, a variant)
    /// belong to it.
    Item {
        file: usize,
        name: String,
    },
}

/// Which names a segment may stand for: modules and types before a `::`, macros in a macro
/// call, anything at the end of other paths (an item before a module of the same name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Namespace {
    Module,
    Macro,
    Any,
}

/// How many bindings one lookup follows before it gives up (a `use` that leads back to itself
/// does not compile, but a guess about globs may loop).
const MAX_DEPTH: usize = 32;

struct Resolver<'a> {
    tree: &'a ModuleTree,
}

impl Resolver<'_> {
    /// Resolves `path` written in module `scope`, its last segment in namespace `last`.
    fn resolve(
        &self,
        scope: ModuleId,
        path: &[String],
        last: Namespace,
        depth: usize,
    ) -> Option<Target> {
        let mut target = Target::Module(scope);
        for (at, segment) in path.iter().enumerate() {
            let Target::Module(module) = target else {
                break;
            };
            let namespace = if at + 1 == path.len() {
                last
            } else {
                Namespace::Module
            };
            target = match segment.as_str() {
                "crate" if at == 0 => Target::Module(ROOT),
                name if at == 0 && self.tree.crate_aliases.contains(name) => {
                    match self.lookup(module, name, namespace, depth) {
                        Some(found) => found,
                        None => Target::Module(ROOT),
                    }
                }
                "self" => Target::Module(module),
                "super" => Target::Module(self.tree.modules[module].parent?),
                name => self.lookup(module, name, namespace, depth)?,
            };
        }
        Some(target)
    }

    /// What `name` stands for in `module`: its own items, macros and child modules, then its
    /// `use` bindings (followed), then what its globs bring in.
    fn lookup(
        &self,
        module: ModuleId,
        name: &str,
        namespace: Namespace,
        depth: usize,
    ) -> Option<Target> {
        if depth > MAX_DEPTH {
            return None;
        }
        let here = &self.tree.modules[module];
        let item = || {
            here.items.contains(name).then(|| Target::Item {
                file: here.file,
                name: name.to_owned(),
            })
        };
        let child = || here.children.get(name).map(|&child| Target::Module(child));
        let own = match namespace {
            Namespace::Module => child().or_else(item),
            Namespace::Any => item().or_else(child),
            Namespace::Macro => here.macros.get(name).map(|&file| Target::Item {
                file,
                name: name.to_owned(),
            }),
        };
        if own.is_some() {
            return own;
        }
        if let Some(path) = here.imports.get(name) {
            return self.resolve(module, path, namespace, depth + 1);
        }
        here.globs.iter().find_map(|glob| {
            match self.resolve(module, glob, Namespace::Module, depth + 1)? {
                Target::Module(source) if source != module => {
                    self.lookup(source, name, namespace, depth + 1)
                }
                _ => None,
            }
        })
    }
}

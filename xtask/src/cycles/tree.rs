//! One target's module tree, read from its root file as rustc finds the files: `mod x;` is
//! `x.rs` or `x/mod.rs` beside (or under) the declaring file, `#[path = "…"]` overrides it, and an
//! inline `mod x { … }` is a module of its file. Each module keeps what name resolution needs: its
//! items, its child modules, its `use` bindings and globs, and the paths its code names. Test-only
//! code (`#[cfg(test)]` items and modules, their files, `#[test]` functions) is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use syn::{Attribute, Expr, ForeignItem, Item, Lit, Meta};

use super::paths::{self, Segments, UseLeaf};

/// A module's index in [`ModuleTree::modules`].
pub type ModuleId = usize;

/// The modules of one target, the crate root first.
#[derive(Debug, Default)]
pub struct ModuleTree {
    pub modules: Vec<Module>,
    /// The source files, indexed by [`Module::file`].
    pub files: Vec<PathBuf>,
    /// The names `extern crate self as …` gives the crate itself.
    pub crate_aliases: BTreeSet<String>,
}

/// One module, inline or a file of its own.
#[derive(Debug)]
pub struct Module {
    /// The index of the file it is written in.
    pub file: usize,
    pub parent: Option<ModuleId>,
    pub children: BTreeMap<String, ModuleId>,
    /// The names of the items defined here (functions, types, traits, constants, statics).
    pub items: BTreeSet<String>,
    /// Macros by name, with the file that defines each: in the root module, the
    /// `#[macro_export]` ones, wherever they are written.
    pub macros: BTreeMap<String, usize>,
    /// `use` bindings: a name in this module and the path it stands for.
    pub imports: BTreeMap<String, Segments>,
    /// `use …::*`: the paths of the modules whose names this one sees.
    pub globs: Vec<Segments>,
    /// The paths this module's code names, `use` leaves included.
    pub refs: Vec<Segments>,
    /// The paths of the macros its code calls.
    pub macro_refs: Vec<Segments>,
    /// Where the files of `mod x;` inside this module are looked for.
    dir: PathBuf,
    inline: bool,
}

/// The root module's id.
pub const ROOT: ModuleId = 0;

impl ModuleTree {
    /// Reads the module tree of the target whose root file is `root`.
    pub fn load(root: &Path) -> anyhow::Result<ModuleTree> {
        let mut tree = ModuleTree::default();
        let dir = root.parent().unwrap_or(Path::new(".")).to_owned();
        tree.load_file(root, None, dir)?;
        Ok(tree)
    }

    /// Parses `path` into a new module under `parent`; `None` when the file is test-only.
    fn load_file(
        &mut self,
        path: &Path,
        parent: Option<ModuleId>,
        dir: PathBuf,
    ) -> anyhow::Result<Option<ModuleId>> {
        let source = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let file =
            syn::parse_file(&source).with_context(|| format!("cannot parse {}", path.display()))?;
        if paths::only_for_tests(&file.attrs) {
            return Ok(None);
        }
        self.files.push(path.to_owned());
        let id = self.new_module(self.files.len() - 1, parent, dir, false);
        self.add_items(id, &file.items)?;
        Ok(Some(id))
    }

    fn new_module(
        &mut self,
        file: usize,
        parent: Option<ModuleId>,
        dir: PathBuf,
        inline: bool,
    ) -> ModuleId {
        self.modules.push(Module {
            file,
            parent,
            children: BTreeMap::new(),
            items: BTreeSet::new(),
            macros: BTreeMap::new(),
            imports: BTreeMap::new(),
            globs: Vec::new(),
            refs: Vec::new(),
            macro_refs: Vec::new(),
            dir,
            inline,
        });
        self.modules.len() - 1
    }

    fn add_items(&mut self, id: ModuleId, items: &[Item]) -> anyhow::Result<()> {
        let mut nested_uses = Vec::new();
        for item in items {
            if paths::item_attrs(item).is_some_and(paths::only_for_tests) {
                continue;
            }
            match item {
                Item::Mod(module) => self.add_module(id, module)?,
                // `extern crate self as name;`: `name::…` is `crate::…` in every module.
                Item::ExternCrate(krate) if krate.ident == "self" => {
                    if let Some((_, alias)) = &krate.rename {
                        self.crate_aliases.insert(paths::name(alias));
                    }
                }
                Item::Use(item_use) => {
                    let leading_colon = item_use.leading_colon.is_some();
                    for leaf in paths::use_leaves(&item_use.tree, leading_colon) {
                        self.add_use(id, leaf, true);
                    }
                }
                _ => {
                    self.add_definitions(id, item);
                    let names = paths::of_item(item);
                    self.modules[id].refs.extend(names.paths);
                    self.modules[id].macro_refs.extend(names.macros);
                    nested_uses.extend(names.uses);
                }
            }
        }
        // A `use` inside a function names what it imports, but does not shadow the module's own.
        for leaf in nested_uses {
            self.add_use(id, leaf, false);
        }
        Ok(())
    }

    fn add_use(&mut self, id: ModuleId, leaf: UseLeaf, replace: bool) {
        let module = &mut self.modules[id];
        module.refs.push(leaf.path().clone());
        match leaf {
            UseLeaf::Name {
                name: Some(name),
                path,
            } => {
                if replace || !module.imports.contains_key(&name) {
                    module.imports.insert(name, path);
                }
            }
            UseLeaf::Name { name: None, .. } => {}
            UseLeaf::Glob { path } => module.globs.push(path),
        }
    }

    fn add_definitions(&mut self, id: ModuleId, item: &Item) {
        let names: Vec<String> = match item {
            Item::Const(i) => vec![paths::name(&i.ident)],
            Item::Enum(i) => vec![paths::name(&i.ident)],
            Item::Fn(i) => vec![paths::name(&i.sig.ident)],
            Item::Static(i) => vec![paths::name(&i.ident)],
            Item::Struct(i) => vec![paths::name(&i.ident)],
            Item::Trait(i) => vec![paths::name(&i.ident)],
            Item::TraitAlias(i) => vec![paths::name(&i.ident)],
            Item::Type(i) => vec![paths::name(&i.ident)],
            Item::Union(i) => vec![paths::name(&i.ident)],
            Item::ForeignMod(i) => i
                .items
                .iter()
                .filter_map(|item| match item {
                    ForeignItem::Fn(f) => Some(paths::name(&f.sig.ident)),
                    ForeignItem::Static(s) => Some(paths::name(&s.ident)),
                    ForeignItem::Type(t) => Some(paths::name(&t.ident)),
                    _ => None,
                })
                .collect(),
            // `#[macro_export] macro_rules! m` is `crate::m`; other macros are textual.
            Item::Macro(i) if i.attrs.iter().any(|a| a.path().is_ident("macro_export")) => {
                if let Some(ident) = &i.ident {
                    let file = self.modules[id].file;
                    self.modules[ROOT].macros.insert(paths::name(ident), file);
                }
                Vec::new()
            }
            _ => Vec::new(),
        };
        let items = &mut self.modules[id].items;
        items.extend(names.into_iter().filter(|name| name != "_"));
    }

    fn add_module(&mut self, id: ModuleId, module: &syn::ItemMod) -> anyhow::Result<()> {
        let name = paths::name(&module.ident);
        let path_attr = path_attribute(&module.attrs)?;
        let (here_file, here_inline) = (self.modules[id].file, self.modules[id].inline);
        let here_dir = self.modules[id].dir.clone();
        let child = match &module.content {
            Some((_, items)) => {
                let dir = here_dir.join(path_attr.unwrap_or_else(|| PathBuf::from(&name)));
                let child = self.new_module(here_file, Some(id), dir, true);
                self.add_items(child, items)?;
                Some(child)
            }
            None => {
                let (file, dir) = match path_attr {
                    Some(relative) => {
                        // Beside the declaring file, or under an inline module's directory.
                        let base = if here_inline {
                            here_dir
                        } else {
                            let file = &self.files[here_file];
                            file.parent().unwrap_or(Path::new(".")).to_owned()
                        };
                        let file = base.join(relative);
                        let dir = file.parent().unwrap_or(Path::new(".")).to_owned();
                        (file, dir)
                    }
                    None => {
                        let dir = here_dir.join(&name);
                        let flat = here_dir.join(format!("{name}.rs"));
                        let nested = dir.join("mod.rs");
                        let file = if flat.is_file() {
                            flat
                        } else if nested.is_file() {
                            nested
                        } else {
                            bail!(
                                "{}: `mod {name};` but neither {} nor {} exists",
                                self.files[here_file].display(),
                                flat.display(),
                                nested.display()
                            );
                        };
                        (file, dir)
                    }
                };
                self.load_file(&file, Some(id), dir)?
            }
        };
        if let Some(child) = child {
            self.modules[id].children.insert(name, child);
        }
        Ok(())
    }
}

/// The path of `#[path = "…"]`, when the module has one.
fn path_attribute(attrs: &[Attribute]) -> anyhow::Result<Option<PathBuf>> {
    let Some(attr) = attrs.iter().find(|a| a.path().is_ident("path")) else {
        return Ok(None);
    };
    if let Meta::NameValue(value) = &attr.meta
        && let Expr::Lit(lit) = &value.value
        && let Lit::Str(path) = &lit.lit
    {
        return Ok(Some(PathBuf::from(path.value())));
    }
    bail!("a #[path] attribute that is not `#[path = \"…\"]`")
}

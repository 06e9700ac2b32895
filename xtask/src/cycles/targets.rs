//! Which sources the check reads: every member of the workspace (the root `Cargo.toml`'s
//! `workspace.members`, guests and xtask included) and, in each, the root file of every target
//! cargo builds from it: the library (`[lib] path`, else `src/lib.rs`), `src/main.rs`,
//! `src/bin/`, `tests/`, `benches/` and `examples/` (a `NAME.rs` or a `NAME/main.rs`), and the
//! `path` of any `[[bin]]`, `[[test]]`, `[[bench]]` or `[[example]]` table.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// One target: its crate and its root file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Target {
    /// The package name, as reports show it.
    pub package: String,
    pub root: PathBuf,
}

/// The targets of every member of the workspace at `workspace`, in member order.
pub fn of_workspace(workspace: &Path) -> anyhow::Result<Vec<Target>> {
    let manifest = read_manifest(&workspace.join("Cargo.toml"))?;
    let members = at(&manifest, &["workspace", "members"])
        .and_then(|m| m.as_array())
        .context("the root Cargo.toml has no `workspace.members` list")?;
    let mut targets = Vec::new();
    for member in members {
        let member = member
            .as_str()
            .context("a `workspace.members` entry is not a string")?;
        if member.contains(['*', '?', '[']) {
            bail!("workspace member `{member}`: globs are not supported, name each member");
        }
        targets.extend(of_package(&workspace.join(member))?);
    }
    Ok(targets)
}

/// The targets of the package in `dir`.
pub fn of_package(dir: &Path) -> anyhow::Result<Vec<Target>> {
    let manifest = read_manifest(&dir.join("Cargo.toml"))?;
    let package = at(&manifest, &["package", "name"])
        .and_then(|n| n.as_str())
        .with_context(|| format!("{}/Cargo.toml has no package.name", dir.display()))?
        .to_owned();
    let mut roots = BTreeSet::new();
    let lib = at(&manifest, &["lib", "path"])
        .and_then(|p| p.as_str())
        .unwrap_or("src/lib.rs");
    roots.insert(dir.join(lib));
    roots.insert(dir.join("src/main.rs"));
    for kind in ["bin", "test", "bench", "example"] {
        let tables = manifest.get(kind).and_then(|t| t.as_array());
        for table in tables.into_iter().flatten() {
            if let Some(path) = table.get("path").and_then(|p| p.as_str()) {
                roots.insert(dir.join(path));
            }
        }
    }
    for folder in ["src/bin", "tests", "benches", "examples"] {
        roots.extend(conventional_roots(&dir.join(folder))?);
    }
    Ok(roots
        .into_iter()
        .filter(|root| root.is_file())
        .map(|root| Target {
            package: package.clone(),
            root,
        })
        .collect())
}

/// `NAME.rs` and `NAME/main.rs` in `folder`, as cargo finds targets there.
fn conventional_roots(folder: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !folder.is_dir() {
        return Ok(Vec::new());
    }
    let mut roots = Vec::new();
    let entries =
        std::fs::read_dir(folder).with_context(|| format!("cannot list {}", folder.display()))?;
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot list {}", folder.display()))?
            .path();
        if path.is_dir() {
            roots.push(path.join("main.rs"));
        } else if path.extension().is_some_and(|e| e == "rs") {
            roots.push(path);
        }
    }
    Ok(roots)
}

/// The value under `keys` (a table's key, then a key of that table, …).
fn at<'a>(table: &'a toml::Table, keys: &[&str]) -> Option<&'a toml::Value> {
    let (first, rest) = keys.split_first()?;
    rest.iter()
        .try_fold(table.get(*first)?, |value, key| value.get(key))
}

fn read_manifest(path: &Path) -> anyhow::Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.parse()
        .with_context(|| format!("cannot parse {}", path.display()))
}

//! `cargo xtask cycles`: fails when files of one crate import each other in a circle.
//!
//! For every target of every workspace member (see [`targets`] for which), the check reads the
//! module tree from the target's root file and draws the file-level import graph: an arrow from
//! file A to file B when A's code names an item B defines, whether through `use crate::…`,
//! `use super::…`, `use self::…`, a grouped `use a::{b::C, d}`, or a path written in code
//! (`crate::foo::bar(…)`, `super::baz::Qux`, `child_module::f()`, a path inside a macro call,
//! the crate's own `extern crate self as` name). A name reached through a re-export is followed
//! to the file that defines it. `mod x;` is no arrow, and nothing in comments, string literals or
//! attributes (doc links included) is read. Each group of files that all reach each other (a
//! strongly connected component) is a cycle.
//!
//! Left out: code compiled only for tests (`#[cfg(test)]` items and modules and the files they
//! load, `#[test]` functions), since a test module importing its parent is no design cycle;
//! paths into other crates; macros by textual scope (`macro_rules!` without `#[macro_export]`),
//! and what macros expand to. A bare name brought in by `use module::*` is matched against the
//! glob's module, so a local variable that shares an item's name there may draw an arrow.

mod paths;
mod resolve;
mod scc;
mod targets;
mod tree;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use resolve::FileGraph;
use tree::ModuleTree;

/// Checks the workspace at `workspace`: prints a one-line summary and succeeds when no crate
/// has a module cycle; prints every cycle and fails otherwise.
pub fn check(workspace: &Path) -> anyhow::Result<()> {
    let report = find(workspace)?;
    if report.cycles.is_empty() {
        eprintln!("xtask: {}", report.summary());
        return Ok(());
    }
    eprint!("{}", report.describe());
    anyhow::bail!(
        "{}: move what both ends of an arrow need to the module that owns it",
        report.summary()
    )
}

/// What one run found.
#[derive(Debug)]
pub struct Report {
    pub cycles: Vec<Cycle>,
    targets: usize,
    files: usize,
    arrows: usize,
}

/// Files of one target that all import each other, paths relative to the workspace.
#[derive(Debug, PartialEq, Eq)]
pub struct Cycle {
    pub package: String,
    /// In the order the module tree reaches them: a parent before its children.
    pub files: Vec<PathBuf>,
    /// Each arrow between the cycle's files, with the names that make it.
    pub arrows: Vec<(PathBuf, PathBuf, Vec<String>)>,
}

/// Draws the import graph of every target in the workspace at `workspace` and collects its
/// cycles.
pub fn find(workspace: &Path) -> anyhow::Result<Report> {
    let targets = targets::of_workspace(workspace)?;
    let mut report = Report {
        cycles: Vec::new(),
        targets: targets.len(),
        files: 0,
        arrows: 0,
    };
    let mut files = BTreeSet::new();
    for target in &targets {
        let tree = ModuleTree::load(&target.root)?;
        let graph = FileGraph::of(&tree);
        files.extend(graph.files.iter().cloned());
        report.arrows += graph.arrows.len();
        for cycle in cycles_of(&graph, &target.package, workspace) {
            if !report.cycles.contains(&cycle) {
                report.cycles.push(cycle);
            }
        }
    }
    report.files = files.len();
    Ok(report)
}

/// The cycles of one target's graph.
fn cycles_of(graph: &FileGraph, package: &str, workspace: &Path) -> Vec<Cycle> {
    let relative = |file: usize| {
        let path = &graph.files[file];
        path.strip_prefix(workspace).unwrap_or(path).to_owned()
    };
    scc::cycles(&graph.successors())
        .into_iter()
        .map(|component| {
            let arrows = graph
                .arrows
                .iter()
                .filter(|((from, to), _)| component.contains(from) && component.contains(to))
                .map(|(&(from, to), names)| {
                    (
                        relative(from),
                        relative(to),
                        names.iter().cloned().collect(),
                    )
                })
                .collect();
            Cycle {
                package: package.to_owned(),
                files: component.into_iter().map(relative).collect(),
                arrows,
            }
        })
        .collect()
}

impl Report {
    /// `no module cycles in N targets (F files, A arrows)`, or how many were found.
    fn summary(&self) -> String {
        let found = match self.cycles.len() {
            0 => "no module cycles".to_owned(),
            n => format!("{n} module cycle(s)"),
        };
        format!(
            "{found} in {} targets ({} files, {} file-to-file imports)",
            self.targets, self.files, self.arrows
        )
    }

    /// Every cycle: its crate and files, then each arrow with the names that tie it.
    fn describe(&self) -> String {
        let mut out = String::new();
        for cycle in &self.cycles {
            let _ = writeln!(
                out,
                "xtask: module cycle in {} through {} files:",
                cycle.package,
                cycle.files.len()
            );
            for file in &cycle.files {
                let _ = writeln!(out, "xtask:   {}", file.display());
            }
            for (from, to, names) in &cycle.arrows {
                let _ = writeln!(
                    out,
                    "xtask:     {} -> {}: {}",
                    from.display(),
                    to.display(),
                    names.join(", ")
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;

//! The check over small synthetic workspaces written to a temporary directory.

use std::path::{Path, PathBuf};

use super::resolve::FileGraph;
use super::tree::ModuleTree;
use super::{Cycle, find};

/// A workspace with one member, `c`, holding `files` (paths relative to `c/`).
fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "Cargo.toml", "[workspace]\nmembers = [\"c\"]\n");
    write(dir.path(), "c/Cargo.toml", "[package]\nname = \"c\"\n");
    for (path, text) in files {
        write(&dir.path().join("c"), path, text);
    }
    dir
}

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn cycles(files: &[(&str, &str)]) -> Vec<Cycle> {
    find(workspace(files).path()).unwrap().cycles
}

/// The arrows of the library target, as `from -> to: names` with paths under `c/src/`.
fn arrows(files: &[(&str, &str)]) -> Vec<String> {
    let dir = workspace(files);
    let src = dir.path().join("c/src");
    let graph = FileGraph::of(&ModuleTree::load(&src.join("lib.rs")).unwrap());
    let name = |file: usize| {
        graph.files[file]
            .strip_prefix(&src)
            .unwrap()
            .display()
            .to_string()
    };
    graph
        .arrows
        .iter()
        .map(|(&(from, to), names)| {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            format!("{} -> {}: {}", name(from), name(to), names.join(", "))
        })
        .collect()
}

fn path(p: &str) -> PathBuf {
    PathBuf::from(p)
}

#[test]
fn a_two_file_cycle_is_found_with_the_names_that_tie_it() {
    let found = cycles(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::{B, helper};\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\npub fn helper() {}\npub fn make() -> super::a::A { todo!() }\n",
        ),
    ]);
    assert_eq!(
        found,
        [Cycle {
            package: "c".into(),
            files: vec![path("c/src/a.rs"), path("c/src/b.rs")],
            arrows: vec![
                (
                    path("c/src/a.rs"),
                    path("c/src/b.rs"),
                    vec!["B".into(), "helper".into()]
                ),
                (path("c/src/b.rs"), path("c/src/a.rs"), vec!["A".into()]),
            ],
        }]
    );
}

#[test]
fn a_three_file_cycle_through_a_grouped_use_and_inline_paths_is_found() {
    let files = [
        ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("src/a.rs", "use crate::{b::{self, B}, c};\npub struct A;\n"),
        (
            "src/b.rs",
            "pub struct B;\npub fn f() { crate::c::make(); }\n",
        ),
        ("src/c.rs", "pub fn make() -> super::a::A { super::a::A }\n"),
    ];
    let found = cycles(&files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].files,
        [path("c/src/a.rs"), path("c/src/b.rs"), path("c/src/c.rs")]
    );
    assert_eq!(
        arrows(&files),
        ["a.rs -> b.rs: B", "b.rs -> c.rs: make", "c.rs -> a.rs: A"]
    );
}

#[test]
fn a_name_taken_through_a_re_export_leads_to_its_definition_not_the_parent() {
    let files = [
        ("src/lib.rs", "mod cache;\npub use cache::Reader;\n"),
        (
            "src/cache/mod.rs",
            "mod reader;\nmod store;\npub use reader::Reader;\npub(crate) use store::Store;\n",
        ),
        ("src/cache/store.rs", "pub struct Store;\n"),
        (
            "src/cache/reader.rs",
            "use super::Store;\npub struct Reader(crate::cache::Store);\n",
        ),
    ];
    assert!(cycles(&files).is_empty());
    assert_eq!(
        arrows(&files),
        [
            "lib.rs -> cache/reader.rs: Reader",
            "cache/mod.rs -> cache/reader.rs: Reader",
            "cache/mod.rs -> cache/store.rs: Store",
            "cache/reader.rs -> cache/store.rs: Store",
        ]
    );
}

#[test]
fn an_item_defined_in_the_parent_that_re_exports_the_child_is_a_cycle() {
    let found = cycles(&[
        (
            "src/lib.rs",
            "mod reader;\npub use reader::Reader;\npub struct Config;\n",
        ),
        ("src/reader.rs", "pub struct Reader(crate::Config);\n"),
    ]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].arrows,
        [
            (
                path("c/src/lib.rs"),
                path("c/src/reader.rs"),
                vec!["Reader".into()]
            ),
            (
                path("c/src/reader.rs"),
                path("c/src/lib.rs"),
                vec!["Config".into()]
            ),
        ]
    );
}

#[test]
fn test_code_importing_its_parent_is_not_a_cycle() {
    let found = cycles(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\n\
             #[cfg(test)]\nmod tests {\n    use crate::a::A;\n}\n\
             #[cfg(test)]\nmod more;\n\
             #[test]\nfn t() { let _ = crate::a::A(B); }\n\
             #[cfg(all(test, unix))]\nuse crate::a::A;\n",
        ),
        ("src/b/more.rs", "use crate::a::A;\n"),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn comments_strings_and_doc_links_are_not_imports() {
    let found = cycles(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "// use crate::a::A;\n\
             /* crate::a::A */\n\
             /// Not [`crate::a::A`].\n\
             pub struct B;\n\
             pub fn s() -> &'static str { \"crate::a::A\" }\n\
             pub fn r() -> &'static str { r#\"super::a::A\"# }\n\
             pub fn m() -> String { format!(\"{}\", \"crate::a::A\") }\n",
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn paths_in_macro_calls_through_child_modules_globs_and_the_crates_alias_are_imports() {
    let files = [
        (
            "src/lib.rs",
            "extern crate self as me;\nmod a;\nmod b;\nmod c;\npub fn root() { b::g(); }\n",
        ),
        (
            "src/a.rs",
            "pub struct A;\npub fn f() { println!(\"{:?}\", crate::b::g()); }\n",
        ),
        (
            "src/b.rs",
            "use crate::c::*;\npub fn g() -> u8 { helper() }\n",
        ),
        (
            "src/c.rs",
            "pub fn helper() -> u8 { let _ = me::a::A; 1 }\n",
        ),
    ];
    assert_eq!(
        arrows(&files),
        [
            "lib.rs -> b.rs: g",
            "a.rs -> b.rs: g",
            "b.rs -> c.rs: helper",
            "c.rs -> a.rs: A"
        ]
    );
    assert_eq!(cycles(&files).len(), 1);
}

#[test]
fn path_attributes_inline_modules_and_test_targets_are_followed() {
    let found = cycles(&[
        ("src/lib.rs", "pub struct Lib;\n"),
        (
            "tests/e2e/main.rs",
            "mod x;\n#[path = \"other/why.rs\"]\nmod y;\n",
        ),
        (
            "tests/e2e/x.rs",
            "pub mod inner {\n    pub fn f() { crate::y::g(); }\n}\n",
        ),
        (
            "tests/e2e/other/why.rs",
            "pub fn g() { crate::x::inner::f(); }\n",
        ),
    ]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(
        found[0].files,
        [path("c/tests/e2e/x.rs"), path("c/tests/e2e/other/why.rs")]
    );
}

#[test]
fn a_missing_module_file_is_an_error_naming_both_places() {
    let dir = workspace(&[("src/lib.rs", "mod gone;\n")]);
    let err = find(dir.path()).unwrap_err().to_string();
    assert!(err.contains("`mod gone;`"), "{err}");
    assert!(
        err.contains("gone.rs") && err.contains("gone/mod.rs"),
        "{err}"
    );
}

#[test]
fn the_workspace_is_read_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let report = find(root).unwrap();
    assert!(report.targets > 20, "{} targets", report.targets);
    assert!(report.files > 100, "{} files", report.files);
}

#[test]
fn the_report_names_each_cycle_its_files_and_what_ties_each_arrow() {
    let dir = workspace(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "pub struct A(crate::b::B);\n"),
        ("src/b.rs", "pub struct B;\npub fn f(_: &super::a::A) {}\n"),
    ]);
    let report = find(dir.path()).unwrap();
    assert_eq!(
        report.describe(),
        "xtask: module cycle in c through 2 files:\n\
         xtask:   c/src/a.rs\n\
         xtask:   c/src/b.rs\n\
         xtask:     c/src/a.rs -> c/src/b.rs: B\n\
         xtask:     c/src/b.rs -> c/src/a.rs: A\n"
    );
    assert_eq!(
        report.summary(),
        "1 module cycle(s) in 1 targets (3 files, 2 file-to-file imports)"
    );
}

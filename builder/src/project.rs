//! A plugin author's project: which language it is written in (from the files it has), what it
//! is called, the contract it claims (its `wit/` directory) and how it is built into
//! `build/NAME.wasm`.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::component::{self, Target};
use crate::toolchain::{self, Toolchains};
use crate::{c, go, js, python, rust};

/// The languages a project can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Rust,
    Go,
    Python,
    JavaScript,
    C,
}

impl Language {
    /// The name users type (`--lang`).
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Go => "go",
            Language::Python => "python",
            Language::JavaScript => "js",
            Language::C => "c",
        }
    }
}

/// Why a directory is not a project this build knows.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error(
        "{0} is not a plugin project: no Cargo.toml, go.mod, pyproject.toml or app.py, \
         package.json, Makefile or *.c file (`kubewasm new` makes one)"
    )]
    Unrecognised(PathBuf),
    #[error(
        "{0} has no wit/ directory with the contract it targets (`kubewasm wit -o wit` writes one)"
    )]
    NoWit(PathBuf),
}

/// A project found in a directory.
#[derive(Debug, Clone)]
pub struct Project {
    pub dir: PathBuf,
    pub language: Language,
    /// The component's file name without `.wasm`.
    pub name: String,
    /// The project's `wit/` directory and the world it builds ([`Target::for_project`]).
    pub target: Target,
}

/// How a project is built: for the edit loop, or for what ships.
///
/// Only Rust has the distinction: the other languages' toolchains build one way (Python and
/// JavaScript bundle an interpreter, C and Go are optimised as their compilers are told in the
/// project's own files), so they build the same under either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// `kubewasm build`: cargo's `dev` profile (the template's: unoptimised, no debug info):
    /// dependencies compiled once, an edit recompiles the plugin's crate incrementally.
    #[default]
    Dev,
    /// `kubewasm build --release`: cargo's `release` profile (the template's: size-optimised,
    /// LTO), the component to ship; each build re-optimises the whole program.
    Release,
}

impl Profile {
    /// The cargo profile a Rust project is built with.
    fn cargo_profile(self) -> &'static str {
        match self {
            Profile::Dev => "dev",
            Profile::Release => "release",
        }
    }
}

/// What a build wrote.
#[derive(Debug, Clone)]
pub struct Built {
    pub path: PathBuf,
    pub language: Language,
    /// The WIT package of the world the component was checked against.
    pub contract: String,
}

impl Project {
    /// Recognises the project in `dir` by its files.
    pub fn detect(dir: &Path) -> anyhow::Result<Project> {
        let has = |name: &str| dir.join(name).is_file();
        let c_sources = c_sources(dir)?;
        let language = if has("Cargo.toml") {
            Language::Rust
        } else if has("go.mod") {
            Language::Go
        } else if has("pyproject.toml") || has("app.py") {
            Language::Python
        } else if has("package.json") {
            Language::JavaScript
        } else if has("Makefile") || !c_sources.is_empty() {
            Language::C
        } else {
            return Err(ProjectError::Unrecognised(dir.to_owned()).into());
        };
        let wit_dir = dir.join("wit");
        if !wit_dir.is_dir() {
            return Err(ProjectError::NoWit(dir.to_owned()).into());
        }
        let name = project_name(dir, language)?;
        Ok(Project {
            dir: dir.to_owned(),
            language,
            name,
            target: Target::for_project(wit_dir),
        })
    }

    /// Where the build writes the component.
    pub fn output(&self) -> PathBuf {
        self.dir.join("build").join(format!("{}.wasm", self.name))
    }

    /// Builds the component with `profile`, checks it against the project's world and writes it
    /// to [`Project::output`].
    pub fn build(&self, tools: &Toolchains, profile: Profile) -> anyhow::Result<Built> {
        let contract = self.target.package_name()?;
        let scratch = self.dir.join("build/.work");
        let bytes = match self.language {
            Language::Rust => self.build_rust(tools, profile)?,
            Language::Python => {
                python::build(tools, &self.target, &self.dir, &[], "app", &scratch)?
            }
            Language::JavaScript => js::build(tools, &self.target, &self.js_module()?, &scratch)?,
            Language::C => {
                let sources = c_sources(&self.dir)?;
                c::build(
                    tools,
                    &self.target,
                    &sources,
                    std::slice::from_ref(&self.dir),
                    &scratch,
                )?
            }
            Language::Go => self.build_go(tools, &scratch)?,
        };
        component::check(&bytes, &self.target)
            .with_context(|| format!("the component does not meet {contract}"))?;
        let path = self.output();
        component::write_atomically(&path, &bytes)?;
        Ok(Built {
            path,
            language: self.language,
            contract,
        })
    }

    fn build_rust(&self, tools: &Toolchains, profile: Profile) -> anyhow::Result<Vec<u8>> {
        let manifest = read_toml(&self.dir.join("Cargo.toml"))?;
        let lib_name = manifest
            .get("lib")
            .and_then(|lib| lib.get("name"))
            .and_then(toml::Value::as_str)
            .map_or_else(|| self.name.replace('-', "_"), str::to_owned);
        // The author's CARGO_TARGET_DIR, as cargo itself would use it; else the project's own.
        let target_dir = std::env::var_os("CARGO_TARGET_DIR")
            .filter(|dir| !dir.is_empty())
            .map_or_else(|| self.dir.join("target"), PathBuf::from);
        toolchain::run(&mut rust::cargo_build(
            tools,
            &self.dir,
            profile.cargo_profile(),
            Some(&target_dir),
            &[],
        )?)?;
        let built = rust::output(&target_dir, profile.cargo_profile(), &lib_name);
        std::fs::read(&built).with_context(|| {
            format!(
                "reading {} (is the library a `crate-type = [\"cdylib\"]`?)",
                built.display()
            )
        })
    }

    /// Generates the bindings into the project's own module (go.mod's module path), lays the
    /// project's packages over them and builds. The project's go.mod names the module; the
    /// build's go.mod is the generated one (the standard library and the embedded runtime
    /// package only: no Go module proxy is used).
    fn build_go(&self, tools: &Toolchains, scratch: &Path) -> anyhow::Result<Vec<u8>> {
        let go_mod = std::fs::read_to_string(self.dir.join("go.mod")).context("reading go.mod")?;
        let module = go::module_path(&go_mod)?;
        let dir = &self.dir;
        go::build(tools, &self.target, &module, scratch, |scratch| {
            copy_go_sources(dir, scratch)
        })
    }

    /// The module componentize-js starts from: package.json's `main`, else `plugin.js`.
    fn js_module(&self) -> anyhow::Result<PathBuf> {
        let text = std::fs::read_to_string(self.dir.join("package.json"))
            .context("reading package.json")?;
        let package: serde_json::Value =
            serde_json::from_str(&text).context("package.json is not JSON")?;
        let main = package["main"].as_str().unwrap_or("plugin.js");
        Ok(self.dir.join(main))
    }
}

fn read_toml(path: &Path) -> anyhow::Result<toml::Table> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.parse::<toml::Table>()
        .with_context(|| format!("{} is not TOML", path.display()))
}

/// The name the project gives itself (Cargo.toml's, pyproject's, package.json's, go.mod's
/// last segment), else its directory's.
fn project_name(dir: &Path, language: Language) -> anyhow::Result<String> {
    let declared = match language {
        Language::Rust => read_toml(&dir.join("Cargo.toml"))?
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(toml::Value::as_str)
            .map(str::to_owned),
        Language::Python if dir.join("pyproject.toml").is_file() => {
            read_toml(&dir.join("pyproject.toml"))?
                .get("project")
                .and_then(|p| p.get("name"))
                .and_then(toml::Value::as_str)
                .map(str::to_owned)
        }
        Language::JavaScript => std::fs::read_to_string(dir.join("package.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .and_then(|p| p["name"].as_str().map(str::to_owned)),
        Language::Go => std::fs::read_to_string(dir.join("go.mod"))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.trim().strip_prefix("module "))
                    .and_then(|m| m.trim().rsplit('/').next().map(str::to_owned))
            }),
        _ => None,
    };
    let name = declared
        .or_else(|| {
            std::fs::canonicalize(dir)
                .ok()?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "plugin".to_owned());
    // The name becomes a file name: keep it one.
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    Ok(if safe.trim_matches('-').is_empty() {
        "plugin".to_owned()
    } else {
        safe
    })
}

/// Copies the project's Go packages (every `.go` and `.s` file, not `*_test.go`) into the
/// build's module, skipping what builds and tools write (`build/`, hidden directories,
/// `vendor/`, `testdata/`). A file the bindings already have is an error: a project must not
/// replace generated code.
fn copy_go_sources(from: &Path, to: &Path) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let target = to.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            if !(name.starts_with('.') || ["build", "vendor", "testdata"].contains(&name.as_str()))
            {
                copy_go_sources(&path, &target)?;
            }
        } else if kind.is_file()
            && (name.ends_with(".go") || name.ends_with(".s"))
            && !name.ends_with("_test.go")
        {
            if target.exists() {
                anyhow::bail!(
                    "{} has the name of a file the contract's bindings generate; rename it",
                    path.display()
                );
            }
            std::fs::create_dir_all(to)?;
            std::fs::copy(&path, &target).with_context(|| format!("copying {}", path.display()))?;
        }
    }
    Ok(())
}

/// The `*.c` files at the top of `dir`, sorted, without native tests (`*_test.c`).
fn c_sources(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".c") && !name.ends_with("_test.c") && path.is_file() {
            sources.push(path);
        }
    }
    sources.sort();
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn each_language_is_recognised_by_its_files_and_named_by_its_manifest() {
        let wit = ("wit/controller.wit", "");
        type Files<'a> = &'a [(&'a str, &'a str)];
        let cases: &[(Files, Language, &str)] = &[
            (
                &[("Cargo.toml", "[package]\nname = \"mirror\"\n"), wit],
                Language::Rust,
                "mirror",
            ),
            (
                &[("go.mod", "module example.com/a/counter\n"), wit],
                Language::Go,
                "counter",
            ),
            (
                &[("pyproject.toml", "[project]\nname = \"py-plugin\"\n"), wit],
                Language::Python,
                "py-plugin",
            ),
            (
                &[("package.json", "{\"name\": \"js plugin\"}"), wit],
                Language::JavaScript,
                "js-plugin",
            ),
            (
                &[("plugin.c", ""), ("kube_test.c", ""), wit],
                Language::C,
                "",
            ),
        ];
        for (files, language, name) in cases {
            let dir = project_with(files);
            let project = Project::detect(dir.path()).unwrap();
            assert_eq!(project.language, *language);
            if !name.is_empty() {
                assert_eq!(project.name, *name);
            }
        }
        let c = project_with(&[("plugin.c", ""), ("kube_test.c", "")]);
        assert_eq!(c_sources(c.path()).unwrap(), [c.path().join("plugin.c")]);
    }

    #[test]
    fn a_go_projects_packages_are_laid_over_the_bindings_without_replacing_them() {
        let project = project_with(&[
            ("go.mod", "module p\n"),
            ("plugin/plugin.go", "package plugin"),
            ("plugin/plugin_test.go", "package plugin"),
            ("kube/asm.s", ""),
            ("build/.work/stale.go", ""),
            (".venv/lib/x.go", ""),
            ("notes.md", ""),
        ]);
        let scratch = tempfile::tempdir().unwrap();
        copy_go_sources(project.path(), scratch.path()).unwrap();
        let mut copied = Vec::new();
        let mut stack = vec![scratch.path().to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    copied.push(path.strip_prefix(scratch.path()).unwrap().to_owned());
                }
            }
        }
        copied.sort();
        assert_eq!(
            copied,
            [
                PathBuf::from("kube/asm.s"),
                PathBuf::from("plugin/plugin.go")
            ]
        );
        // A project file where the bindings have one is refused, the generated file kept.
        let generated = project_with(&[("wit_exports.go", "package main // generated")]);
        let clash = project_with(&[("go.mod", "module p\n"), ("wit_exports.go", "package main")]);
        let err = copy_go_sources(clash.path(), generated.path()).unwrap_err();
        assert!(err.to_string().contains("bindings generate"), "{err}");
        assert_eq!(
            std::fs::read_to_string(generated.path().join("wit_exports.go")).unwrap(),
            "package main // generated"
        );
    }

    #[test]
    fn a_directory_without_a_project_or_without_wit_says_so() {
        let empty = project_with(&[("notes.txt", "")]);
        let err = Project::detect(empty.path()).unwrap_err();
        assert!(err.to_string().contains("is not a plugin project"), "{err}");
        let no_wit = project_with(&[("app.py", "")]);
        let err = Project::detect(no_wit.path()).unwrap_err();
        assert!(err.to_string().contains("kubewasm wit -o wit"), "{err}");
    }
}

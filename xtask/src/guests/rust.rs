//! Rust guests: every workspace member under `examples-guests/rust/` (examples), `tests/guests/`
//! or `guest-sdk/` (test guests) whose library is a `cdylib`, built for `wasm32-wasip2` with the
//! workspace's `guest` profile (with LTO, one codegen unit and an inlining limit for the
//! benchmarks: `Ctx::lto`).
//!
//! The guests get their own target directory (`target/wasm-guests`) so building them never
//! waits on, or invalidates, the host's build.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::Ctx;
use crate::cmd;

/// The profile every Rust guest is built with (for `wasm32-wasip2`).
const PROFILE: &str = "guest";

/// With LTO and one codegen unit, LLVM inlines every function called from one place only
/// into its caller, however large: the sample-controller's deserializer of k8s-openapi's
/// `Volume` became one function of 80 KB, 440 locals and 1,593 blocks, whose register
/// allocation in wasmtime took about 500 MiB. Functions with more than 64 bytes of stack
/// (serde's visitors of nested structs) are then left as calls: its compile peaks at 46 MiB,
/// for a component 2.6 % larger (BENCHMARKS.md, "Compile memory"). The `kubewasm new` Rust
/// template sets the same flag in its `.cargo/config.toml`.
const SHIPPED_RUSTFLAGS: &str =
    r#"target.wasm32-wasip2.rustflags=["-Cllvm-args=-inline-max-stacksize=64"]"#;

/// One Rust guest crate of the workspace.
#[derive(Debug, PartialEq, Eq)]
struct Guest {
    /// The package name, used for `-p` and as the component's file name.
    package: String,
    /// The library's file stem (the package name with `-` as `_`, unless `[lib] name` says).
    lib_name: String,
    /// A test-only guest (under `tests/guests/` or `guest-sdk/`).
    test_only: bool,
}

/// Builds every Rust guest in one cargo invocation and copies the components into place.
pub fn build(ctx: &Ctx) -> anyhow::Result<Vec<PathBuf>> {
    let manifest = std::fs::read_to_string(ctx.root.join("Cargo.toml"))
        .context("reading the workspace Cargo.toml")?;
    let mut guests = Vec::new();
    for member in workspace_members(&manifest) {
        let test_only = member.starts_with("tests/guests/") || member.starts_with("guest-sdk/");
        if !(test_only || member.starts_with("examples-guests/rust/")) {
            continue;
        }
        let path = ctx.root.join(&member).join("Cargo.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        if let Some(guest) = parse_guest(&text, test_only) {
            guests.push(guest);
        }
    }
    if guests.is_empty() {
        return Ok(Vec::new());
    }
    let target_dir = ctx.root.join("target/wasm-guests");
    let packages: Vec<String> = guests.iter().map(|g| g.package.clone()).collect();
    let mut command = kubewasm_build::rust::cargo_build(
        &super::toolchain::toolchains(ctx),
        &ctx.root,
        PROFILE,
        Some(&target_dir),
        &packages,
    )?;
    if ctx.lto {
        command.args([
            "--config",
            "profile.guest.lto=true",
            "--config",
            "profile.guest.codegen-units=1",
            "--config",
            SHIPPED_RUSTFLAGS,
        ]);
    }
    cmd::run(&mut command)?;
    let mut written = Vec::new();
    for guest in &guests {
        let from = kubewasm_build::rust::output(&target_dir, PROFILE, &guest.lib_name);
        let out_dir = if guest.test_only {
            &ctx.test_out_dir
        } else {
            &ctx.out_dir
        };
        let to = out_dir.join(format!("{}.wasm", guest.package));
        copy_if_changed(&from, &to)?;
        written.push(to);
    }
    Ok(written)
}

/// Copies `from` to `to` unless `to` already holds the same bytes, so a hot-reloading host
/// watching the output directory sees no event for an unchanged guest.
fn copy_if_changed(from: &Path, to: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    kubewasm_build::component::write_atomically(to, &bytes)
}

/// The quoted entries of the root manifest's `[workspace] members = [ .. ]` list (not
/// `default-members`, which leaves the guests out).
fn workspace_members(manifest: &str) -> Vec<String> {
    let start = manifest.match_indices("members").find(|(at, _)| {
        let line_start = manifest[..*at].rfind('\n').map_or(0, |n| n + 1);
        manifest[line_start..*at].trim().is_empty()
    });
    let Some((start, _)) = start else {
        return Vec::new();
    };
    let rest = &manifest[start..];
    let (Some(open), Some(close)) = (rest.find('['), rest.find(']')) else {
        return Vec::new();
    };
    if close < open {
        return Vec::new();
    }
    rest[open + 1..close]
        .lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(|line| line.split(','))
        .map(|item| item.trim().trim_matches('"').to_owned())
        .filter(|item| !item.is_empty())
        .collect()
}

/// The guest described by a member's Cargo.toml, or `None` when its library is not a `cdylib`.
fn parse_guest(manifest: &str, test_only: bool) -> Option<Guest> {
    let mut section = "";
    let mut package = None;
    let mut lib_name = None;
    let mut cdylib = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match (section, key) {
            ("[package]", "name") => package = Some(value.trim_matches('"').to_owned()),
            ("[lib]", "name") => lib_name = Some(value.trim_matches('"').to_owned()),
            ("[lib]", "crate-type") => cdylib = value.contains("\"cdylib\""),
            _ => {}
        }
    }
    let package = package?;
    if !cdylib {
        return None;
    }
    let lib_name = lib_name.unwrap_or_else(|| package.replace('-', "_"));
    Some(Guest {
        package,
        lib_name,
        test_only,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the manifest's `[lib]` says `test = false` and `bench = false` (a lib is built
    /// in test mode by `--tests` and again by `--benches`): a guest without unit tests, which
    /// the suite then builds for `wasm32-wasip2` only instead of a second time for the host.
    fn lib_untested(manifest: &str) -> bool {
        let mut section = "";
        let (mut test, mut bench) = (true, true);
        for line in manifest.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.starts_with('[') {
                section = line;
            } else if section == "[lib]"
                && let Some((key, value)) = line.split_once('=')
            {
                match key.trim() {
                    "test" => test = value.trim() != "false",
                    "bench" => bench = value.trim() != "false",
                    _ => {}
                }
            }
        }
        !test && !bench
    }

    /// Whether any Rust file under `dir` holds a unit test.
    fn has_unit_tests(dir: &Path) -> anyhow::Result<bool> {
        for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            if path.is_dir() {
                if has_unit_tests(&path)? {
                    return Ok(true);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                if text.contains("#[test]") || text.contains("#[cfg(test)]") {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// A guest's library is built for the host (in test mode, by the suite's build) only when it
    /// has unit tests: `test = false` and `bench = false` in its `[lib]` exactly when it has
    /// none, so no test goes unrun and no empty test binary is compiled and linked beside the
    /// wasm build.
    #[test]
    fn every_rust_guest_says_test_false_exactly_when_it_has_no_unit_tests() {
        let root = crate::workspace::root();
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let mut checked = 0;
        for member in workspace_members(&manifest) {
            let dir = root.join(&member);
            let text = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            if parse_guest(&text, false).is_none() {
                continue;
            }
            let tested = has_unit_tests(&dir.join("src")).unwrap();
            assert_eq!(
                lib_untested(&text),
                !tested,
                "{member}: [lib] test = false and bench = false must be there exactly when it \
                 has no unit tests"
            );
            checked += 1;
        }
        assert!(checked > 10, "only {checked} guests found");
    }

    #[test]
    fn lib_untested_reads_the_lib_section_only() {
        assert!(lib_untested(
            "[lib]\ncrate-type = [\"cdylib\"]\ntest = false # none\nbench = false\n"
        ));
        assert!(!lib_untested(
            "[lib]\ncrate-type = [\"cdylib\"]\ntest = false\n"
        ));
        assert!(!lib_untested("[lib]\ncrate-type = [\"cdylib\"]\n"));
        assert!(!lib_untested(
            "[package]\ntest = false\nbench = false\n[lib]\n"
        ));
    }

    #[test]
    fn workspace_members_reads_the_quoted_list() {
        let manifest = "[workspace]\nresolver = \"3\"\nmembers = [\n    \"host\",\n    \"examples-guests/rust/pod-diff\", # a guest\n    \"tests/guests/trap\",\n]\n\n[workspace.package]\n";
        assert_eq!(
            workspace_members(manifest),
            ["host", "examples-guests/rust/pod-diff", "tests/guests/trap"]
        );
    }

    #[test]
    fn workspace_members_skips_default_members() {
        let manifest = "[workspace]\ndefault-members = [\"host\"]\nmembers = [\"host\", \"tests/guests/probe\"]\n";
        assert_eq!(workspace_members(manifest), ["host", "tests/guests/probe"]);
    }

    #[test]
    fn parse_guest_takes_cdylibs_and_their_lib_name() {
        let manifest = "[package]\nname = \"pod-diff\"\nversion.workspace = true\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\nname = \"not-this\"\n";
        assert_eq!(
            parse_guest(manifest, false),
            Some(Guest {
                package: "pod-diff".into(),
                lib_name: "pod_diff".into(),
                test_only: false
            })
        );
        let renamed = "[package]\nname = \"a-b\"\n[lib]\nname = \"custom\"\ncrate-type = [\"cdylib\", \"rlib\"]\n";
        assert_eq!(
            parse_guest(renamed, true).map(|g| g.lib_name),
            Some("custom".into())
        );
    }

    #[test]
    fn copy_if_changed_rewrites_only_changed_components() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("xtask-copy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (from, to) = (dir.join("built.wasm"), dir.join("out.wasm"));
        std::fs::write(&from, b"v1").unwrap();
        copy_if_changed(&from, &to).unwrap();
        let first = std::fs::metadata(&to).unwrap().ino();
        copy_if_changed(&from, &to).unwrap();
        assert_eq!(
            std::fs::metadata(&to).unwrap().ino(),
            first,
            "same bytes: untouched"
        );
        std::fs::write(&from, b"v2").unwrap();
        copy_if_changed(&from, &to).unwrap();
        assert_eq!(std::fs::read(&to).unwrap(), b"v2");
        assert!(!dir.join("out.wasm.partial").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The benchmarks measure Rust guests as an author's release build makes them: the
    /// template's `.cargo/config.toml` carries the same flags.
    #[test]
    fn shipped_rustflags_are_the_rust_templates() {
        let path = crate::workspace::root().join("host/templates/rust/.cargo/config.toml.tmpl");
        let template = std::fs::read_to_string(&path).unwrap();
        let (_, flags) = SHIPPED_RUSTFLAGS.split_once('=').unwrap();
        let line = format!("rustflags = {flags}");
        assert!(
            template.lines().any(|l| l.trim() == line),
            "{} has no line `{line}`",
            path.display()
        );
    }

    #[test]
    fn parse_guest_skips_non_cdylib_crates() {
        assert_eq!(parse_guest("[package]\nname = \"helper\"\n", true), None);
    }
}

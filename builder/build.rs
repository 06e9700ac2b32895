//! Embeds the Go runtime package `go.bytecodealliance.org/pkg` (the one wit-bindgen's Go
//! bindings import) into the library, so `kubewasm build` can build Go plugins where neither the
//! Go module proxy nor a cargo registry is reachable. Its source ships inside the locked
//! `wit-bindgen-go` crate: `cargo metadata` (offline first) names that crate's directory, and the
//! generated table `include_bytes!`s its go.mod, LICENSE and Go sources (nothing is copied
//! into this repository).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest_dir = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    // A changed lock file may lock another wit-bindgen-go.
    if let Some(lock) = manifest_dir.parent().map(|root| root.join("Cargo.lock")) {
        println!("cargo:rerun-if-changed={}", lock.display());
    }
    let pkg = runtime_package(&manifest_dir);
    let mut files = Vec::new();
    collect(&pkg, &pkg, &mut files);
    files.sort();
    if !files.iter().any(|f| f == "go.mod") {
        fail(&format!("{} has no go.mod", pkg.display()));
    }
    let mut table = String::from(
        "/// The files of `go.bytecodealliance.org/pkg` (path inside the module, contents).\n\
         pub static FILES: &[(&str, &[u8])] = &[\n",
    );
    for file in &files {
        let path = pkg.join(file);
        println!("cargo:rerun-if-changed={}", path.display());
        writeln!(
            table,
            "    ({file:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    table.push_str("];\n");
    let out = PathBuf::from(env("OUT_DIR")).join("go_runtime.rs");
    std::fs::write(&out, table)
        .unwrap_or_else(|e| fail(&format!("writing {}: {e}", out.display())));
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| fail(&format!("cargo did not set {key}")))
}

fn fail(message: &str) -> ! {
    panic!(
        "kubewasm-build needs the Go runtime package go.bytecodealliance.org/pkg from the source \
         of the wit-bindgen-go crate (a dependency; `cargo fetch` downloads it): {message}"
    )
}

/// `src/pkg` of the wit-bindgen-go crate kubewasm-build depends on, as cargo resolved it.
fn runtime_package(manifest_dir: &Path) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let metadata = |offline: bool| {
        let mut command = Command::new(&cargo);
        command
            .args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(manifest_dir.join("Cargo.toml"))
            // Only the platform this build is for: cargo metadata otherwise wants every
            // platform's dependencies, which a build does not download.
            .args(["--filter-platform", &env("TARGET")]);
        if offline {
            command.arg("--offline");
        }
        command
            .output()
            .unwrap_or_else(|e| fail(&format!("running cargo metadata: {e}")))
    };
    // Offline answers from what is downloaded; dev-dependencies a plain `cargo build` did not
    // fetch make it fail, and then cargo metadata may fetch them.
    let mut output = metadata(true);
    if !output.status.success() {
        output = metadata(false);
    }
    if !output.status.success() {
        fail(&format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| fail(&format!("cargo metadata printed no JSON: {e}")));
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    let id_of = |name: &str| {
        packages
            .iter()
            .filter(|p| p["name"] == name)
            .filter_map(|p| p["id"].as_str())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    // The wit-bindgen-go that kubewasm-build itself resolved to (a workspace may lock several).
    let builder = id_of(env("CARGO_PKG_NAME").as_str());
    let candidates = id_of("wit-bindgen-go");
    let nodes = metadata["resolve"]["nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let id = nodes
        .iter()
        .find(|node| builder.iter().any(|b| node["id"] == b.as_str()))
        .and_then(|node| node["dependencies"].as_array())
        .and_then(|deps| {
            deps.iter()
                .filter_map(|d| d.as_str())
                .find(|d| candidates.iter().any(|c| c == d))
        })
        .unwrap_or_else(|| fail("cargo metadata shows no wit-bindgen-go dependency"));
    let manifest = packages
        .iter()
        .find(|p| p["id"] == id)
        .and_then(|p| p["manifest_path"].as_str())
        .unwrap_or_else(|| fail("cargo metadata gives no manifest path for wit-bindgen-go"));
    let pkg = Path::new(manifest)
        .parent()
        .map(|dir| dir.join("src/pkg"))
        .unwrap_or_else(|| fail("wit-bindgen-go's manifest has no directory"));
    if !pkg.is_dir() {
        fail(&format!("{} does not exist", pkg.display()));
    }
    pkg
}

/// The module's go.mod, LICENSE and every `.go` / `.s` file, as paths relative to `root`
/// (with `/`).
fn collect(root: &Path, dir: &Path, files: &mut Vec<String>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| fail(&format!("reading {}: {e}", dir.display())));
    for entry in entries {
        let path = entry
            .unwrap_or_else(|e| fail(&format!("reading {}: {e}", dir.display())))
            .path();
        if path.is_dir() {
            collect(root, &path, files);
            continue;
        }
        let relative = path.strip_prefix(root).expect("under the root");
        let wanted = relative == Path::new("go.mod")
            || relative == Path::new("LICENSE")
            || path
                .extension()
                .is_some_and(|ext| ext == "go" || ext == "s");
        if wanted {
            let parts: Vec<_> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            files.push(parts.join("/"));
        }
    }
}

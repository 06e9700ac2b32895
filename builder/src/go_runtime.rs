//! The Go runtime package `go.bytecodealliance.org/pkg` that wit-bindgen's Go bindings import,
//! embedded from the `wit-bindgen-go` crate by `build.rs`: its files, written beside a guest's
//! bindings, and the oldest Go it builds with (which the toolchain check names).

use std::path::Path;

use anyhow::Context;

include!(concat!(env!("OUT_DIR"), "/go_runtime.rs"));

/// The oldest Go the runtime package builds with (its go.mod's `go` line).
pub fn minimum_go_version() -> Option<&'static str> {
    let go_mod = FILES.iter().find(|(path, _)| *path == "go.mod")?.1;
    std::str::from_utf8(go_mod)
        .ok()?
        .lines()
        .find_map(|line| line.trim().strip_prefix("go "))
        .map(str::trim)
}

/// Writes the embedded `go.bytecodealliance.org/pkg` module (go.mod, LICENSE, Go sources)
/// into `to`.
pub fn write_runtime_package(to: &Path) -> anyhow::Result<()> {
    for (path, contents) in FILES {
        let target = to.join(path);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&target, contents)
            .with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_package_is_embedded_with_its_licence_and_sources() {
        let paths: Vec<&str> = FILES.iter().map(|(p, _)| *p).collect();
        for want in [
            "go.mod",
            "LICENSE",
            "wit/runtime/runtime.go",
            "wit/types/result.go",
        ] {
            assert!(paths.contains(&want), "{want} missing from {paths:?}");
        }
        assert!(
            paths
                .iter()
                .all(|p| !p.ends_with(".md") && !p.ends_with(".html"))
        );
        assert!(minimum_go_version().is_some_and(|v| v.starts_with("1.")));
        let dir = tempfile::tempdir().unwrap();
        write_runtime_package(dir.path()).unwrap();
        let go_mod = std::fs::read_to_string(dir.path().join("go.mod")).unwrap();
        assert_eq!(
            crate::go::module_path(&go_mod).unwrap(),
            "go.bytecodealliance.org/pkg"
        );
    }
}

//! ARCHITECTURE.md against the tree: every file it names (a `path.rs` or `path.wit` in
//! backticks, written from the repository root) must exist, so a file moved or removed makes
//! the page fail a test instead of quietly sending a newcomer to nothing.

use std::path::Path;

/// The files `text` names (backticked tokens ending in `.rs` or `.wit`) that do not exist
/// under `root`; a bare file name counts as missing, as the page names files from the root.
pub fn missing_files(root: &Path, text: &str) -> Vec<String> {
    let mut missing = Vec::new();
    for (i, token) in text.split('`').enumerate() {
        let named = i % 2 == 1
            && !token.contains(char::is_whitespace)
            && (token.ends_with(".rs") || token.ends_with(".wit"));
        if named && !root.join(token).is_file() && !missing.iter().any(|m| m == token) {
            missing.push(token.to_owned());
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_architecture_md_names_exists() {
        let root = crate::workspace::root();
        let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
        assert_eq!(
            missing_files(&root, &text),
            Vec::<String>::new(),
            "ARCHITECTURE.md names files that do not exist (paths are from the repository root)"
        );
    }

    #[test]
    fn a_moved_file_and_a_bare_name_are_missing() {
        let root = crate::workspace::root();
        let text = "`xtask/src/architecture.rs` owns this; `runtime/src/plugin/actor.rs` moved; \
                    `actor.rs` is bare; `wit/0.3/admission.wit`; `a b.rs` is prose";
        assert_eq!(
            missing_files(&root, text),
            ["runtime/src/plugin/actor.rs", "actor.rs"]
        );
    }
}

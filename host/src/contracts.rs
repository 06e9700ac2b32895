//! The WIT text of every plugin contract version, carried inside the binary so a plugin author
//! gets the exact files the host implements (`kubewasm wit`, `kubewasm new`) without a checkout
//! of this repository.

use std::path::{Path, PathBuf};

/// One WIT file of a contract: where it goes below the output directory, and its text.
#[derive(Debug, Clone, Copy)]
pub struct WitFile {
    /// Relative path (`controller.wit`, or `deps/NAME/FILE.wit` for a package it builds on).
    pub path: &'static str,
    pub text: &'static str,
}

/// One contract version as a guest build reads it: its own package's files at the top, the
/// packages it uses under `deps/`, the layout wit-parser, wit-bindgen, componentize-py and
/// componentize-js all read.
#[derive(Debug, Clone, Copy)]
pub struct Contract {
    /// The version as users name it (`0.1`, `0.2`, `0.2.1`).
    pub version: &'static str,
    /// The WIT package it is (`kubewasm:controller@0.2.0`).
    pub package: &'static str,
    /// What it adds, in one line.
    pub summary: &'static str,
    pub files: &'static [WitFile],
}

const WIT_0_1: &str = include_str!("../../wit/controller.wit");
const WIT_0_2: &str = include_str!("../../wit/0.2/controller.wit");
const WIT_0_2_1: &str = include_str!("../../wit/0.2.1/batch.wit");
const WIT_0_2_2: &str = include_str!("../../wit/0.2.2/predicates.wit");
const WIT_0_3: &str = include_str!("../../wit/0.3/admission.wit");

/// Every contract this binary carries, oldest first.
pub const CONTRACTS: &[Contract] = &[
    Contract {
        version: "0.1",
        package: "kubewasm:controller@0.1.0",
        summary: "event handlers and a read-only cache",
        files: &[WitFile {
            path: "controller.wit",
            text: WIT_0_1,
        }],
    },
    Contract {
        version: "0.2",
        package: "kubewasm:controller@0.2.0",
        summary: "handlers, the write client, the work queue and reconcile",
        files: &[WitFile {
            path: "controller.wit",
            text: WIT_0_2,
        }],
    },
    Contract {
        version: "0.2.1",
        package: "kubewasm:controller@0.2.1",
        summary: "0.2.0 plus event handlers that take events in batches",
        files: &[
            WitFile {
                path: "batch.wit",
                text: WIT_0_2_1,
            },
            WitFile {
                path: "deps/kubewasm-controller-0.2.0/controller.wit",
                text: WIT_0_2,
            },
        ],
    },
    Contract {
        version: "0.2.2",
        package: "kubewasm:controller@0.2.2",
        summary: "0.2.1 plus queue rules with predicates (generation, labels, annotations)",
        files: &[
            WitFile {
                path: "predicates.wit",
                text: WIT_0_2_2,
            },
            WitFile {
                path: "deps/kubewasm-controller-0.2.0/controller.wit",
                text: WIT_0_2,
            },
            WitFile {
                path: "deps/kubewasm-controller-0.2.1/batch.wit",
                text: WIT_0_2_1,
            },
        ],
    },
    Contract {
        version: "0.3",
        package: "kubewasm:controller@0.3.0",
        summary: "admission: validating and mutating webhooks answered from the shared cache",
        files: &[
            WitFile {
                path: "admission.wit",
                text: WIT_0_3,
            },
            WitFile {
                path: "deps/kubewasm-controller-0.2.0/controller.wit",
                text: WIT_0_2,
            },
            WitFile {
                path: "deps/kubewasm-controller-0.2.1/batch.wit",
                text: WIT_0_2_1,
            },
        ],
    },
];

/// The contract a new plugin targets when none is named: the newest whose `controller` world is
/// the complete one (handlers, client, reconcile).
pub const DEFAULT: &str = "0.2";

/// Why a contract version was not found.
#[derive(Debug, thiserror::Error)]
#[error("no contract version `{asked}` (this kubewasm carries {known})")]
pub struct UnknownContract {
    asked: String,
    known: String,
}

/// The contract `version` names: `0.2`, `0.2.0`, `v0.2` and `kubewasm:controller@0.2.0` all
/// name the same one.
pub fn find(version: &str) -> Result<&'static Contract, UnknownContract> {
    let asked = version.trim();
    let bare = asked
        .strip_prefix("kubewasm:controller@")
        .unwrap_or(asked)
        .trim_start_matches('v');
    CONTRACTS
        .iter()
        .find(|c| {
            c.version == bare
                || c.package.strip_prefix("kubewasm:controller@") == Some(bare)
                || c.package == asked
        })
        .ok_or_else(|| UnknownContract {
            asked: asked.to_owned(),
            known: CONTRACTS
                .iter()
                .map(|c| c.version)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

impl Contract {
    /// Writes the contract's files below `dir` (created as needed); returns the paths written.
    /// Files already there are replaced: the WIT of a version never changes, so an older copy
    /// is the same text or a mistake.
    pub fn write_to(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut written = Vec::new();
        for file in self.files {
            let path = dir.join(file.path);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&path, file.text)?;
            written.push(path);
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_version_finds_it_and_unknown_ones_list_the_known() {
        for name in ["0.2", "0.2.0", "v0.2", "kubewasm:controller@0.2.0"] {
            assert_eq!(find(name).unwrap().package, "kubewasm:controller@0.2.0");
        }
        assert_eq!(find("0.1.0").unwrap().version, "0.1");
        let err = find("0.9").unwrap_err().to_string();
        assert!(
            err.contains("`0.9`") && err.contains("0.1, 0.2, 0.2.1"),
            "{err}"
        );
        assert!(find(DEFAULT).is_ok());
    }

    #[test]
    fn each_contract_carries_the_package_it_claims() {
        for contract in CONTRACTS {
            let first = contract.files[0].text;
            assert!(
                first.contains(&format!("package {};", contract.package)),
                "{} does not declare {}",
                contract.files[0].path,
                contract.package
            );
        }
    }

    #[test]
    fn a_written_contract_has_its_dependencies_under_deps() {
        let dir = tempfile::tempdir().unwrap();
        let written = find("0.2.1").unwrap().write_to(dir.path()).unwrap();
        assert_eq!(written.len(), 2);
        let dep = std::fs::read_to_string(
            dir.path()
                .join("deps/kubewasm-controller-0.2.0/controller.wit"),
        )
        .unwrap();
        assert!(dep.contains("package kubewasm:controller@0.2.0;"));
        assert!(dir.path().join("batch.wit").is_file());
    }
}

//! The precompiled plugin format: a component compiled ahead of time (`kubewasm compile --out`)
//! so that a host can load it without compiling, shipped beside the component in its OCI
//! artifact.
//!
//! Layout: the magic line [`MAGIC`], a little-endian `u32` length, a JSON header of at most
//! [`MAX_HEADER_BYTES`] naming the engine that compiled it ([`EngineStamp`]: the wasmtime
//! version, the fingerprint of its compile settings, the target) and the SHA-256 of the
//! component it was compiled from, then wasmtime's serialized component.
//!
//! Compiled code runs outside the WebAssembly sandbox's checks, so wasmtime only loads it
//! through an `unsafe` call that trusts the bytes. This module does not make bytes trustworthy:
//! it only refuses, with an error naming what differs, an artifact that was made for another
//! engine, target or component. Who may hand the host such bytes at all is decided by its
//! caller (see `docs/security.md`).

use serde::{Deserialize, Serialize};

/// The first bytes of every precompiled artifact.
pub const MAGIC: &[u8] = b"KUBEWASM-PRECOMPILED\n";

/// The format version this host writes and reads.
pub const FORMAT: u32 = 1;

/// The largest header accepted: its fields are a few short strings.
pub const MAX_HEADER_BYTES: usize = 4096;

/// The wasmtime version the host is built with. wasmtime does not export it; a unit test
/// checks it against `Cargo.lock`, so a wasmtime upgrade that forgets it fails the build's
/// tests. (The engine fingerprint covers the version too: this field makes the refusal say it.)
pub const WASMTIME_VERSION: &str = "48.0.8";

/// What code compiled by one engine must match to load into another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStamp {
    /// The wasmtime version ([`WASMTIME_VERSION`]).
    pub wasmtime: String,
    /// A hash of wasmtime's compile settings (its `precompile_compatibility_hash`: target,
    /// Cranelift flags, tunables such as epoch interruption, features, module version).
    pub engine: String,
    /// The target the code was compiled for, `arch-os-env` (e.g. `x86_64-linux-musl`).
    pub target: String,
}

impl EngineStamp {
    /// The target triple of this build: `arch-os-env`.
    pub fn host_target() -> String {
        let env = if cfg!(target_env = "musl") {
            "musl"
        } else if cfg!(target_env = "gnu") {
            "gnu"
        } else {
            "other"
        };
        format!("{}-{}-{env}", std::env::consts::ARCH, std::env::consts::OS)
    }
}

/// The header of a precompiled artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    #[serde(flatten)]
    pub stamp: EngineStamp,
    /// The SHA-256 (hex) of the component the code was compiled from.
    pub component_sha256: String,
}

/// A parsed precompiled artifact: its header and wasmtime's serialized component.
#[derive(Debug)]
pub struct Precompiled<'a> {
    pub header: Header,
    pub code: &'a [u8],
}

/// Why precompiled code is not loaded.
#[derive(Debug, thiserror::Error)]
pub enum PrecompiledError {
    /// The bytes do not start with [`MAGIC`].
    #[error("not a kubewasm precompiled artifact (it does not start with the magic line)")]
    NotPrecompiled,
    /// The header is cut short, too long, or not the JSON this host writes.
    #[error("malformed precompiled artifact header: {0}")]
    Header(String),
    /// Written in a format version this host does not read.
    #[error("precompiled artifact format {found}, this host reads format {FORMAT}")]
    Format { found: u32 },
    /// Compiled from another component than the one it is to stand for.
    #[error(
        "the precompiled code was compiled from component sha256 {artifact}, not from this component (sha256 {expected})"
    )]
    OtherComponent { artifact: String, expected: String },
    /// Compiled by an engine this host's cannot load code of; every field that differs is
    /// named.
    #[error("precompiled for another engine: {}", .0.join("; "))]
    OtherEngine(Vec<String>),
    /// No compile cache to keep verified code in.
    #[error("the host has no compile cache directory to keep precompiled code in")]
    NoCache,
    /// The verified code could not be kept.
    #[error("cannot keep the precompiled code: {0}")]
    Io(#[from] std::io::Error),
}

impl PrecompiledError {
    /// A short, stable name for the kind of refusal (for `/plugins` and metrics).
    pub fn kind(&self) -> &'static str {
        match self {
            PrecompiledError::NotPrecompiled
            | PrecompiledError::Header(_)
            | PrecompiledError::Format { .. } => "malformed",
            PrecompiledError::OtherComponent { .. } => "other-component",
            PrecompiledError::OtherEngine(_) => "other-engine",
            PrecompiledError::NoCache | PrecompiledError::Io(_) => "io",
        }
    }
}

/// The artifact of `code`, compiled by the engine `stamp` from the component whose SHA-256 is
/// `component_sha256`.
pub fn encode(stamp: &EngineStamp, component_sha256: &str, code: &[u8]) -> Vec<u8> {
    let header = Header {
        format: FORMAT,
        stamp: stamp.clone(),
        component_sha256: component_sha256.to_owned(),
    };
    let json = serde_json::to_vec(&header).unwrap_or_default();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + code.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(code);
    out
}

/// Splits an artifact into its header and code, refusing anything not in this format.
pub fn parse(bytes: &[u8]) -> Result<Precompiled<'_>, PrecompiledError> {
    let rest = bytes
        .strip_prefix(MAGIC)
        .ok_or(PrecompiledError::NotPrecompiled)?;
    let (len, rest) = rest
        .split_first_chunk::<4>()
        .ok_or_else(|| PrecompiledError::Header("cut short before its length".into()))?;
    let len = u32::from_le_bytes(*len) as usize;
    if len > MAX_HEADER_BYTES {
        return Err(PrecompiledError::Header(format!(
            "{len} bytes long, over the limit of {MAX_HEADER_BYTES}"
        )));
    }
    if rest.len() < len {
        return Err(PrecompiledError::Header("cut short".into()));
    }
    let (json, code) = rest.split_at(len);
    // The format first, so that a later format's header is refused as such.
    #[derive(Deserialize)]
    struct Versioned {
        format: u32,
    }
    let versioned: Versioned =
        serde_json::from_slice(json).map_err(|e| PrecompiledError::Header(e.to_string()))?;
    if versioned.format != FORMAT {
        return Err(PrecompiledError::Format {
            found: versioned.format,
        });
    }
    let header: Header =
        serde_json::from_slice(json).map_err(|e| PrecompiledError::Header(e.to_string()))?;
    if code.is_empty() {
        return Err(PrecompiledError::Header("no code after the header".into()));
    }
    Ok(Precompiled { header, code })
}

impl Precompiled<'_> {
    /// Checks that the code was compiled by an engine like `host` and, when given, from the
    /// component whose SHA-256 is `component_sha256`. The errors quote the artifact's fields
    /// escaped: they come from outside.
    pub fn check(
        &self,
        host: &EngineStamp,
        component_sha256: Option<&str>,
    ) -> Result<(), PrecompiledError> {
        if let Some(expected) = component_sha256
            && self.header.component_sha256 != expected
        {
            return Err(PrecompiledError::OtherComponent {
                artifact: shown(&self.header.component_sha256),
                expected: expected.to_owned(),
            });
        }
        let theirs = &self.header.stamp;
        let mut differs = Vec::new();
        for (what, artifact, ours) in [
            ("wasmtime", &theirs.wasmtime, &host.wasmtime),
            ("target", &theirs.target, &host.target),
            ("engine settings", &theirs.engine, &host.engine),
        ] {
            if artifact != ours {
                differs.push(format!("{what} {} (this host: {ours})", shown(artifact)));
            }
        }
        if differs.is_empty() {
            Ok(())
        } else {
            Err(PrecompiledError::OtherEngine(differs))
        }
    }
}

/// A string from an artifact as an error shows it: escaped, at most 100 characters.
fn shown(value: &str) -> String {
    let escaped = value.escape_debug().to_string();
    match escaped.char_indices().nth(100) {
        Some((at, _)) => format!("{}...", &escaped[..at]),
        None => escaped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp() -> EngineStamp {
        EngineStamp {
            wasmtime: WASMTIME_VERSION.into(),
            engine: "0123456789abcdef".into(),
            target: EngineStamp::host_target(),
        }
    }

    #[test]
    fn an_encoded_artifact_parses_back_and_matches_its_engine_and_component() {
        let bytes = encode(&stamp(), "aa", b"\x7fELF code");
        let parsed = parse(&bytes).unwrap();
        assert_eq!(parsed.code, b"\x7fELF code");
        assert_eq!(parsed.header.stamp, stamp());
        parsed.check(&stamp(), Some("aa")).unwrap();
        parsed.check(&stamp(), None).unwrap();
    }

    #[test]
    fn every_difference_is_named() {
        let theirs = EngineStamp {
            wasmtime: "47.0.0".into(),
            engine: "fedcba9876543210".into(),
            target: "aarch64-linux-musl".into(),
        };
        let bytes = encode(&theirs, "aa", b"code");
        let mut ours = stamp();
        ours.target = "x86_64-linux-gnu".into();
        let err = parse(&bytes).unwrap().check(&ours, Some("aa")).unwrap_err();
        assert_eq!(err.kind(), "other-engine");
        let message = err.to_string();
        for part in [
            "wasmtime 47.0.0 (this host: 48.0.8)",
            "target aarch64-linux-musl (this host: x86_64-linux-gnu)",
            "engine settings fedcba9876543210 (this host: 0123456789abcdef)",
        ] {
            assert!(message.contains(part), "{message}");
        }
        let err = parse(&bytes)
            .unwrap()
            .check(&theirs, Some("bb"))
            .unwrap_err();
        assert_eq!(err.kind(), "other-component");
        assert!(
            err.to_string()
                .contains("not from this component (sha256 bb)")
        );
    }

    #[test]
    fn malformed_artifacts_are_refused_not_read_past() {
        let good = encode(&stamp(), "aa", b"code");
        assert!(matches!(
            parse(b"\0asm\x0d\0\x01\0"),
            Err(PrecompiledError::NotPrecompiled)
        ));
        for cut in [MAGIC.len() + 2, MAGIC.len() + 10, good.len() - 4] {
            assert!(parse(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = MAGIC.to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = parse(&huge).unwrap_err().to_string();
        assert!(err.contains("over the limit"), "{err}");
        let mut later = MAGIC.to_vec();
        let json = br#"{"format":2}"#;
        later.extend_from_slice(&(json.len() as u32).to_le_bytes());
        later.extend_from_slice(json);
        later.extend_from_slice(b"code");
        assert!(matches!(
            parse(&later),
            Err(PrecompiledError::Format { found: 2 })
        ));
        let hostile = EngineStamp {
            wasmtime: format!("1\n\u{1b}[31m{}", "x".repeat(500)),
            ..stamp()
        };
        let err = parse(&encode(&hostile, "aa", b"code"))
            .unwrap()
            .check(&stamp(), None)
            .unwrap_err()
            .to_string();
        assert!(!err.contains('\n') && !err.contains('\u{1b}'), "{err}");
        assert!(err.len() < 400, "{err}");
    }

    #[test]
    fn the_wasmtime_version_is_the_one_in_cargo_lock() {
        let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
            .expect("Cargo.lock");
        let version = lock
            .split("[[package]]")
            .find_map(|p| {
                p.contains("\nname = \"wasmtime\"\n")
                    .then(|| p.split("version = \"").nth(1)?.split('"').next())
                    .flatten()
            })
            .expect("wasmtime in Cargo.lock");
        assert_eq!(
            version, WASMTIME_VERSION,
            "update WASMTIME_VERSION after a wasmtime upgrade"
        );
    }
}

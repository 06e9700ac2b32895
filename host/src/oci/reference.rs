//! Registry references as users write them: `host/repo:tag`, `host/repo@sha256:...`, with or
//! without an `oci://` scheme.

use oci_client::Reference;

/// Why a reference cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("bad OCI reference `{text}`: {reason}")]
pub struct ReferenceError {
    pub text: String,
    pub reason: String,
}

/// Parses `oci://registry.example/team/name:1.2`, `registry.example/team/name@sha256:<hex>` and
/// the like. The registry host must be written out: a bare `name:tag` would silently mean
/// Docker Hub.
pub fn parse_reference(text: &str) -> Result<Reference, ReferenceError> {
    let error = |reason: &str| ReferenceError {
        text: text.to_owned(),
        reason: reason.to_owned(),
    };
    let bare = text.strip_prefix("oci://").unwrap_or(text);
    let host = bare.split('/').next().unwrap_or_default();
    if !bare.contains('/') || !(host.contains('.') || host.contains(':') || host == "localhost") {
        return Err(error(
            "name the registry host, as in oci://registry.example/team/name:1.2",
        ));
    }
    let reference: Reference = bare.parse().map_err(|e| error(&format!("{e}")))?;
    if let Some(digest) = reference.digest()
        && !is_sha256_digest(digest)
    {
        return Err(error("the digest must be sha256:<64 lowercase hex digits>"));
    }
    Ok(reference)
}

/// Whether `digest` is `sha256:` and 64 lowercase hex digits: the only digests kubewasm stores.
pub(crate) fn is_sha256_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_must_name_the_host_and_pin_sha256_only() {
        let tagged = parse_reference("oci://127.0.0.1:5000/team/pod-diff:1.2").unwrap();
        assert_eq!(tagged.registry(), "127.0.0.1:5000");
        assert_eq!(tagged.repository(), "team/pod-diff");
        assert_eq!(tagged.tag(), Some("1.2"));
        let digest = format!("sha256:{}", "ab".repeat(32));
        let pinned = parse_reference(&format!("registry.example/x@{digest}")).unwrap();
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        for bad in [
            "pod-diff:1.2",
            "oci://team/pod-diff:1",
            "registry.example/x@sha256:abc",
            "registry.example/X Y",
        ] {
            assert!(parse_reference(bad).is_err(), "{bad}");
        }
    }
}

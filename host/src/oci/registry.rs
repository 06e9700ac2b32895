//! Talking to a registry: push a component as a Wasm artifact, resolve a tag, fetch a
//! manifest and a component, every error sorted into what a user can act on.
//!
//! The protocol is `oci-client`'s; this module adds the Wasm artifact layout, digest checks of
//! everything fetched, credentials from a Docker config file, and plain HTTP for the registries
//! named (a registry on loopback in tests, never for anything reachable from outside).

use std::collections::HashMap;
use std::time::Duration;

use parking_lot::Mutex;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::artifact::{self, ArtifactError, MAX_COMPONENT_BYTES, MAX_PRECOMPILED_BYTES, Metadata};
use super::credentials::{Credentials, CredentialsError};
use super::store::{StoreError, sha256_digest, verify};

/// Why a registry operation failed, sorted by what to do about it. No variant carries a
/// credential.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// 401 or 403: no credentials, or the wrong ones, for this repository.
    #[error(
        "registry {registry} refused access to {reference} (401/403): check the credentials in the registry config"
    )]
    Unauthorized { registry: String, reference: String },
    /// 404: no such repository, tag or digest.
    #[error("{reference} not found in registry {registry} (404)")]
    NotFound { registry: String, reference: String },
    /// 429: rate limited; tried again at the next poll.
    #[error("registry {registry} is rate limiting (429) requests for {reference}")]
    RateLimited { registry: String, reference: String },
    /// A 5xx (or another unexpected status) from the registry.
    #[error("registry {registry} failed ({code}) on {reference}")]
    Server {
        registry: String,
        reference: String,
        code: u16,
    },
    /// No answer at all: connection refused, DNS, TLS or a timeout.
    #[error("registry {registry} is unreachable: {message}")]
    Unreachable { registry: String, message: String },
    /// What came back does not hash to the digest asked for.
    #[error("{reference}: {source}")]
    Digest {
        reference: String,
        #[source]
        source: StoreError,
    },
    /// The artifact is not a Wasm component artifact.
    #[error("{reference}: {source}")]
    NotWasm {
        reference: String,
        #[source]
        source: ArtifactError,
    },
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// Anything else the registry or the client reported.
    #[error("{reference}: {message}")]
    Other { reference: String, message: String },
}

impl RegistryError {
    /// A short, stable name for the kind of failure (for `/plugins` and metrics).
    pub fn kind(&self) -> &'static str {
        match self {
            RegistryError::Unauthorized { .. } => "unauthorized",
            RegistryError::NotFound { .. } => "not-found",
            RegistryError::RateLimited { .. } => "rate-limited",
            RegistryError::Server { .. } => "server-error",
            RegistryError::Unreachable { .. } => "unreachable",
            RegistryError::Digest { .. } => "digest-mismatch",
            RegistryError::NotWasm { .. } => "not-wasm",
            RegistryError::Credentials(_) => "credentials",
            RegistryError::Other { .. } => "error",
        }
    }

    /// Sorts an `oci-client` error about `reference`.
    fn from_client(reference: &Reference, err: OciDistributionError) -> RegistryError {
        let registry = reference.registry().to_owned();
        let shown = reference.whole();
        let by_status = |code: u16| match code {
            401 | 403 => RegistryError::Unauthorized {
                registry: registry.clone(),
                reference: shown.clone(),
            },
            404 => RegistryError::NotFound {
                registry: registry.clone(),
                reference: shown.clone(),
            },
            429 => RegistryError::RateLimited {
                registry: registry.clone(),
                reference: shown.clone(),
            },
            code => RegistryError::Server {
                registry: registry.clone(),
                reference: shown.clone(),
                code,
            },
        };
        match err {
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => by_status(401),
            OciDistributionError::ImageManifestNotFoundError(_) => by_status(404),
            OciDistributionError::ServerError { code, .. } => by_status(code),
            OciDistributionError::RegistryError { envelope, .. } => {
                let code = envelope.errors.first().map(|e| match e.code {
                    OciErrorCode::Unauthorized | OciErrorCode::Denied => 401,
                    OciErrorCode::Toomanyrequests => 429,
                    OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::BlobUnknown
                    | OciErrorCode::NotFound => 404,
                    _ => 400,
                });
                match code {
                    Some(400) | None => RegistryError::Other {
                        reference: shown,
                        message: envelope.to_string(),
                    },
                    Some(code) => by_status(code),
                }
            }
            OciDistributionError::DigestError(err) => RegistryError::Other {
                reference: shown,
                message: format!("digest mismatch: {err}"),
            },
            OciDistributionError::RequestError(err) => match err.status() {
                Some(status) => by_status(status.as_u16()),
                None => RegistryError::Unreachable {
                    registry,
                    message: error_chain(&err),
                },
            },
            other => RegistryError::Other {
                reference: shown,
                message: other.to_string(),
            },
        }
    }
}

fn new_client(protocol: &ClientProtocol) -> Client {
    Client::new(ClientConfig {
        protocol: protocol.clone(),
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        // A plugin is one artifact: an image index is refused, not resolved by platform.
        platform_resolver: None,
        ..ClientConfig::default()
    })
}

/// An error and its sources on one line (`reqwest` puts the useful part in the sources).
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(err) = source {
        out.push_str(": ");
        out.push_str(&err.to_string());
        source = err.source();
    }
    out
}

/// How to reach registries.
#[derive(Debug, Clone, Default)]
pub struct RegistryOptions {
    pub credentials: Credentials,
    /// Registries (`host:port`) spoken to over plain HTTP; `["*"]` for all of them.
    pub plain_http: Vec<String>,
}

/// A Wasm artifact fetched from a registry, every part checked against its digest.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The manifest's digest: what a tag resolved to.
    pub digest: String,
    /// The manifest as the registry served it.
    pub manifest_bytes: Vec<u8>,
    pub manifest: OciImageManifest,
}

impl Pulled {
    /// The component layer's digest.
    pub fn layer_digest(&self) -> &str {
        // `parse` refused manifests without exactly one Wasm layer.
        artifact::wasm_layer(&self.manifest).map_or("", |layer| layer.digest.as_str())
    }

    /// The precompiled layer's digest, when the artifact ships precompiled code.
    pub fn precompiled_digest(&self) -> Option<&str> {
        artifact::precompiled_layer(&self.manifest)
            .ok()
            .flatten()
            .map(|layer| layer.digest.as_str())
    }

    /// The annotation `key` of the manifest.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.manifest
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

/// A registry client with its credentials.
pub struct Registry {
    protocol: ClientProtocol,
    credentials: Credentials,
    /// The client, and the credentials it was given per registry: `oci-client` keeps the first
    /// credentials it is given for a registry, so a client is replaced when they change (a
    /// rotated Secret).
    client: Mutex<(Client, HashMap<String, RegistryAuth>)>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    pub fn new(options: RegistryOptions) -> Registry {
        // kube and this client share rustls with the ring provider; the process default is
        // set once (a second call finds it set and changes nothing).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if options.plain_http.iter().any(|r| r == "*") {
            ClientProtocol::Http
        } else if options.plain_http.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(options.plain_http.clone())
        };
        Registry {
            client: Mutex::new((new_client(&protocol), HashMap::new())),
            protocol,
            credentials: options.credentials,
        }
    }

    /// The client to reach `reference`'s registry with, and the credentials read for it now.
    fn client(&self, reference: &Reference) -> Result<(Client, RegistryAuth), RegistryError> {
        let auth = self.credentials.auth_for(reference.registry())?;
        let mut guard = self.client.lock();
        let (client, given) = &mut *guard;
        let registry = reference.resolve_registry();
        if given.get(registry).is_some_and(|old| *old != auth) {
            *client = new_client(&self.protocol);
            given.clear();
        }
        given.insert(registry.to_owned(), auth.clone());
        Ok((client.clone(), auth))
    }

    /// Publishes `wasm` as a Wasm artifact at `reference`, with `precompiled` code as a layer
    /// of its own when given; returns the manifest's digest.
    pub async fn push(
        &self,
        reference: &Reference,
        wasm: Vec<u8>,
        precompiled: Option<Vec<u8>>,
        file_name: &str,
        meta: &Metadata,
    ) -> Result<String, RegistryError> {
        let (client, auth) = self.client(reference)?;
        let (layers, config, manifest) = artifact::build(wasm, precompiled, file_name, meta);
        client
            .push(reference, &layers, config, &auth, Some(manifest))
            .await
            .map_err(|e| RegistryError::from_client(reference, e))?;
        // The digest of the manifest as the registry stored it.
        client
            .fetch_manifest_digest(reference, &auth)
            .await
            .map_err(|e| RegistryError::from_client(reference, e))
    }

    /// The manifest digest `reference` names now: its pinned digest, or what its tag points at.
    pub async fn resolve(&self, reference: &Reference) -> Result<String, RegistryError> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.to_owned());
        }
        let (client, auth) = self.client(reference)?;
        client
            .fetch_manifest_digest(reference, &auth)
            .await
            .map_err(|e| RegistryError::from_client(reference, e))
    }

    /// Fetches the manifest `digest` of `reference`'s repository, checks that it hashes to
    /// `digest` and that it is a Wasm artifact.
    pub async fn fetch_manifest(
        &self,
        reference: &Reference,
        digest: &str,
    ) -> Result<Pulled, RegistryError> {
        let pinned = reference.clone_with_digest(digest.to_owned());
        let (client, auth) = self.client(reference)?;
        let (bytes, _) = client
            .pull_manifest_raw(&pinned, &auth, &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(|e| RegistryError::from_client(reference, e))?;
        Pulled::parse(reference, digest, bytes.to_vec())
    }

    /// Fetches the component of `pulled` and checks it against its digest.
    pub async fn fetch_component(
        &self,
        reference: &Reference,
        pulled: &Pulled,
    ) -> Result<Vec<u8>, RegistryError> {
        let layer =
            artifact::wasm_layer(&pulled.manifest).map_err(|source| RegistryError::NotWasm {
                reference: reference.whole(),
                source,
            })?;
        self.fetch_layer(
            reference,
            layer,
            MAX_COMPONENT_BYTES,
            ArtifactError::TooLarge,
        )
        .await
    }

    /// Fetches the precompiled code of `pulled`, if it ships any, checked against its digest.
    pub async fn fetch_precompiled(
        &self,
        reference: &Reference,
        pulled: &Pulled,
    ) -> Result<Option<Vec<u8>>, RegistryError> {
        let layer = artifact::precompiled_layer(&pulled.manifest).map_err(|source| {
            RegistryError::NotWasm {
                reference: reference.whole(),
                source,
            }
        })?;
        let Some(layer) = layer else {
            return Ok(None);
        };
        self.fetch_layer(
            reference,
            layer,
            MAX_PRECOMPILED_BYTES,
            ArtifactError::PrecompiledTooLarge,
        )
        .await
        .map(Some)
    }

    /// Fetches `layer`, refusing it past `limit` bytes (whatever its descriptor says) and
    /// unless it hashes to its digest.
    async fn fetch_layer(
        &self,
        reference: &Reference,
        layer: &OciDescriptor,
        limit: usize,
        over: fn(i64) -> ArtifactError,
    ) -> Result<Vec<u8>, RegistryError> {
        let (client, auth) = self.client(reference)?;
        client
            .store_auth_if_needed(reference.resolve_registry(), &auth)
            .await;
        let too_large = |size: i64| RegistryError::NotWasm {
            reference: reference.whole(),
            source: over(size),
        };
        let declared = usize::try_from(layer.size).map_err(|_| too_large(layer.size))?;
        if declared > limit {
            return Err(too_large(layer.size));
        }
        let mut bounded = Bounded {
            buf: Vec::with_capacity(declared),
            limit,
            overflowed: false,
        };
        let pulled = client.pull_blob(reference, layer, &mut bounded).await;
        if bounded.overflowed {
            return Err(too_large(
                i64::try_from(bounded.buf.len()).unwrap_or(i64::MAX),
            ));
        }
        let out = bounded.buf;
        pulled.map_err(|e| match e {
            OciDistributionError::DigestError(_) => RegistryError::Digest {
                reference: reference.whole(),
                source: StoreError::DigestMismatch {
                    expected: layer.digest.clone(),
                    actual: sha256_digest(&out),
                },
            },
            e => RegistryError::from_client(reference, e),
        })?;
        verify(&layer.digest, &out).map_err(|source| RegistryError::Digest {
            reference: reference.whole(),
            source,
        })?;
        Ok(out)
    }
}

impl Pulled {
    /// A manifest read back (from the registry or the store) as `digest`: checked, parsed and
    /// refused unless it is a Wasm artifact.
    pub(crate) fn parse(
        reference: &Reference,
        digest: &str,
        bytes: Vec<u8>,
    ) -> Result<Pulled, RegistryError> {
        verify(digest, &bytes).map_err(|source| RegistryError::Digest {
            reference: reference.whole(),
            source,
        })?;
        let manifest: OciImageManifest =
            serde_json::from_slice(&bytes).map_err(|e| RegistryError::Other {
                reference: reference.whole(),
                message: format!("not an OCI image manifest: {e}"),
            })?;
        artifact::wasm_layer(&manifest).map_err(|source| RegistryError::NotWasm {
            reference: reference.whole(),
            source,
        })?;
        Ok(Pulled {
            digest: digest.to_owned(),
            manifest_bytes: bytes,
            manifest,
        })
    }
}

/// A blob being pulled, refused once it would pass `limit` bytes whatever the manifest said
/// its size was.
struct Bounded {
    buf: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl tokio::io::AsyncWrite for Bounded {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        data: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.buf.len() + data.len() > this.limit {
            this.overflowed = true;
            return std::task::Poll::Ready(Err(std::io::Error::other("layer over the size limit")));
        }
        this.buf.extend_from_slice(data);
        std::task::Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_blob_past_the_size_limit_is_refused_not_kept() {
        use tokio::io::AsyncWriteExt;
        let mut bounded = Bounded {
            buf: vec![0; MAX_COMPONENT_BYTES - 1],
            limit: MAX_COMPONENT_BYTES,
            overflowed: false,
        };
        bounded.write_all(b"x").await.expect("up to the limit");
        assert!(bounded.write_all(b"y").await.is_err());
        assert!(bounded.overflowed);
        assert_eq!(bounded.buf.len(), MAX_COMPONENT_BYTES);
    }

    /// Statuses a test registry cannot be made to answer are sorted too, each message saying
    /// what happened to which reference.
    #[test]
    fn answers_are_sorted_by_what_to_do() {
        let reference = super::super::parse_reference("r.example/team/p:1").unwrap();
        let status = |code: u16| {
            RegistryError::from_client(
                &reference,
                OciDistributionError::ServerError {
                    code,
                    url: "https://r.example/v2/team/p/manifests/1".into(),
                    message: String::new(),
                },
            )
        };
        for (code, kind, says) in [
            (401, "unauthorized", "refused access"),
            (404, "not-found", "not found"),
            (429, "rate-limited", "rate limiting (429)"),
            (500, "server-error", "failed (500)"),
            (503, "server-error", "failed (503)"),
        ] {
            let err = status(code);
            assert_eq!(err.kind(), kind, "{code}");
            let message = err.to_string();
            assert!(
                message.contains(says) && message.contains("team/p"),
                "{message}"
            );
        }
        let envelope = serde_json::from_str(
            r#"{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}"#,
        )
        .unwrap();
        let err = RegistryError::from_client(
            &reference,
            OciDistributionError::RegistryError {
                envelope,
                url: String::new(),
            },
        );
        assert_eq!(err.kind(), "rate-limited");
    }
}

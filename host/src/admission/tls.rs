//! The webhook server's certificate and key, from PEM files that are re-read when they change
//! (a cert-manager Secret mounted as a volume is rewritten in place on renewal): a handshake
//! looks at the files' modification times at most once a second, and a pair that does not
//! load (half written, key not matching) leaves the previous one in use.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// Why a certificate and key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {file}: {reason}")]
    Read { file: PathBuf, reason: String },
    #[error("{file} holds no PEM certificate")]
    NoCertificate { file: PathBuf },
    #[error("the key {key} does not serve the certificate {cert}: {reason}")]
    Key {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// How often a handshake may look at the files.
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A certificate resolver that serves the pair in two files and reloads it when they change.
#[derive(Debug)]
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    state: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    current: Arc<CertifiedKey>,
    stamp: Stamp,
    checked: Instant,
}

/// What the files looked like when they were last loaded.
type Stamp = [(Option<SystemTime>, u64); 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let one = |p: &Path| std::fs::metadata(p).map_or((None, 0), |m| (m.modified().ok(), m.len()));
    [one(cert), one(key)]
}

impl ReloadingCert {
    /// Loads the pair now: an error if it does not load.
    pub fn new(cert: &Path, key: &Path) -> Result<ReloadingCert, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = stamp(cert, key);
        let current = Arc::new(load(cert, key, &provider)?);
        Ok(ReloadingCert {
            cert: cert.to_owned(),
            key: key.to_owned(),
            provider,
            state: Mutex::new(Loaded {
                current,
                stamp,
                checked: Instant::now(),
            }),
        })
    }

    /// A server configuration (TLS 1.2 and 1.3, HTTP/1.1) that serves this pair.
    pub fn server_config(self: Arc<Self>) -> Result<rustls::ServerConfig, TlsError> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_cert_resolver(self);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// The pair in use, reloaded first if the files changed (checked at most once a second).
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut state = self.state.lock();
        if state.checked.elapsed() >= CHECK_INTERVAL {
            state.checked = Instant::now();
            let now = stamp(&self.cert, &self.key);
            if now != state.stamp {
                match load(&self.cert, &self.key, &self.provider) {
                    Ok(pair) => {
                        tracing::info!(cert = %self.cert.display(), "webhook certificate reloaded");
                        state.current = Arc::new(pair);
                        state.stamp = now;
                    }
                    // Tried again at the next check: the files may be half written.
                    Err(e) => {
                        tracing::warn!(
                            "webhook certificate not reloaded, the previous one stays in use: {e}"
                        )
                    }
                }
            }
        }
        state.current.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, TlsError> {
    let read = |file: &Path, e: &dyn std::fmt::Display| TlsError::Read {
        file: file.to_owned(),
        reason: e.to_string(),
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| read(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(cert, &e))?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            file: cert.to_owned(),
        });
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| read(key, &e))?;
    CertifiedKey::from_der(chain, private, provider).map_err(|e| TlsError::Key {
        cert: cert.to_owned(),
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf, String) {
        let certified = rcgen::generate_simple_self_signed(vec![name.to_owned()]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        (cert, key, certified.cert.pem())
    }

    #[test]
    fn changed_files_are_served_and_a_broken_pair_keeps_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, _) = write_pair(dir.path(), "one.example");
        let resolver = ReloadingCert::new(&cert, &key).unwrap();
        let first = resolver.current();
        // A half-written renewal: the old pair stays.
        std::fs::write(&cert, "-----BEGIN CERTIFICATE-----\nAAAA").unwrap();
        resolver.state.lock().checked -= CHECK_INTERVAL;
        assert!(Arc::ptr_eq(&first, &resolver.current()));
        // The renewal completes: the new pair is served.
        write_pair(dir.path(), "two.example");
        resolver.state.lock().checked -= CHECK_INTERVAL;
        let second = resolver.current();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_ne!(first.cert[0], second.cert[0]);
    }

    #[test]
    fn a_key_of_another_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, _, _) = write_pair(dir.path(), "a.example");
        let other = rcgen::generate_simple_self_signed(vec!["b.example".into()]).unwrap();
        let key = dir.path().join("other.key");
        std::fs::write(&key, other.signing_key.serialize_pem()).unwrap();
        assert!(matches!(
            ReloadingCert::new(&cert, &key).unwrap_err(),
            TlsError::Key { .. }
        ));
        assert!(matches!(
            ReloadingCert::new(&dir.path().join("none"), &key).unwrap_err(),
            TlsError::Read { .. }
        ));
    }
}

//! A certificate for a webhook endpoint on loopback, made in memory at start: a CA of its own
//! (self-signed, its key never leaves this process) and a serving certificate it signed for
//! `127.0.0.1`, `::1` and `localhost`. `kubewasm test` and `kubewasm dev` (without
//! `--webhook-cert`) serve the admission webhooks with it and give its CA as the webhook
//! configurations' `caBundle`, so their API server calls the plugins over verified HTTPS with
//! no setup. Nothing is written to disk; a new run makes a new pair.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::tls::TlsError;

/// The names the serving certificate is valid for.
pub const LOOPBACK_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// A CA and the loopback serving certificate it signed.
pub struct LoopbackCert {
    ca_pem: String,
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl std::fmt::Debug for LoopbackCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackCert").finish_non_exhaustive()
    }
}

fn failed(e: rcgen::Error) -> TlsError {
    TlsError::Config(format!("cannot make the loopback certificate: {e}"))
}

impl LoopbackCert {
    /// Makes a new CA and serving certificate (P-256 keys).
    pub fn generate() -> Result<LoopbackCert, TlsError> {
        let ca_key = KeyPair::generate().map_err(failed)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        ca.distinguished_name
            .push(DnType::CommonName, "kubewasm loopback webhook CA");
        ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).map_err(failed)?;
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().map_err(failed)?;
        let mut serving = CertificateParams::new(
            LOOPBACK_NAMES
                .iter()
                .map(|n| (*n).to_owned())
                .collect::<Vec<_>>(),
        )
        .map_err(failed)?;
        serving
            .distinguished_name
            .push(DnType::CommonName, "kubewasm loopback webhooks");
        serving.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = serving.signed_by(&key, &issuer).map_err(failed)?;
        Ok(LoopbackCert {
            ca_pem: ca_cert.pem(),
            chain: vec![cert.der().clone(), ca_cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    /// The CA, PEM: the `caBundle` a client trusts the endpoint with.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// A server configuration (TLS 1.2 and 1.3, HTTP/1.1) serving the certificate.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(
                self.chain.clone(),
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::ServerName;
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A client that trusts only `ca_pem`.
    fn client(ca_pem: &str) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// Serves one TLS connection on 127.0.0.1 (answering `ok`) with `cert`; the port.
    async fn serve_once(cert: &LoopbackCert) -> u16 {
        let acceptor =
            tokio_rustls::TlsAcceptor::from(Arc::new(cert.server_config().expect("config")));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"ok").await;
                    let _ = tls.shutdown().await;
                }
            }
        });
        port
    }

    async fn connect(ca: &str, port: u16, name: &str) -> std::io::Result<String> {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let mut tls = client(ca).connect(name, tcp).await?;
        let mut answer = String::new();
        tls.read_to_string(&mut answer).await?;
        Ok(answer)
    }

    #[tokio::test]
    async fn a_client_trusting_the_ca_connects_by_loopback_address_and_name() {
        let cert = LoopbackCert::generate().unwrap();
        let port = serve_once(&cert).await;
        for name in ["127.0.0.1", "localhost"] {
            assert_eq!(connect(cert.ca_pem(), port, name).await.unwrap(), "ok");
        }
        // Not valid for any other name.
        assert!(connect(cert.ca_pem(), port, "example.com").await.is_err());
    }

    #[tokio::test]
    async fn a_client_trusting_another_run_s_ca_is_refused() {
        let (cert, other) = (
            LoopbackCert::generate().unwrap(),
            LoopbackCert::generate().unwrap(),
        );
        assert_ne!(cert.ca_pem(), other.ca_pem());
        let port = serve_once(&cert).await;
        assert!(connect(other.ca_pem(), port, "127.0.0.1").await.is_err());
    }
}

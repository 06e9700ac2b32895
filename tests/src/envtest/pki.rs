//! The keys and certificates a test API server needs, generated in process (no openssl).

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

/// PEM texts written into the harness's directory.
pub struct Pki {
    /// The CA clients trust (kubeconfig `certificate-authority`).
    pub ca_cert: String,
    /// The API server's serving certificate for `127.0.0.1` and `localhost`, signed by the CA.
    pub serving_cert: String,
    pub serving_key: String,
    /// The key pair that signs and verifies service-account tokens.
    pub service_account_key: String,
    pub service_account_public_key: String,
}

impl Pki {
    /// Fresh ECDSA P-256 keys: a CA, a serving certificate and a service-account key pair.
    pub fn generate() -> Result<Pki, rcgen::Error> {
        let mut ca = CertificateParams::new(Vec::<String>::new())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "kubewasm envtest CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

        let mut serving = CertificateParams::new(vec!["localhost".to_owned()])?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = KeyPair::generate()?;
        let serving_cert = serving.signed_by(&serving_key, &ca)?;

        let service_account = KeyPair::generate()?;
        Ok(Pki {
            ca_cert: ca.pem(),
            serving_cert: serving_cert.pem(),
            serving_key: serving_key.serialize_pem(),
            service_account_key: service_account.serialize_pem(),
            service_account_public_key: service_account.public_key_pem(),
        })
    }
}

//! The sandbox's own certificate authority and serving certificate, generated at start
//! (like `kubeadm` does for a real cluster), and the kubeconfig that trusts them.

use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The name of the kubeconfig context (and cluster, and user) the sandbox writes.
pub(crate) const CONTEXT: &str = "tether-sandbox";

/// A CA and a serving certificate signed by it.
pub(crate) struct Certificates {
    pub(crate) ca_pem: String,
    pub(crate) server_config: Arc<ServerConfig>,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot configure TLS: {0}")]
    Configure(#[from] rustls::Error),
}

/// Generates a CA and a serving certificate for `ip` (and `localhost`).
pub(crate) fn generate(ip: IpAddr) -> Result<Certificates, TlsError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::default();
    ca_params.distinguished_name = distinguished_name("tether-sandbox-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate()?;
    let mut server_params = CertificateParams::default();
    server_params.distinguished_name = distinguished_name("tether-sandbox");
    let mut names = vec![
        SanType::IpAddress(ip),
        SanType::DnsName("localhost".try_into()?),
    ];
    let loopback: IpAddr = [127, 0, 0, 1].into();
    if ip != loopback {
        names.push(SanType::IpAddress(loopback));
    }
    server_params.subject_alt_names = names;
    server_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let server_cert = server_params.signed_by(&server_key, &issuer)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![
                CertificateDer::from(server_cert.der().to_vec()),
                CertificateDer::from(ca_cert.der().to_vec()),
            ],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der())),
        )?;
    // kubectl and kube-rs speak HTTP/2 when offered, as with a real API server.
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Certificates {
        ca_pem: ca_cert.pem(),
        server_config: Arc::new(config),
    })
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// A kubeconfig with one cluster, user and context, all named [`CONTEXT`].
pub(crate) fn kubeconfig(server: &str, ca_pem: &str, token: &str) -> String {
    let ca_data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {CONTEXT}
  cluster:
    server: {server}
    certificate-authority-data: {ca_data}
users:
- name: {CONTEXT}
  user:
    token: {token}
contexts:
- name: {CONTEXT}
  context:
    cluster: {CONTEXT}
    user: {CONTEXT}
    namespace: default
current-context: {CONTEXT}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_are_generated_for_the_address() {
        let certs = generate([127, 0, 0, 1].into()).unwrap();
        assert!(certs.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_eq!(certs.server_config.alpn_protocols[0], b"h2");
    }

    #[test]
    fn kubeconfig_names_the_context_and_embeds_the_ca() {
        let config = kubeconfig("https://127.0.0.1:6443", "PEM", "secret-token");
        let parsed = kube::config::Kubeconfig::from_yaml(&config).unwrap();
        assert_eq!(parsed.current_context.as_deref(), Some(CONTEXT));
        assert_eq!(
            parsed.clusters[0]
                .cluster
                .as_ref()
                .unwrap()
                .server
                .as_deref(),
            Some("https://127.0.0.1:6443")
        );
    }
}

//! A chart repository's own TLS trust (issue #26): a custom CA and a client
//! certificate from the source's Secret, with the keys of Flux's `certSecretRef`
//! (`ca.crt`, `tls.crt`, `tls.key`, and the deprecated `caFile`, `certFile`,
//! `keyFile` its `secretRef` still reads). The CA is added to the system roots (a
//! repository behind a corporate CA still reaches public ones through redirects), for
//! that source only: the chart fetcher keeps one HTTP client per distinct trust.
//!
//! The PEM is checked when the Secret is read, so a bad one fails the source naming the
//! Secret and the key, never showing the bytes; `Debug` shows only what is set.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

use crate::source::CredentialsSecret;

/// Keys of a CA bundle, Flux's current name first.
const CA_KEYS: [&str; 2] = ["ca.crt", "caFile"];
/// Keys of a client certificate (its chain).
const CERT_KEYS: [&str; 2] = ["tls.crt", "certFile"];
/// Keys of a client certificate's private key.
const KEY_KEYS: [&str; 2] = ["tls.key", "keyFile"];

/// A source's custom CA and client certificate, if any (PEM, checked).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ChartTls {
    /// The Secret they came from, for errors (`Secret ns/name`).
    from: String,
    ca: Option<Vec<u8>>,
    /// The certificate chain, then the key: what `reqwest::Identity::from_pem` reads.
    identity: Option<Vec<u8>>,
}

impl std::fmt::Debug for ChartTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChartTls")
            .field("ca", &self.ca.is_some())
            .field("client_certificate", &self.identity.is_some())
            .finish()
    }
}

/// The first of `keys` that `data` holds, with its value.
fn first<'a>(
    data: &'a BTreeMap<String, Vec<u8>>,
    keys: &[&'static str],
) -> Option<(&'static str, &'a [u8])> {
    keys.iter()
        .find_map(|k| data.get(*k).map(|v| (*k, v.as_slice())))
}

impl ChartTls {
    /// The TLS keys of `secret`'s `data`, checked: a CA that holds no certificate, a
    /// certificate without its key (or the reverse), or a pair that does not parse is
    /// an error naming the Secret and the key.
    pub fn from_secret(
        secret: &CredentialsSecret,
        data: &BTreeMap<String, Vec<u8>>,
    ) -> Result<ChartTls, String> {
        let mut tls = ChartTls {
            from: secret.to_string(),
            ..ChartTls::default()
        };
        if let Some((key, pem)) = first(data, &CA_KEYS) {
            let parsed = reqwest::Certificate::from_pem_bundle(pem).ok();
            if parsed.is_none_or(|certs| certs.is_empty()) {
                return Err(format!("{secret}: key {key} holds no PEM certificate"));
            }
            tls.ca = Some(pem.to_vec());
        }
        match (first(data, &CERT_KEYS), first(data, &KEY_KEYS)) {
            (None, None) => {}
            (Some((cert, _)), None) => {
                return Err(format!("{secret} has key {cert} but no key tls.key"));
            }
            (None, Some((key, _))) => {
                return Err(format!("{secret} has key {key} but no key tls.crt"));
            }
            (Some((cert, chain)), Some((key, private))) => {
                let mut pem = chain.to_vec();
                pem.push(b'\n');
                pem.extend_from_slice(private);
                if reqwest::Identity::from_pem(&pem).is_err() {
                    return Err(format!(
                        "{secret}: keys {cert} and {key} are not a PEM certificate and its private key"
                    ));
                }
                tls.identity = Some(pem);
            }
        }
        Ok(tls)
    }

    /// Whether neither a CA nor a client certificate is set.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.identity.is_none()
    }

    /// A fingerprint of what is set (empty when nothing is): the fetcher keeps one
    /// client per fingerprint.
    pub fn fingerprint(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let mut hash = Sha256::new();
        self.hash_into(&mut hash);
        hex::encode(hash.finalize())
    }

    /// Feeds what is set into `hash` (nothing when empty).
    pub fn hash_into(&self, hash: &mut Sha256) {
        if let Some(ca) = &self.ca {
            hash.update(b"\0ca\0");
            hash.update(Sha256::digest(ca));
        }
        if let Some(identity) = &self.identity {
            hash.update(b"\0identity\0");
            hash.update(Sha256::digest(identity));
        }
    }

    /// `builder` trusting the CA besides the system roots and presenting the client
    /// certificate. The error names the Secret, never the PEM.
    pub fn configure(
        &self,
        mut builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, String> {
        let bad = |what: &str| format!("{}: {what} is not usable for TLS", self.from);
        if let Some(ca) = &self.ca {
            let certs = reqwest::Certificate::from_pem_bundle(ca).map_err(|_| bad("the CA"))?;
            builder = builder.tls_certs_merge(certs);
        }
        if let Some(identity) = &self.identity {
            let identity =
                reqwest::Identity::from_pem(identity).map_err(|_| bad("the client certificate"))?;
            builder = builder.identity(identity);
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> CredentialsSecret {
        CredentialsSecret {
            namespace: "team".into(),
            name: "charts-tls".into(),
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    /// A CA and a leaf it signed, as PEM: (ca, leaf cert, leaf key).
    fn pems() -> (String, String, String) {
        tether_testkit::tls::signed_pems(&["client"])
    }

    #[test]
    fn flux_tls_keys_are_read_checked_and_never_shown() {
        let (ca, cert, key) = pems();
        let tls = ChartTls::from_secret(
            &secret(),
            &data(&[("ca.crt", &ca), ("tls.crt", &cert), ("tls.key", &key)]),
        )
        .expect("a CA and a client certificate");
        assert!(!tls.is_empty());
        assert_eq!(
            format!("{tls:?}"),
            "ChartTls { ca: true, client_certificate: true }"
        );
        assert!(tls.configure(reqwest::Client::builder()).is_ok());
        let legacy = ChartTls::from_secret(&secret(), &data(&[("caFile", &ca)])).expect("caFile");
        assert_ne!(legacy, tls);
        assert!(
            ChartTls::from_secret(&secret(), &data(&[]))
                .expect("none")
                .is_empty()
        );
    }

    #[test]
    fn a_bad_pem_names_the_secret_and_the_key_and_not_its_bytes() {
        let (_, cert, key) = pems();
        let err = ChartTls::from_secret(&secret(), &data(&[("ca.crt", "not-a-PEM-s3cret")]))
            .expect_err("no certificate");
        assert_eq!(
            err,
            "Secret team/charts-tls: key ca.crt holds no PEM certificate"
        );
        let err =
            ChartTls::from_secret(&secret(), &data(&[("tls.crt", &cert)])).expect_err("no key");
        assert_eq!(
            err,
            "Secret team/charts-tls has key tls.crt but no key tls.key"
        );
        let err = ChartTls::from_secret(
            &secret(),
            &data(&[("tls.crt", &cert), ("tls.key", "garbage-s3cret")]),
        )
        .expect_err("no private key");
        assert_eq!(
            err,
            "Secret team/charts-tls: keys tls.crt and tls.key are not a PEM certificate and its private key"
        );
        assert!(!err.contains("s3cret") && !err.contains(key.as_str()));
    }
}

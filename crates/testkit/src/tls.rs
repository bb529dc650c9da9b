//! A certificate authority of the test's own, and a folder served over HTTPS that asks
//! for a client certificate it signed: what a private Helm repository behind a
//! corporate CA and mutual TLS looks like (Python's `http.server` with `ssl`, a real
//! TLS stack no one here wrote).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, SanType,
};

/// PEM files of a CA, a serving certificate it signed for `127.0.0.1` and
/// `localhost`, and a client certificate it signed.
pub struct TestPki {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

/// The PEM of a CA, and of a certificate and key it signed for `names` (IP addresses
/// or DNS names).
pub fn signed_pems(names: &[&str]) -> (String, String, String) {
    let (ca, issuer) = authority();
    let (cert, key) = leaf(&issuer, names);
    (ca, cert, key)
}

/// A new self-signed CA: its PEM, and what signs with it.
fn authority() -> (String, Issuer<'static, KeyPair>) {
    let ca_key = KeyPair::generate().expect("a CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    // Its own name: OpenSSL takes a leaf named as its issuer for a self-signed one.
    params.distinguished_name = named("tether test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).expect("the CA");
    (ca.pem(), Issuer::new(params, ca_key))
}

fn leaf(issuer: &Issuer<'_, KeyPair>, names: &[&str]) -> (String, String) {
    let key = KeyPair::generate().expect("a key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = named(names.first().copied().unwrap_or("leaf"));
    params.subject_alt_names = names
        .iter()
        .map(|n| match n.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName((*n).try_into().expect("a DNS name")),
        })
        .collect();
    let cert = params
        .signed_by(&key, issuer)
        .expect("a signed certificate");
    (cert.pem(), key.serialize_pem())
}

fn named(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

impl TestPki {
    /// A new CA and its two certificates, written under `dir`.
    pub fn generate(dir: &Path) -> TestPki {
        std::fs::create_dir_all(dir).expect("mkdir");
        let (ca, issuer) = authority();
        let (server_cert, server_key) = leaf(&issuer, &["127.0.0.1", "localhost"]);
        let (client_cert, client_key) = leaf(&issuer, &["tether-client"]);
        let write = |name: &str, pem: &str| {
            let path = dir.join(name);
            std::fs::write(&path, pem).expect("write a PEM");
            path
        };
        TestPki {
            ca: write("ca.crt", &ca),
            server_cert: write("server.crt", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("tls.crt", &client_cert),
            client_key: write("tls.key", &client_key),
        }
    }
}

/// Serves a folder over HTTPS on loopback, asking every client for a certificate the
/// CA signed; stopped (by its PID) when dropped.
pub struct HttpsDir {
    child: Child,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for HttpsDir {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server: the port it bound on its first line, then requests on stderr.
const SERVER: &str = r#"
import functools, http.server, ssl, sys
folder, cert, key, ca = sys.argv[1:5]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=folder)
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert, key)
context.load_verify_locations(ca)
context.verify_mode = ssl.CERT_REQUIRED
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

impl HttpsDir {
    pub fn start(folder: &Path, pki: &TestPki) -> HttpsDir {
        let mut child = Command::new("python3")
            .arg("-c")
            .arg(SERVER)
            .arg(folder)
            .args([&pki.server_cert, &pki.server_key, &pki.ca])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the port");
        let port: u16 = line.trim().parse().expect("a port");
        HttpsDir {
            child,
            url: format!("https://127.0.0.1:{port}"),
        }
    }
}

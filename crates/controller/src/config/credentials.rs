//! Who an app's source and destination authenticate as, checked: a source's
//! credentials (environment variables and files, or a Secret holding them all, never
//! inline) and the kubeconfig Secret of a remote cluster.

use std::path::PathBuf;

use super::check::{Checker, dns1123_subdomain, line_of};
use super::model::{Credentials, KubeConfigRef};
use super::raw::{self, S};
use tether_core::source::SecretRef;

pub(super) fn resolve_kube_config(
    raw: &raw::KubeConfig,
    path: &str,
    check: &mut Checker,
) -> KubeConfigRef {
    let r = &raw.secret_ref.value;
    let at = format!("{path}.secretRef");
    secret_ref(&r.name, r.key.as_ref(), r.namespace.as_ref(), &at, check)
}

pub(super) fn resolve_credentials(
    raw: &S<raw::Credentials>,
    path: &str,
    check: &mut Checker,
) -> Credentials {
    let line = line_of(raw);
    let c = &raw.value;
    let field = |name: &str| format!("{path}.{name}");
    let mut text = |name: &str, v: &Option<S<String>>| -> Option<String> {
        let v = v.as_ref()?;
        check.non_empty(&field(name), v).then(|| v.value.clone())
    };
    let username = text("username", &c.username);
    let password_env = text("passwordEnv", &c.password_env);
    let password_file = text("passwordFile", &c.password_file);
    let token_env = text("tokenEnv", &c.token_env);
    let token_file = text("tokenFile", &c.token_file);
    let ssh_key_file = text("sshKeyFile", &c.ssh_key_file).map(PathBuf::from);
    let known_hosts_file = text("knownHostsFile", &c.known_hosts_file).map(PathBuf::from);
    let secret_ref = c.secret_ref.as_ref().map(|r| {
        let at = format!("{path}.secretRef");
        secret_ref(&r.value.name, None, r.value.namespace.as_ref(), &at, check)
    });
    if secret_ref.is_some() {
        // The Secret holds every credential: a second source of them would leave
        // which one wins to the reader.
        let others: Vec<&str> = [
            ("username", c.username.is_some()),
            ("passwordEnv", c.password_env.is_some()),
            ("passwordFile", c.password_file.is_some()),
            ("tokenEnv", c.token_env.is_some()),
            ("tokenFile", c.token_file.is_some()),
            ("sshKeyFile", c.ssh_key_file.is_some()),
            ("knownHostsFile", c.known_hosts_file.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        if !others.is_empty() {
            check.report(
                format!("{path}.secretRef"),
                c.secret_ref.as_ref().and_then(line_of),
                format!(
                    "the Secret holds the credentials: not together with {}",
                    others.join(", ")
                ),
            );
            return Credentials {
                secret_ref,
                ..Credentials::default()
            };
        }
    }

    let line_at = |v: &Option<S<String>>| v.as_ref().and_then(line_of).or(line);
    let mut one_of = |env: Option<String>, file: Option<String>, what: &str, at| {
        match (env, file) {
            (Some(name), Some(_)) => {
                check.report(path, at, format!("set {what}Env or {what}File, not both"));
                // Still counts as set, so no second problem follows from this one.
                Some(SecretRef::Env(name))
            }
            (Some(name), None) => Some(SecretRef::Env(name)),
            (None, Some(file)) => Some(SecretRef::File(PathBuf::from(file))),
            (None, None) => None,
        }
    };
    let password = one_of(
        password_env,
        password_file,
        "password",
        line_at(&c.password_file),
    );
    let token = one_of(token_env, token_file, "token", line_at(&c.token_file));

    let credentials = Credentials {
        username,
        password,
        token,
        ssh_key_file,
        known_hosts_file,
        secret_ref,
    };
    check_combination(&credentials, path, line, check);
    credentials
}

/// The credentials that only work together: a password with a username, an SSH key
/// with the known hosts that check the server, a username with something to prove it.
fn check_combination(c: &Credentials, path: &str, line: Option<usize>, check: &mut Checker) {
    if c.password.is_some() && c.username.is_none() {
        check.report(path, line, "a password needs a username");
    }
    if c.ssh_key_file.is_some() && c.known_hosts_file.is_none() {
        check.report(
            path,
            line,
            "sshKeyFile needs knownHostsFile (the server's host key is always checked)",
        );
    }
    if c.known_hosts_file.is_some() && c.ssh_key_file.is_none() {
        check.report(path, line, "knownHostsFile is only used with sshKeyFile");
    }
    if c.username.is_some() && c.password.is_none() && c.token.is_none() && c.ssh_key_file.is_none()
    {
        check.report(
            path,
            line,
            "a username alone authenticates nothing: add a password, a token or sshKeyFile",
        );
    }
}

/// A Secret named at `at` (`….secretRef`): its name a DNS subdomain, its key (when the
/// field has one) not empty, its namespace a label.
pub(super) fn secret_ref(
    name: &S<String>,
    key: Option<&S<String>>,
    namespace: Option<&S<String>>,
    at: &str,
    check: &mut Checker,
) -> KubeConfigRef {
    if let Err(message) = dns1123_subdomain(&name.value) {
        check.report(format!("{at}.name"), line_of(name), message);
    }
    if let Some(key) = key {
        check.non_empty(&format!("{at}.key"), key);
    }
    if let Some(ns) = namespace {
        check.label(&format!("{at}.namespace"), ns, 63, "");
    }
    KubeConfigRef {
        name: name.value.clone(),
        key: key.map(|k| k.value.clone()),
        namespace: namespace.map(|n| n.value.clone()),
    }
}

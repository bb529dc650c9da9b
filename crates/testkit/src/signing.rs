//! Signing keys made by the real tools for signed-commit tests: an OpenPGP key from
//! `gpg --quick-gen-key` in a throwaway GNUPGHOME, and an SSH key from `ssh-keygen`;
//! commits and tags signed through real `git commit -S` / `git tag -s`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::git::{GitRepo, git};

/// One signer's keys, under its own directory.
pub struct Signer {
    /// The OpenPGP key's fingerprint (what `user.signingkey` names).
    pub fingerprint: String,
    /// The armored OpenPGP public key (`gpg --armor --export`).
    pub pgp_public: PathBuf,
    /// The SSH private key (what `user.signingkey` names with `gpg.format=ssh`).
    pub ssh_key: PathBuf,
    /// An allowed-signers file trusting the SSH key for git.
    pub allowed_signers: PathBuf,
    /// `gpg --homedir <its GNUPGHOME>`: git runs it as `gpg.program`, so tests in
    /// parallel never share a keyring.
    gpg: PathBuf,
}

fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Signer {
    /// Generates `name`'s keys (`name <name@example.com>`) under `dir`.
    pub fn generate(dir: &Path, name: &str) -> Signer {
        let dir = dir.join(format!("signer-{name}"));
        let home = dir.join("gnupg");
        std::fs::create_dir_all(&home).expect("mkdir");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        }
        let uid = format!("{name} <{name}@example.com>");
        let env = [("GNUPGHOME", home.as_path())];
        run(
            "gpg",
            &[
                "--batch",
                "--passphrase",
                "",
                "--quick-gen-key",
                &uid,
                "ed25519",
                "sign",
                "never",
            ],
            &env,
        );
        let listing = run("gpg", &["--with-colons", "--list-keys", &uid], &env);
        let fingerprint = listing
            .lines()
            .find_map(|l| l.strip_prefix("fpr:"))
            .and_then(|l| l.split(':').find(|f| !f.is_empty()))
            .expect("a fingerprint")
            .to_string();
        let pgp_public = dir.join(format!("{name}.asc"));
        let armored = run("gpg", &["--armor", "--export", &fingerprint], &env);
        std::fs::write(&pgp_public, armored).expect("write the public key");
        let ssh_key = dir.join("id_ed25519");
        let key = ssh_key.to_str().expect("utf-8");
        run(
            "ssh-keygen",
            &["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", key],
            &[],
        );
        let public = std::fs::read_to_string(dir.join("id_ed25519.pub")).expect("public key");
        let allowed_signers = dir.join("allowed_signers");
        let key_text: Vec<&str> = public.split_whitespace().take(2).collect();
        std::fs::write(
            &allowed_signers,
            format!(
                "{name}@example.com namespaces=\"git\" {}\n",
                key_text.join(" ")
            ),
        )
        .expect("write allowed signers");
        let gpg = dir.join("gpg");
        std::fs::write(
            &gpg,
            format!(
                "#!/bin/sh\nexec gpg --homedir '{}' \"$@\"\n",
                home.display()
            ),
        )
        .expect("write the gpg wrapper");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&gpg, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Signer {
            fingerprint,
            pgp_public,
            ssh_key,
            allowed_signers,
            gpg,
        }
    }

    fn pgp_config(&self) -> [String; 4] {
        [
            "-c".into(),
            format!("gpg.program={}", self.gpg.display()),
            "-c".into(),
            format!("user.signingkey={}", self.fingerprint),
        ]
    }

    fn ssh_config(&self) -> [String; 6] {
        [
            "-c".into(),
            "gpg.format=ssh".into(),
            "-c".into(),
            format!("user.signingkey={}", self.ssh_key.display()),
            "-c".into(),
            "gpg.ssh.program=ssh-keygen".into(),
        ]
    }

    fn commit_with(repo: &GitRepo, config: &[String], subject: &str) -> String {
        git(&repo.dir, &["add", "-A"]);
        let mut args: Vec<&str> = config.iter().map(String::as_str).collect();
        args.extend(["commit", "-q", "-S", "--allow-empty", "-m", subject]);
        git(&repo.dir, &args);
        git(&repo.dir, &["rev-parse", "HEAD"])
    }

    /// Commits everything, signed with the OpenPGP key (`git commit -S`).
    pub fn commit_pgp(&self, repo: &GitRepo, subject: &str) -> String {
        Self::commit_with(repo, &self.pgp_config(), subject)
    }

    /// Commits everything, signed with the SSH key (`gpg.format=ssh`).
    pub fn commit_ssh(&self, repo: &GitRepo, subject: &str) -> String {
        Self::commit_with(repo, &self.ssh_config(), subject)
    }

    /// Tags HEAD `name`, an annotated tag signed with the OpenPGP key (`git tag -s`).
    pub fn tag_pgp(&self, repo: &GitRepo, name: &str) {
        let mut args: Vec<String> = self.pgp_config().to_vec();
        args.extend([
            "tag".into(),
            "-s".into(),
            name.into(),
            "-m".into(),
            name.into(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        git(&repo.dir, &args);
    }
}

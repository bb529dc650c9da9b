//! What tether's integration tests and benchmarks share (`publish = false`): real Git
//! repositories and servers (`git daemon`, git's smart HTTP), a free loopback port,
//! the arithmetic of figures and the objects benches measure with, renderer processes
//! counted, and a process's CPU time and memory from `/proc`, signing keys made by the
//! real gpg and ssh-keygen, a CA of the test's own with an HTTPS folder that asks for
//! its client certificates, and `tether serve` started from its binary as a user
//! starts it.
//!
//! Nothing here knows tether: tests and benches drive tether as users do, through its
//! binary, its HTTP API and the sandbox, and use this crate only for the real parts
//! around it.

pub mod bench;
pub mod figures;
pub mod git;
pub mod proc;
pub mod render;
pub mod serve;
pub mod signing;
pub mod tls;

use std::net::TcpListener;

/// A loopback port no one listens on right now. Another process can take it before the
/// caller's server binds it: callers confirm their own server bound it, and retry.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Where the SOPS oracle is (issue #27: files the real `sops` encrypted, their keys and
/// plaintexts): `TETHER_SOPS_FIXTURES`, which `.ci/run` exports, or `shared/fixtures/sops`
/// in the nearest folder above `from` (a crate's `CARGO_MANIFEST_DIR`) that has one.
pub fn sops_fixtures(from: &std::path::Path) -> std::path::PathBuf {
    if let Ok(dir) = std::env::var("TETHER_SOPS_FIXTURES") {
        return dir.into();
    }
    from.ancestors()
        .map(|dir| dir.join("shared/fixtures/sops"))
        .find(|dir| dir.join("MANIFEST.json").is_file())
        .expect(
            "the SOPS fixtures: shared/fixtures/sops above the repository, or TETHER_SOPS_FIXTURES",
        )
}

/// Asserts that `text` (a process's output, an answer's body) says `needle`, and shows
/// the whole text when it does not.
#[track_caller]
pub fn assert_contains(text: &str, needle: &str) {
    assert!(text.contains(needle), "{needle:?} is not in:\n{text}");
}

/// Asserts that `text` does not say `needle`, and shows the whole text when it does.
#[track_caller]
pub fn assert_lacks(text: &str, needle: &str) {
    assert!(!text.contains(needle), "{needle:?} is in:\n{text}");
}

//! What tether's integration tests and benchmarks share (`publish = false`): real Git
//! repositories and servers (`git daemon`, git's smart HTTP), a free loopback port,
//! the arithmetic of figures, renderer processes counted, and a process's CPU time and
//! memory from `/proc`, and signing keys made by the real gpg and ssh-keygen.
//!
//! Nothing here knows tether: tests and benches drive tether as users do, through its
//! binary, its HTTP API and the sandbox, and use this crate only for the real parts
//! around it.

pub mod figures;
pub mod git;
pub mod proc;
pub mod render;
pub mod signing;

use std::net::TcpListener;

/// A loopback port no one listens on right now. Another process can take it before the
/// caller's server binds it: callers confirm their own server bound it, and retry.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

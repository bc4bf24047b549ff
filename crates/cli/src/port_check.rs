//! Refuses to start local processes on ports that are already taken.
//!
//! A member whose port is taken exits at once, and the cause then shows
//! only in its log, while a status poll of the busy port may even answer
//! for another cluster. `up` and `peer up` therefore try every port they
//! will hand out before starting anything, and name the first busy one.
//! (A port can still be taken between this check and the member's start;
//! the restart backoff then gives up with the member's own error.)

use anyhow::{bail, Result};
use std::net::TcpListener;

/// A port a local process will listen on: who uses it, for what, where.
pub struct PlannedPort {
    /// "n1's etcd API", say.
    pub role: String,
    /// host:port.
    pub address: String,
}

/// Fails, naming the first one, if any of `ports` is in use.
pub fn refuse_busy(ports: &[PlannedPort], advice: &str) -> Result<()> {
    for port in ports {
        if let Err(error) = TcpListener::bind(&port.address) {
            bail!(
                "{} ({}) cannot be used: {error}. {advice}",
                port.address,
                port.role
            );
        }
    }
    Ok(())
}

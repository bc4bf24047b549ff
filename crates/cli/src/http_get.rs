//! A minimal HTTP/1.1 GET over a plain TCP connection, for `status` and
//! `up` to read `/status` from local members without an HTTP client crate.

use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Largest response read.
const RESPONSE_BYTES_MAX: u64 = 4 << 20;

/// GETs `path` from `address` and returns the body of a 200 response.
pub fn get(address: SocketAddr, path: &str, timeout: Duration) -> Result<String> {
    let mut stream = TcpStream::connect_timeout(&address, timeout)
        .with_context(|| format!("cannot connect to {address}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream
        .take(RESPONSE_BYTES_MAX)
        .read_to_string(&mut response)
        .with_context(|| format!("reading from {address}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status_line = head.lines().next().unwrap_or_default();
    if !status_line.contains(" 200 ") {
        bail!("{address}{path}: {status_line}");
    }
    Ok(body.to_string())
}

//! Small HTTP calls over plain HTTP: a member's `/status` for `status`,
//! `up`, `peer` and the process clusters the benchmarks start, and etcd's
//! JSON gateway for the etcd cluster `bench failover` starts.
//! A blocking client (`ureq`): the callers poll from plain threads, some of
//! them inside a tokio runtime, where a client of its own runtime could
//! not block.

use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::time::Duration;

/// Largest response read.
const RESPONSE_BYTES_MAX: u64 = 4 << 20;

/// GETs `path` from `address` and returns the body of a 2xx response;
/// anything else, or no answer within `timeout`, is an error.
pub fn get(address: SocketAddr, path: &str, timeout: Duration) -> Result<String> {
    let url = format!("http://{address}{path}");
    let mut response = agent(timeout)
        .get(&url)
        .call()
        .with_context(|| format!("GET {url}"))?;
    read_body(&mut response, &url)
}

/// POSTs `body` as JSON to `path` at `address` and returns the body of a
/// 2xx response (etcd's gateway, in `bench failover`'s etcd cluster).
pub fn post_json(address: SocketAddr, path: &str, body: &str, timeout: Duration) -> Result<String> {
    let url = format!("http://{address}{path}");
    let mut response = agent(timeout)
        .post(&url)
        .header("content-type", "application/json")
        .send(body)
        .with_context(|| format!("POST {url}"))?;
    read_body(&mut response, &url)
}

/// The body of `response` to `url`, at most [`RESPONSE_BYTES_MAX`] bytes.
fn read_body(response: &mut ureq::http::Response<ureq::Body>, url: &str) -> Result<String> {
    response
        .body_mut()
        .with_config()
        .limit(RESPONSE_BYTES_MAX)
        .read_to_string()
        .with_context(|| format!("reading {url}"))
}

/// A client whose every call ends within `timeout`.
fn agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        // Members are reached directly, never through a proxy the
        // environment names (HTTP_PROXY and the like).
        .proxy(None)
        .build()
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// Serves one connection with `answer`, after reading the request.
    fn serve_once(answer: &'static str) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            stream.write_all(answer.as_bytes()).unwrap();
        });
        address
    }

    #[test]
    fn a_200_gives_its_body_and_anything_else_an_error() {
        let ok =
            serve_once("HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello");
        assert_eq!(get(ok, "/status", Duration::from_secs(5)).unwrap(), "hello");
        let chunked = serve_once(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        );
        assert_eq!(get(chunked, "/", Duration::from_secs(5)).unwrap(), "abc");
        let missing =
            serve_once("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        let error = get(missing, "/status", Duration::from_secs(5)).unwrap_err();
        assert!(format!("{error:#}").contains("404"), "{error:#}");
    }
}

//! One HTTP/1.1 keep-alive connection for `bench kv --op gateway-put`:
//! the JSON gateway's clients (curl, Python's requests, Patroni) speak
//! HTTP/1.1, one request at a time per connection, so each benchmark
//! client gets its own. Only what the load needs: POST with a body, and
//! answers with a `Content-Length` or chunked body (etcd's gateway
//! answers chunked, bellwether's with a length).
//!
//! Why not hyper's client connection: the bench client shares this 2-core
//! machine with the members it measures, and with hyper's
//! `client::conn::http1` in its place the gateway-put throughput fell by
//! 4.5% (64 clients, one `bellwether up` cluster, three alternating rounds
//! of 10 s each: 25,973 against 27,199 op/s, medians; docs/benchmarks.md,
//! session 28). The other HTTP calls of the binary go through `ureq`.

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest answer read: far above any put's answer.
const ANSWER_BYTES_MAX: usize = 1 << 20;

/// A connection to one server.
pub struct Http1Connection {
    stream: BufReader<TcpStream>,
    host: String,
}

impl Http1Connection {
    /// Connects to `endpoint` (host:port).
    pub async fn connect(endpoint: &str) -> Result<Http1Connection> {
        let stream = TcpStream::connect(endpoint)
            .await
            .with_context(|| format!("cannot connect to {endpoint}"))?;
        stream.set_nodelay(true)?;
        Ok(Http1Connection {
            stream: BufReader::new(stream),
            host: endpoint.to_string(),
        })
    }

    /// POSTs `body` as JSON to `path`; answers the status and the body.
    pub async fn post_json(&mut self, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        self.stream.get_mut().write_all(&request).await?;
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("not an HTTP answer: {line:?}"))?;
        let (mut length, mut chunked) = (None, false);
        loop {
            line.clear();
            if self.stream.read_line(&mut line).await? == 0 {
                bail!("the connection closed mid-answer");
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = Some(value.parse::<usize>().context("a bad Content-Length")?);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
        let mut answer = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.stream.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .with_context(|| format!("a bad chunk size {line:?}"))?;
                if size == 0 {
                    // Trailers, then the empty line.
                    loop {
                        line.clear();
                        if self.stream.read_line(&mut line).await? == 0 || line.trim().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                if answer.len() + size > ANSWER_BYTES_MAX {
                    bail!("an answer over {ANSWER_BYTES_MAX} bytes");
                }
                let start = answer.len();
                answer.resize(start + size, 0);
                self.stream.read_exact(&mut answer[start..]).await?;
                let mut crlf = [0u8; 2];
                self.stream.read_exact(&mut crlf).await?;
            }
        } else {
            let length = length.context("an answer with neither a length nor chunks")?;
            if length > ANSWER_BYTES_MAX {
                bail!("an answer over {ANSWER_BYTES_MAX} bytes");
            }
            answer.resize(length, 0);
            self.stream.read_exact(&mut answer).await?;
        }
        Ok((status, answer))
    }
}

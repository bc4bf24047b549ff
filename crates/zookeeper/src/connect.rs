//! The handshake: the first packet a client sends on a connection, and
//! the server's answer.

use crate::jute::{JuteError, JuteReader, JuteWriter};
use crate::tree::{SESSION_TIMEOUT_MS_MAX, SESSION_TIMEOUT_MS_MIN};

/// A client's connect request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The protocol version (0).
    pub protocol_version: i32,
    /// The last zxid the client saw; 0 for a new client.
    pub last_zxid_seen: i64,
    /// The timeout the client asks for.
    pub timeout_ms: i32,
    /// The session to take over; 0 for a new one.
    pub session_id: i64,
    /// The session's password (16 bytes; zeros for a new session).
    pub password: Vec<u8>,
    /// Whether the client accepts a read-only server; absent from old clients.
    pub read_only: Option<bool>,
}

impl ConnectRequest {
    /// Reads the request from its packet.
    pub fn decode(bytes: &[u8]) -> Result<ConnectRequest, JuteError> {
        let mut r = JuteReader::new(bytes);
        let request = ConnectRequest {
            protocol_version: r.int()?,
            last_zxid_seen: r.long()?,
            timeout_ms: r.int()?,
            session_id: r.long()?,
            password: r.buffer()?.unwrap_or_default(),
            read_only: if r.remaining() > 0 {
                Some(r.bool()?)
            } else {
                None
            },
        };
        Ok(request)
    }

    /// The request as a client writes it.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JuteWriter::new();
        w.int(self.protocol_version)
            .long(self.last_zxid_seen)
            .int(self.timeout_ms)
            .long(self.session_id)
            .buffer(&self.password);
        if let Some(read_only) = self.read_only {
            w.bool(read_only);
        }
        w.into_bytes()
    }

    /// The timeout this server grants: the client's, within the bounds.
    pub fn negotiated_timeout_ms(&self) -> i32 {
        self.timeout_ms
            .clamp(SESSION_TIMEOUT_MS_MIN, SESSION_TIMEOUT_MS_MAX)
    }
}

/// The server's answer to a connect request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectResponse {
    /// The protocol version (0).
    pub protocol_version: i32,
    /// The negotiated timeout; 0 with session 0 says the session is gone.
    pub timeout_ms: i32,
    /// The session.
    pub session_id: i64,
    /// Its password.
    pub password: Vec<u8>,
    /// Echoed when the client sent one: this server is not read-only.
    pub read_only: Option<bool>,
}

impl ConnectResponse {
    /// The answer for a session that expired or was never known: the
    /// client then tells its user the session expired.
    pub fn expired(read_only: Option<bool>) -> ConnectResponse {
        ConnectResponse {
            protocol_version: 0,
            timeout_ms: 0,
            session_id: 0,
            password: vec![0; 16],
            read_only: read_only.map(|_| false),
        }
    }

    /// The packet's record.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JuteWriter::new();
        w.int(self.protocol_version)
            .int(self.timeout_ms)
            .long(self.session_id)
            .buffer(&self.password);
        if let Some(read_only) = self.read_only {
            w.bool(read_only);
        }
        w.into_bytes()
    }

    /// Reads the answer from its packet.
    pub fn decode(bytes: &[u8]) -> Result<ConnectResponse, JuteError> {
        let mut r = JuteReader::new(bytes);
        Ok(ConnectResponse {
            protocol_version: r.int()?,
            timeout_ms: r.int()?,
            session_id: r.long()?,
            password: r.buffer()?.unwrap_or_default(),
            read_only: if r.remaining() > 0 {
                Some(r.bool()?)
            } else {
                None
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_request_reads_back_with_and_without_read_only() {
        for read_only in [None, Some(true)] {
            let request = ConnectRequest {
                protocol_version: 0,
                last_zxid_seen: 7,
                timeout_ms: 10_000,
                session_id: 0,
                password: vec![0; 16],
                read_only,
            };
            assert_eq!(ConnectRequest::decode(&request.encode()), Ok(request));
        }
    }

    #[test]
    fn the_timeout_is_held_within_the_bounds() {
        let mut request = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms: 1,
            session_id: 0,
            password: Vec::new(),
            read_only: None,
        };
        assert_eq!(request.negotiated_timeout_ms(), SESSION_TIMEOUT_MS_MIN);
        request.timeout_ms = i32::MAX;
        assert_eq!(request.negotiated_timeout_ms(), SESSION_TIMEOUT_MS_MAX);
    }
}

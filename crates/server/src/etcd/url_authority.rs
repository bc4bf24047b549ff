//! Repairs one thing etcd 3.4's Go client sends on the client port that
//! our HTTP/2 server refuses: a URL where HTTP/2's `:authority` must be a
//! host and port.
//!
//! `etcdctl endpoint status --cluster`, `endpoint hashkv --cluster`,
//! `defrag --cluster`, and any Go program calling `Client.Status(ctx,
//! url)` with an etcd 3.4 client, dial each member by the client URL that
//! `member list` gives (`http://127.0.0.1:2379`). Its gRPC library then
//! sends that whole URL as `:authority`. etcd's Go server ignores the
//! field; the `h2` crate under tonic checks it and resets the stream with
//! `PROTOCOL_ERROR`, so those commands failed on bellwether only.
//!
//! [`UrlAuthorityRepair`] is a sans-IO filter on the bytes a client sends.
//! It reads frame headers only, except for the connection's first header
//! block, which it decodes (HPACK, with a well-kept decoder):
//!
//! - If that block's `:authority` is a plain host (every client but the
//!   one above), the block goes on unchanged and the filter steps aside
//!   for the rest of the connection: the server's HPACK state is exactly
//!   the client's, and later bytes are not looked at.
//! - If it is a URL, the filter keeps decoding every header block of the
//!   connection (the client's encoder refers to entries of its dynamic
//!   table) and re-encodes each, with the scheme dropped from the
//!   authority, as literals that never enter the server's table, so the
//!   server's HPACK state cannot drift from what it is sent.
//!
//! What is not HTTP/2 with prior knowledge (HTTP/1.1 for the JSON gateway,
//! TLS, which is decrypted above this layer) is passed through untouched,
//! and so is anything the filter cannot parse: the server then reports the
//! error itself, as it would have. Buffers are bounded by one header
//! block of at most [`HEADER_BLOCK_BYTES_MAX`].

use loona_hpack::Decoder;

/// The client connection preface of HTTP/2 with prior knowledge.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER_BYTES: usize = 9;
const FRAME_HEADERS: u8 = 0x1;
const FRAME_CONTINUATION: u8 = 0x9;
const FLAG_END_STREAM: u8 = 0x1;
const FLAG_END_HEADERS: u8 = 0x4;
const FLAG_PADDED: u8 = 0x8;
const FLAG_PRIORITY: u8 = 0x20;
/// The largest frame payload the server accepts unless it says otherwise
/// (HTTP/2's default SETTINGS_MAX_FRAME_SIZE, which tonic keeps).
const FRAME_PAYLOAD_MAX: usize = 16_384;
/// A header block past this (its frames together) is not decoded: the
/// filter steps aside and the server judges it.
pub const HEADER_BLOCK_BYTES_MAX: usize = 256 * 1024;
/// The HPACK dynamic table size the server allows a client's encoder
/// (HTTP/2's default SETTINGS_HEADER_TABLE_SIZE; h2 announces no other).
const HPACK_TABLE_BYTES: usize = 4096;

/// Where the filter is in the client's byte stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Reading the connection preface.
    Preface,
    /// At a frame boundary.
    Frames,
    /// Inside a frame that is copied as it is: this many bytes are left.
    Copying(usize),
    /// Out of the way: every byte from here on is passed unchanged.
    Aside,
}

/// The filter over one client connection's incoming bytes.
pub struct UrlAuthorityRepair {
    stage: Stage,
    /// Bytes received and not yet decided on (at most one frame header,
    /// one header frame, or the preface).
    pending: Vec<u8>,
    /// The frames of the header block being gathered, as received.
    block_frames: Vec<u8>,
    /// The header block being gathered, without padding and priority.
    block: Vec<u8>,
    /// The gathered block's stream and its HEADERS frame's END_STREAM.
    block_stream: Option<(u32, bool)>,
    /// Whether this connection's header blocks are re-encoded (decided by
    /// its first block).
    rewriting: bool,
    decoder: Decoder<'static>,
}

impl Default for UrlAuthorityRepair {
    fn default() -> Self {
        UrlAuthorityRepair::new()
    }
}

impl UrlAuthorityRepair {
    /// A filter for a new connection.
    pub fn new() -> UrlAuthorityRepair {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(HPACK_TABLE_BYTES);
        UrlAuthorityRepair {
            stage: Stage::Preface,
            pending: Vec::new(),
            block_frames: Vec::new(),
            block: Vec::new(),
            block_stream: None,
            rewriting: false,
            decoder,
        }
    }

    /// True once the filter has stepped aside with nothing held back: the
    /// caller may read the connection directly from now on.
    pub fn is_aside(&self) -> bool {
        self.stage == Stage::Aside && self.pending.is_empty() && self.block_frames.is_empty()
    }

    /// Whether this connection's header blocks are being re-encoded.
    pub fn is_rewriting(&self) -> bool {
        self.rewriting
    }

    /// Takes `input`, the next bytes from the client, and appends to
    /// `output` what the server is to read.
    pub fn push(&mut self, input: &[u8], output: &mut Vec<u8>) {
        if self.stage == Stage::Aside {
            output.extend_from_slice(input);
            return;
        }
        self.pending.extend_from_slice(input);
        let mut at = 0;
        loop {
            let available = &self.pending[at..];
            match self.stage {
                Stage::Aside => {
                    output.extend_from_slice(available);
                    at = self.pending.len();
                    break;
                }
                Stage::Preface => {
                    let compared = available.len().min(PREFACE.len());
                    if available[..compared] != PREFACE[..compared] {
                        self.stage = Stage::Aside;
                        continue;
                    }
                    if compared < PREFACE.len() {
                        break;
                    }
                    output.extend_from_slice(PREFACE);
                    at += PREFACE.len();
                    self.stage = Stage::Frames;
                }
                Stage::Copying(left) => {
                    let copied = left.min(available.len());
                    output.extend_from_slice(&available[..copied]);
                    at += copied;
                    if copied < left {
                        self.stage = Stage::Copying(left - copied);
                        break;
                    }
                    self.stage = Stage::Frames;
                }
                Stage::Frames => {
                    if available.len() < FRAME_HEADER_BYTES {
                        break;
                    }
                    let length = usize::from(available[0]) << 16
                        | usize::from(available[1]) << 8
                        | usize::from(available[2]);
                    let kind = available[3];
                    let gathering = self.block_stream.is_some();
                    let part_of_block = kind == FRAME_HEADERS && !gathering
                        || kind == FRAME_CONTINUATION && gathering;
                    if !part_of_block {
                        if gathering {
                            // A header block interrupted: the server
                            // will call it a protocol error.
                            self.step_aside(output);
                            continue;
                        }
                        output.extend_from_slice(&available[..FRAME_HEADER_BYTES]);
                        at += FRAME_HEADER_BYTES;
                        self.stage = Stage::Copying(length);
                        continue;
                    }
                    if self.block_frames.len() + FRAME_HEADER_BYTES + length
                        > HEADER_BLOCK_BYTES_MAX
                    {
                        self.step_aside(output);
                        continue;
                    }
                    if available.len() < FRAME_HEADER_BYTES + length {
                        break;
                    }
                    let frame = &available[..FRAME_HEADER_BYTES + length];
                    at += frame.len();
                    let frame = frame.to_vec();
                    self.gather(&frame, output);
                }
            }
        }
        self.pending.drain(..at);
    }

    /// Adds one HEADERS or CONTINUATION frame to the block being gathered,
    /// and passes the block on once it is whole.
    fn gather(&mut self, frame: &[u8], output: &mut Vec<u8>) {
        let kind = frame[3];
        let flags = frame[4];
        let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let mut fragment = &frame[FRAME_HEADER_BYTES..];
        self.block_frames.extend_from_slice(frame);
        if kind == FRAME_HEADERS {
            if flags & FLAG_PADDED != 0 {
                let Some((&pad, rest)) = fragment.split_first() else {
                    return self.step_aside(output);
                };
                if usize::from(pad) > rest.len() {
                    return self.step_aside(output);
                }
                fragment = &rest[..rest.len() - usize::from(pad)];
            }
            if flags & FLAG_PRIORITY != 0 {
                if fragment.len() < 5 {
                    return self.step_aside(output);
                }
                fragment = &fragment[5..];
            }
            self.block_stream = Some((stream, flags & FLAG_END_STREAM != 0));
        } else if self.block_stream.map(|(s, _)| s) != Some(stream) {
            return self.step_aside(output);
        }
        self.block.extend_from_slice(fragment);
        if flags & FLAG_END_HEADERS != 0 {
            self.finish_block(output);
        }
    }

    /// A whole header block: decoded, then passed on as it came or
    /// re-encoded.
    fn finish_block(&mut self, output: &mut Vec<u8>) {
        let (stream, end_stream) = self
            .block_stream
            .take()
            .expect("a block was being gathered");
        let block = std::mem::take(&mut self.block);
        let frames = std::mem::take(&mut self.block_frames);
        let Ok(mut fields) = self.decoder.decode(&block) else {
            output.extend_from_slice(&frames);
            self.stage = Stage::Aside;
            return;
        };
        let mut repaired = false;
        for (name, value) in &mut fields {
            if name.as_slice() == b":authority" {
                if let Some(host) = host_of_url(value) {
                    *value = host;
                    repaired = true;
                }
            }
        }
        if !self.rewriting && !repaired {
            // The usual case: nothing to repair, and nothing will be.
            output.extend_from_slice(&frames);
            self.stage = Stage::Aside;
            return;
        }
        self.rewriting = true;
        let encoded = encode_literals(&fields);
        write_header_frames(stream, end_stream, &encoded, output);
        self.stage = Stage::Frames;
    }

    /// The client's end of stream: what is held back (an incomplete frame)
    /// goes on for the server to judge.
    pub fn finish(&mut self, output: &mut Vec<u8>) {
        output.append(&mut self.block_frames);
        output.append(&mut self.pending);
        self.block.clear();
        self.block_stream = None;
        self.stage = Stage::Aside;
    }

    /// Passes on everything held back and stops looking.
    fn step_aside(&mut self, output: &mut Vec<u8>) {
        output.append(&mut self.block_frames);
        self.block.clear();
        self.block_stream = None;
        self.stage = Stage::Aside;
        // `push` passes the rest of `pending` on from here.
    }
}

/// The host and port of an authority written as a URL
/// (`http://127.0.0.1:2379` → `127.0.0.1:2379`), or None if it is not
/// one.
fn host_of_url(authority: &[u8]) -> Option<Vec<u8>> {
    let at = authority.windows(3).position(|w| w == b"://")?;
    let rest = &authority[at + 3..];
    let end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_vec())
}

/// `fields` as one HPACK block of literals "without indexing" and without
/// Huffman coding: it leaves the server's dynamic table untouched.
fn encode_literals(fields: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0x00);
        encode_string(name, &mut block);
        encode_string(value, &mut block);
    }
    block
}

/// An HPACK string literal, not Huffman coded: its length as an integer
/// with a 7-bit prefix, then its bytes.
fn encode_string(bytes: &[u8], block: &mut Vec<u8>) {
    const PREFIX_MAX: usize = 0x7f;
    let mut length = bytes.len();
    if length < PREFIX_MAX {
        block.push(length as u8);
    } else {
        block.push(PREFIX_MAX as u8);
        length -= PREFIX_MAX;
        while length >= 0x80 {
            block.push((length & 0x7f) as u8 | 0x80);
            length >>= 7;
        }
        block.push(length as u8);
    }
    block.extend_from_slice(bytes);
}

/// `block` as a HEADERS frame on `stream`, followed by CONTINUATION frames
/// when it is larger than one frame may be.
fn write_header_frames(stream: u32, end_stream: bool, block: &[u8], output: &mut Vec<u8>) {
    let mut chunks = block.chunks(FRAME_PAYLOAD_MAX).peekable();
    let mut kind = FRAME_HEADERS;
    let mut flags = if end_stream { FLAG_END_STREAM } else { 0 };
    loop {
        let chunk = chunks.next().unwrap_or(&[]);
        let last = chunks.peek().is_none();
        if last {
            flags |= FLAG_END_HEADERS;
        }
        let length = chunk.len();
        output.extend_from_slice(&[
            (length >> 16) as u8,
            (length >> 8) as u8,
            length as u8,
            kind,
            flags,
        ]);
        output.extend_from_slice(&stream.to_be_bytes());
        output.extend_from_slice(chunk);
        if last {
            return;
        }
        kind = FRAME_CONTINUATION;
        flags = 0;
    }
}

#[cfg(test)]
#[path = "url_authority_tests.rs"]
mod tests;

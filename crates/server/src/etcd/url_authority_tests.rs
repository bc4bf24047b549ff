use super::*;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len();
    let mut bytes = vec![
        (length >> 16) as u8,
        (length >> 8) as u8,
        length as u8,
        kind,
        flags,
    ];
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

fn string(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_string(bytes, &mut out);
    out
}

/// A header block as Go's gRPC client writes a first request: the
/// authority as a literal with incremental indexing (static name 1),
/// then `:path` (static name 4) likewise, and a custom header with a new
/// name, indexed.
fn first_block(authority: &[u8]) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.push(0x41);
    block.extend(string(authority));
    block.push(0x44);
    block.extend(string(b"/etcdserverpb.Maintenance/Status"));
    block.push(0x40);
    block.extend(string(b"x-custom"));
    block.extend(string(b"one"));
    block
}

/// The same client's next request: everything from its dynamic table
/// (62 is the newest entry: x-custom, 63 :path, 64 :authority).
fn second_block() -> Vec<u8> {
    vec![0x83, 0x86, 0x80 | 64, 0x80 | 63, 0x80 | 62]
}

fn settings_and_data(stream: u32) -> Vec<u8> {
    let mut bytes = frame(0x4, 0, 0, &[0, 3, 0, 0, 0, 100]);
    bytes.extend(frame(0x0, FLAG_END_STREAM, stream, b"\0\0\0\0\x05hello"));
    bytes
}

fn decode_all(server_bytes: &[u8]) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    assert!(server_bytes.starts_with(PREFACE));
    let mut decoder = Decoder::new();
    let mut blocks = Vec::new();
    let mut block = Vec::new();
    let mut at = PREFACE.len();
    while at < server_bytes.len() {
        let length = usize::from(server_bytes[at]) << 16
            | usize::from(server_bytes[at + 1]) << 8
            | usize::from(server_bytes[at + 2]);
        let kind = server_bytes[at + 3];
        let flags = server_bytes[at + 4];
        let payload = &server_bytes[at + 9..at + 9 + length];
        if kind == FRAME_HEADERS || kind == FRAME_CONTINUATION {
            block.extend_from_slice(payload);
            if flags & FLAG_END_HEADERS != 0 {
                blocks.push(decoder.decode(&block).expect("the server can decode it"));
                block.clear();
            }
        }
        at += 9 + length;
    }
    assert_eq!(at, server_bytes.len(), "whole frames only");
    blocks
}

fn authority(fields: &[(Vec<u8>, Vec<u8>)]) -> &[u8] {
    &fields.iter().find(|(n, _)| n == b":authority").unwrap().1
}

fn client_bytes(authority: &[u8]) -> Vec<u8> {
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(0x4, 0, 0, &[]));
    bytes.extend(frame(
        FRAME_HEADERS,
        FLAG_END_HEADERS,
        1,
        &first_block(authority),
    ));
    bytes.extend(settings_and_data(1));
    bytes.extend(frame(FRAME_HEADERS, FLAG_END_HEADERS, 3, &second_block()));
    bytes.extend(settings_and_data(3));
    bytes
}

fn filter_in_pieces(bytes: &[u8], piece: usize) -> (Vec<u8>, UrlAuthorityRepair) {
    let mut filter = UrlAuthorityRepair::new();
    let mut output = Vec::new();
    for chunk in bytes.chunks(piece) {
        filter.push(chunk, &mut output);
    }
    (output, filter)
}

#[test]
fn a_plain_authority_passes_byte_for_byte_and_the_filter_steps_aside() {
    let bytes = client_bytes(b"127.0.0.1:2379");
    for piece in [1, 7, 4096] {
        let (output, filter) = filter_in_pieces(&bytes, piece);
        assert_eq!(output, bytes, "piece size {piece}");
        assert!(filter.is_aside());
        assert!(!filter.is_rewriting());
    }
}

#[test]
fn a_url_authority_loses_its_scheme_in_every_request_of_the_connection() {
    let bytes = client_bytes(b"http://127.0.0.1:2379");
    for piece in [1, 5, 4096] {
        let (output, filter) = filter_in_pieces(&bytes, piece);
        assert!(filter.is_rewriting());
        assert!(!filter.is_aside());
        let blocks = decode_all(&output);
        assert_eq!(blocks.len(), 2);
        for fields in &blocks {
            assert_eq!(authority(fields), b"127.0.0.1:2379");
            let names: Vec<&[u8]> = fields.iter().map(|(n, _)| n.as_slice()).collect();
            assert_eq!(
                names,
                [
                    b":method".as_slice(),
                    b":scheme",
                    b":authority",
                    b":path",
                    b"x-custom"
                ]
            );
            assert_eq!(fields[4].1, b"one");
        }
        // The other frames are passed as they were.
        let data = settings_and_data(3);
        assert!(output.ends_with(&data));
    }
}

#[test]
fn padding_priority_and_continuation_frames_are_gathered_into_one_block() {
    let block = first_block(b"https://member-1.example:2379");
    let (head, tail) = block.split_at(10);
    let mut headers_payload = vec![3u8]; // pad length
    headers_payload.extend_from_slice(&[0, 0, 0, 0, 16]); // priority
    headers_payload.extend_from_slice(head);
    headers_payload.extend_from_slice(&[0, 0, 0]);
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(
        FRAME_HEADERS,
        FLAG_PADDED | FLAG_PRIORITY | FLAG_END_STREAM,
        1,
        &headers_payload,
    ));
    bytes.extend(frame(FRAME_CONTINUATION, FLAG_END_HEADERS, 1, tail));
    let (output, _) = filter_in_pieces(&bytes, 3);
    let blocks = decode_all(&output);
    assert_eq!(authority(&blocks[0]), b"member-1.example:2379");
    // END_STREAM is kept on the HEADERS frame.
    assert_eq!(output[PREFACE.len() + 3], FRAME_HEADERS);
    assert_eq!(
        output[PREFACE.len() + 4],
        FLAG_END_STREAM | FLAG_END_HEADERS
    );
}

#[test]
fn a_block_larger_than_a_frame_is_split_into_continuations() {
    let mut block = first_block(b"http://127.0.0.1:2379");
    block.push(0x00);
    block.extend(string(b"x-large"));
    block.extend(string(&vec![b'v'; 40_000]));
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(FRAME_HEADERS, 0, 5, &block[..20_000 / 2]));
    for (i, part) in block[10_000..].chunks(FRAME_PAYLOAD_MAX).enumerate() {
        let last = 10_000 + (i + 1) * FRAME_PAYLOAD_MAX >= block.len();
        let flags = if last { FLAG_END_HEADERS } else { 0 };
        bytes.extend(frame(FRAME_CONTINUATION, flags, 5, part));
    }
    let (output, _) = filter_in_pieces(&bytes, 1000);
    let blocks = decode_all(&output);
    assert_eq!(blocks.len(), 1);
    assert_eq!(authority(&blocks[0]), b"127.0.0.1:2379");
    assert_eq!(blocks[0].last().unwrap().1.len(), 40_000);
    // Every frame fits the server's default frame size.
    let mut at = PREFACE.len();
    while at < output.len() {
        let length = usize::from(output[at]) << 16
            | usize::from(output[at + 1]) << 8
            | usize::from(output[at + 2]);
        assert!(length <= FRAME_PAYLOAD_MAX);
        at += 9 + length;
    }
}

#[test]
fn what_is_not_http2_or_cannot_be_decoded_passes_unchanged() {
    let http1 = b"POST /v3/kv/range HTTP/1.1\r\nHost: 127.0.0.1:2379\r\n\r\n{}".to_vec();
    let (output, filter) = filter_in_pieces(&http1, 4);
    assert_eq!(output, http1);
    assert!(filter.is_aside());

    let mut garbage = PREFACE.to_vec();
    garbage.extend(frame(FRAME_HEADERS, FLAG_END_HEADERS, 1, &[0xbf, 0xff]));
    garbage.extend(settings_and_data(1));
    let (output, filter) = filter_in_pieces(&garbage, 2);
    assert_eq!(output, garbage);
    assert!(filter.is_aside());

    // A block past the bound is left to the server too.
    let mut huge = PREFACE.to_vec();
    huge.extend(frame(FRAME_HEADERS, 0, 1, &[0; 100]));
    huge.extend(frame(
        FRAME_CONTINUATION,
        FLAG_END_HEADERS,
        1,
        &vec![0; HEADER_BLOCK_BYTES_MAX],
    ));
    let (output, filter) = filter_in_pieces(&huge, 9000);
    assert_eq!(output, huge);
    assert!(filter.is_aside());
}

#[test]
fn only_a_url_is_cut_down_to_its_host() {
    assert_eq!(
        host_of_url(b"http://127.0.0.1:2379").as_deref(),
        Some(b"127.0.0.1:2379".as_slice())
    );
    assert_eq!(
        host_of_url(b"unix://socket/path").as_deref(),
        Some(b"socket".as_slice())
    );
    assert_eq!(host_of_url(b"127.0.0.1:2379"), None);
    assert_eq!(host_of_url(b"http://"), None);
}

#[test]
fn long_strings_use_hpack_integer_continuation_bytes() {
    let mut out = Vec::new();
    encode_string(&[b'a'; 127], &mut out);
    assert_eq!(&out[..2], &[0x7f, 0x00]);
    let mut out = Vec::new();
    encode_string(&[b'a'; 1337], &mut out);
    // 1337 - 127 = 1210 = 0b1001_0111010: 0xba, 0x09.
    assert_eq!(&out[..3], &[0x7f, 0xba, 0x09]);
}

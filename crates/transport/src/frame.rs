//! Length-prefixed frames: a little-endian `u32` length, then the payload.
//! A frame over the limit is refused before anything is allocated.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest frame accepted: an AppendEntries batch of 1 MiB, or a snapshot
/// chunk, with ample room, but never an allocation an attacker chooses.
pub const FRAME_BYTES_MAX: usize = 16 << 20;

/// Largest handshake frame: a stranger must not make us allocate more
/// before it has said who it is.
pub const HANDSHAKE_BYTES_MAX: usize = 1 << 10;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer announced a frame larger than the limit.
    #[error("frame of {length} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// Announced length.
        length: usize,
        /// The limit that applied.
        limit: usize,
    },
}

/// Appends one frame around `payload` to `out`.
pub fn put_frame(out: &mut Vec<u8>, payload: &[u8]) {
    assert!(
        payload.len() <= FRAME_BYTES_MAX,
        "frames are bounded before encoding"
    );
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Appends one frame whose payload `encode` appends to `out` in place (no
/// intermediate copy). A payload over [`FRAME_BYTES_MAX`] is taken back
/// out and `false` returned: the frame is not sent.
pub fn put_frame_with(out: &mut Vec<u8>, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    encode(out);
    let length = out.len() - start - 4;
    if length > FRAME_BYTES_MAX {
        out.truncate(start);
        return false;
    }
    out[start..start + 4].copy_from_slice(&(length as u32).to_le_bytes());
    true
}

/// Reads one frame into `buffer` (reused between calls).
pub async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    buffer: &mut Vec<u8>,
) -> Result<(), FrameError> {
    read_frame_up_to(reader, buffer, FRAME_BYTES_MAX).await
}

/// Reads one frame of at most `limit` bytes into `buffer`.
pub async fn read_frame_up_to(
    reader: &mut (impl AsyncRead + Unpin),
    buffer: &mut Vec<u8>,
    limit: usize,
) -> Result<(), FrameError> {
    let length = reader.read_u32_le().await? as usize;
    if length > limit {
        return Err(FrameError::TooLarge { length, limit });
    }
    buffer.resize(length, 0);
    reader.read_exact(buffer).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_ones_are_refused_before_allocating() {
        let mut wire = Vec::new();
        put_frame(&mut wire, b"hello");
        let mut buffer = Vec::new();
        read_frame(&mut wire.as_slice(), &mut buffer).await.unwrap();
        assert_eq!(buffer, b"hello");
        let huge = (u32::MAX).to_le_bytes();
        let error = read_frame(&mut huge.as_slice(), &mut buffer)
            .await
            .unwrap_err();
        assert!(matches!(error, FrameError::TooLarge { .. }));
        let mut framed = b"x".to_vec();
        assert!(put_frame_with(&mut framed, |out| out.extend_from_slice(b"abc")));
        let mut expected = b"x".to_vec();
        put_frame(&mut expected, b"abc");
        assert_eq!(framed, expected);
        assert!(!put_frame_with(&mut framed, |out| out
            .resize(out.len() + FRAME_BYTES_MAX + 1, 0)));
        assert_eq!(framed, expected, "an oversized payload is taken back out");
        let mut handshake = Vec::new();
        put_frame(&mut handshake, &[0u8; 2048]);
        let error = read_frame_up_to(&mut handshake.as_slice(), &mut buffer, HANDSHAKE_BYTES_MAX)
            .await
            .unwrap_err();
        assert!(matches!(error, FrameError::TooLarge { length: 2048, .. }));
    }
}

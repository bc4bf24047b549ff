//! Length-prefixed frames: a little-endian `u32` length, then the payload.
//! A frame over [`FRAME_BYTES_MAX`] is refused before anything is allocated.

use tokio::io::{AsyncRead, AsyncReadExt};

/// Largest frame accepted: an AppendEntries batch of 1 MiB, or a snapshot
/// chunk, with ample room, but never an allocation an attacker chooses.
pub const FRAME_BYTES_MAX: usize = 16 << 20;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection failed or closed.
    #[error("connection: {0}")]
    Io(#[from] std::io::Error),
    /// The peer announced a frame larger than the limit.
    #[error("frame of {0} bytes is over the {FRAME_BYTES_MAX}-byte limit")]
    TooLarge(usize),
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

/// Reads one frame into `buffer` (reused between calls).
pub async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    buffer: &mut Vec<u8>,
) -> Result<(), FrameError> {
    let length = reader.read_u32_le().await? as usize;
    if length > FRAME_BYTES_MAX {
        return Err(FrameError::TooLarge(length));
    }
    buffer.resize(length, 0);
    reader.read_exact(buffer).await?;
    Ok(())
}

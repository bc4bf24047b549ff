//! ZooKeeper's framing: each packet is a 4-byte big-endian length, then
//! that many bytes. A length past the bound closes the connection before
//! anything is allocated for it.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest packet taken from a client: ZooKeeper's default `jute.maxbuffer`
/// (1 MiB less one byte) for the data, plus room for the path and header.
pub const PACKET_BYTES_MAX: usize = 1024 * 1024 + 64 * 1024;

/// Why a packet could not be read.
#[derive(Debug)]
pub enum PacketError {
    /// The connection closed or failed.
    Io(std::io::Error),
    /// The length was negative or over [`PACKET_BYTES_MAX`].
    TooLarge(i64),
}

impl std::fmt::Display for PacketError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PacketError::Io(error) => write!(f, "{error}"),
            PacketError::TooLarge(n) => write!(
                f,
                "a packet of {n} bytes is over the bound of {PACKET_BYTES_MAX}"
            ),
        }
    }
}

/// Reads one packet.
pub async fn read_packet<R: AsyncRead + Unpin>(reader: &mut R) -> Result<Vec<u8>, PacketError> {
    let length = reader.read_i32().await.map_err(PacketError::Io)?;
    read_body(reader, length).await
}

/// Reads the rest of a packet whose length prefix was `length`.
pub async fn read_body<R: AsyncRead + Unpin>(
    reader: &mut R,
    length: i32,
) -> Result<Vec<u8>, PacketError> {
    let length = usize::try_from(length)
        .ok()
        .filter(|n| *n <= PACKET_BYTES_MAX)
        .ok_or(PacketError::TooLarge(i64::from(length)))?;
    let mut packet = vec![0; length];
    reader
        .read_exact(&mut packet)
        .await
        .map_err(PacketError::Io)?;
    Ok(packet)
}

/// Writes one packet made of `parts`, with its length in front.
pub async fn write_packet<W: AsyncWrite + Unpin>(
    writer: &mut W,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    let length: usize = parts.iter().map(|p| p.len()).sum();
    let length = i32::try_from(length).expect("an answer is under 2 GiB");
    let mut packet = Vec::with_capacity(4 + length as usize);
    packet.extend_from_slice(&length.to_be_bytes());
    for part in parts {
        packet.extend_from_slice(part);
    }
    writer.write_all(&packet).await
}

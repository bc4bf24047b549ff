//! A bounds-checked cursor over a checksummed payload.
//!
//! A payload that passed its checksum can still be malformed (a bug, or a
//! writer from another version), so every read is checked and reports what
//! it was reading instead of panicking.

/// Why a payload could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub String);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// Reads fixed-width little-endian values from a byte slice, front to back.
pub struct Reader<'a> {
    /// The whole payload.
    bytes: &'a [u8],
    /// Offset of the next unread byte; never beyond `bytes.len()`.
    position: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, position: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// Takes the next `len` bytes, naming `what` if they are not there.
    pub fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], Malformed> {
        if len > self.remaining() {
            return Err(Malformed(format!(
                "{what}: needs {len} bytes, {} left",
                self.remaining()
            )));
        }
        let slice = &self.bytes[self.position..self.position + len];
        self.position += len;
        assert!(self.position <= self.bytes.len());
        Ok(slice)
    }

    /// Reads one byte.
    pub fn u8(&mut self, what: &str) -> Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }

    /// Reads a little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, Malformed> {
        let bytes = self.take(4, what)?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("took 4 bytes")))
    }

    /// Reads a little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, Malformed> {
        let bytes = self.take(8, what)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("took 8 bytes")))
    }

    /// Fails unless every byte was consumed: trailing bytes mean the writer
    /// and the reader disagree about the layout.
    pub fn finish(&self, what: &str) -> Result<(), Malformed> {
        if self.remaining() != 0 {
            return Err(Malformed(format!(
                "{what}: {} unexpected trailing bytes",
                self.remaining()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_refuses_to_overrun() {
        let bytes = [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut reader = Reader::new(&bytes);
        assert_eq!(reader.u32("a"), Ok(1));
        assert_eq!(reader.u64("b"), Ok(2));
        assert!(reader.finish("c").is_err(), "one byte is left");
        assert_eq!(reader.u8("d"), Ok(9));
        assert!(reader.u8("e").unwrap_err().0.contains("e: needs 1 bytes"));
        assert_eq!(reader.finish("f"), Ok(()));
    }
}

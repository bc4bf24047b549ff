//! A minimal binary encoding for snapshots: little-endian integers and
//! length-prefixed byte strings.
//!
//! Hand-written so the state machine needs no serialisation dependency and
//! so the format is fixed by this file, not by a library's version. Every
//! read checks the remaining length first: a corrupt snapshot yields an
//! error naming the byte offset, never a panic or a huge allocation.

use crate::KvError;

/// Appends encoded values to a buffer.
#[derive(Default)]
pub(crate) struct Encoder {
    /// The encoded bytes so far.
    pub(crate) bytes: Vec<u8>,
}

impl Encoder {
    /// Appends one byte.
    pub(crate) fn u8(&mut self, value: u8) {
        self.bytes.push(value);
    }

    /// Appends a `u32`.
    pub(crate) fn u32(&mut self, value: u32) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// Appends an `i64`.
    pub(crate) fn i64(&mut self, value: i64) {
        self.bytes.extend_from_slice(&value.to_le_bytes());
    }

    /// Appends a `u64` as a varint: seven bits a byte, least significant
    /// first, the high bit set on every byte but the last (1 to 10 bytes).
    pub(crate) fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    /// Appends a count of following items.
    pub(crate) fn count(&mut self, count: usize) {
        self.u32(u32::try_from(count).expect("snapshot count fits in u32"));
    }

    /// Appends a length-prefixed byte string.
    pub(crate) fn bytes(&mut self, value: &[u8]) {
        self.count(value.len());
        self.bytes.extend_from_slice(value);
    }
}

/// Reads encoded values from a buffer, front to back.
pub(crate) struct Decoder<'a> {
    /// The whole input.
    bytes: &'a [u8],
    /// Bytes consumed so far; where the next read starts.
    offset: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Decoder { bytes, offset: 0 }
    }

    /// An error at the current offset.
    pub(crate) fn corrupt(&self, reason: &'static str) -> KvError {
        KvError::SnapshotCorrupt {
            offset: self.offset,
            reason,
        }
    }

    /// True when every byte was consumed.
    pub(crate) fn is_done(&self) -> bool {
        self.offset == self.bytes.len()
    }

    /// Consumes `length` bytes.
    fn take(&mut self, length: usize) -> Result<&'a [u8], KvError> {
        let remaining = self.bytes.len() - self.offset;
        if length > remaining {
            return Err(self.corrupt("truncated"));
        }
        let taken = &self.bytes[self.offset..self.offset + length];
        self.offset += length;
        Ok(taken)
    }

    /// Reads one byte.
    pub(crate) fn u8(&mut self) -> Result<u8, KvError> {
        Ok(self.take(1)?[0])
    }

    /// Reads a `u32`.
    pub(crate) fn u32(&mut self) -> Result<u32, KvError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes(bytes.try_into().expect("took 4 bytes")))
    }

    /// Reads an `i64`.
    pub(crate) fn i64(&mut self) -> Result<i64, KvError> {
        let bytes = self.take(8)?;
        Ok(i64::from_le_bytes(bytes.try_into().expect("took 8 bytes")))
    }

    /// Reads a varint written by [`Encoder::varint`]. One longer than ten
    /// bytes, or past 64 bits, is corrupt; so is a needlessly long one
    /// (a zero last byte after the first), so each value has one encoding.
    pub(crate) fn varint(&mut self) -> Result<u64, KvError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.corrupt("varint past 64 bits"));
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                if byte == 0 && shift > 0 {
                    return Err(self.corrupt("varint with a zero last byte"));
                }
                return Ok(value);
            }
        }
        Err(self.corrupt("varint longer than ten bytes"))
    }

    /// Reads a count of items that take at least `item_bytes_min` each,
    /// rejecting counts the remaining input cannot hold.
    pub(crate) fn count(&mut self, item_bytes_min: usize) -> Result<usize, KvError> {
        let count = usize::try_from(self.u32()?).expect("u32 fits in usize");
        let remaining = self.bytes.len() - self.offset;
        if count.saturating_mul(item_bytes_min.max(1)) > remaining {
            return Err(self.corrupt("count larger than the remaining input"));
        }
        Ok(count)
    }

    /// Reads a length-prefixed byte string.
    pub(crate) fn bytes(&mut self) -> Result<Vec<u8>, KvError> {
        let length = self.count(1)?;
        Ok(self.take(length)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_every_length() {
        let values = [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        let mut out = Encoder::default();
        for value in values {
            out.varint(value);
        }
        // 1 + 1 + 1 + 2 + 2 + 3 + 5 + 10 bytes.
        assert_eq!(out.bytes.len(), 25);
        let mut input = Decoder::new(&out.bytes);
        for value in values {
            assert_eq!(input.varint(), Ok(value));
        }
        assert!(input.is_done());
    }

    #[test]
    fn malformed_varints_are_corrupt_not_wrapped() {
        let corrupt = |bytes: &[u8]| Decoder::new(bytes).varint().is_err();
        assert!(corrupt(&[0x80]), "truncated");
        assert!(corrupt(&[0xff; 10]), "longer than ten bytes");
        let mut past_64_bits = vec![0xff; 9];
        past_64_bits.push(0x02);
        assert!(corrupt(&past_64_bits));
        assert!(corrupt(&[0x81, 0x00]), "needlessly long");
    }
}

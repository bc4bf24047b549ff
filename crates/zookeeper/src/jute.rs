//! Jute, ZooKeeper's record encoding: big-endian integers, a 1-byte
//! boolean, and byte strings and vectors prefixed by a signed 32-bit
//! length, where -1 means null.
//!
//! The reader never trusts a length: each is checked against the bytes
//! left before anything is allocated, so a malformed packet is an error,
//! never a panic or a large allocation.

use std::fmt;

/// Why a record could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JuteError {
    /// The packet ended inside a field.
    Truncated,
    /// A length was negative (other than null's -1) or larger than what is left.
    BadLength,
    /// A string was not UTF-8.
    BadUtf8,
    /// A field held a value the record does not allow.
    BadValue,
}

impl fmt::Display for JuteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            JuteError::Truncated => "the packet ends inside a field",
            JuteError::BadLength => "a length is negative or longer than the packet",
            JuteError::BadUtf8 => "a string is not UTF-8",
            JuteError::BadValue => "a field holds a value the record does not allow",
        };
        f.write_str(what)
    }
}

impl std::error::Error for JuteError {}

/// Reads jute fields from a packet, front to back.
#[derive(Debug)]
pub struct JuteReader<'a> {
    bytes: &'a [u8],
}

impl<'a> JuteReader<'a> {
    /// A reader of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        JuteReader { bytes }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], JuteError> {
        if self.bytes.len() < n {
            return Err(JuteError::Truncated);
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    /// A 32-bit integer.
    pub fn int(&mut self) -> Result<i32, JuteError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A 64-bit integer.
    pub fn long(&mut self) -> Result<i64, JuteError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    /// A boolean: one byte, nonzero is true.
    pub fn bool(&mut self) -> Result<bool, JuteError> {
        Ok(self.take(1)?[0] != 0)
    }

    /// A length prefix: `None` for null (-1).
    fn length(&mut self) -> Result<Option<usize>, JuteError> {
        match self.int()? {
            -1 => Ok(None),
            n if n < 0 => Err(JuteError::BadLength),
            n => Ok(Some(n as usize)),
        }
    }

    /// A byte buffer; `None` for null.
    pub fn buffer(&mut self) -> Result<Option<Vec<u8>>, JuteError> {
        match self.length()? {
            None => Ok(None),
            Some(n) if n > self.bytes.len() => Err(JuteError::BadLength),
            Some(n) => Ok(Some(self.take(n)?.to_vec())),
        }
    }

    /// A UTF-8 string; `None` for null.
    pub fn string(&mut self) -> Result<Option<String>, JuteError> {
        match self.buffer()? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| JuteError::BadUtf8),
        }
    }

    /// A string where null is read as empty (paths, schemes, ids).
    pub fn text(&mut self) -> Result<String, JuteError> {
        Ok(self.string()?.unwrap_or_default())
    }

    /// A vector's element count; `None` for null. Each element takes at
    /// least `element_bytes_min` bytes, so a count the packet cannot hold
    /// is refused before anything is allocated.
    pub fn count(&mut self, element_bytes_min: usize) -> Result<Option<usize>, JuteError> {
        match self.length()? {
            None => Ok(None),
            Some(n) if n.saturating_mul(element_bytes_min.max(1)) > self.bytes.len() => {
                Err(JuteError::BadLength)
            }
            Some(n) => Ok(Some(n)),
        }
    }

    /// A vector of strings; null reads as empty.
    pub fn strings(&mut self) -> Result<Vec<String>, JuteError> {
        let n = self.count(4)?.unwrap_or(0);
        (0..n).map(|_| self.text()).collect()
    }
}

/// Writes jute fields into a packet.
#[derive(Clone, Debug, Default)]
pub struct JuteWriter {
    bytes: Vec<u8>,
}

impl JuteWriter {
    /// An empty packet.
    pub fn new() -> Self {
        JuteWriter::default()
    }

    /// A packet that starts with `bytes`.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        JuteWriter { bytes }
    }

    /// The packet written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True before anything is written.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A 32-bit integer.
    pub fn int(&mut self, value: i32) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// A 64-bit integer.
    pub fn long(&mut self, value: i64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_be_bytes());
        self
    }

    /// A boolean.
    pub fn bool(&mut self, value: bool) -> &mut Self {
        self.bytes.push(u8::from(value));
        self
    }

    /// A byte buffer, never null.
    pub fn buffer(&mut self, value: &[u8]) -> &mut Self {
        let n = i32::try_from(value.len()).expect("a jute buffer is shorter than 2 GiB");
        self.int(n);
        self.bytes.extend_from_slice(value);
        self
    }

    /// A byte buffer, or null (length -1).
    pub fn buffer_or_null(&mut self, value: Option<&[u8]>) -> &mut Self {
        match value {
            Some(value) => self.buffer(value),
            None => self.int(-1),
        }
    }

    /// A string, never null.
    pub fn string(&mut self, value: &str) -> &mut Self {
        self.buffer(value.as_bytes())
    }

    /// A vector's element count.
    pub fn count(&mut self, n: usize) -> &mut Self {
        self.int(i32::try_from(n).expect("a jute vector has fewer than 2^31 elements"))
    }

    /// A vector of strings.
    pub fn strings<S: AsRef<str>>(&mut self, values: &[S]) -> &mut Self {
        self.count(values.len());
        for value in values {
            self.string(value.as_ref());
        }
        self
    }

    /// Raw bytes, already encoded.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_read_back_as_written() {
        let mut w = JuteWriter::new();
        w.int(-7)
            .long(1 << 40)
            .bool(true)
            .string("/a")
            .buffer(b"xy");
        w.strings(&["p", "q"]);
        let bytes = w.into_bytes();
        let mut r = JuteReader::new(&bytes);
        assert_eq!(r.int(), Ok(-7));
        assert_eq!(r.long(), Ok(1 << 40));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.string(), Ok(Some("/a".to_string())));
        assert_eq!(r.buffer(), Ok(Some(b"xy".to_vec())));
        assert_eq!(r.strings(), Ok(vec!["p".to_string(), "q".to_string()]));
        assert_eq!(r.remaining(), 0);
    }

    #[test]
    fn null_is_minus_one() {
        let bytes = (-1i32).to_be_bytes();
        assert_eq!(JuteReader::new(&bytes).buffer(), Ok(None));
        assert_eq!(JuteReader::new(&bytes).text(), Ok(String::new()));
    }

    #[test]
    fn lengths_past_the_packet_are_refused_before_allocating() {
        let bytes = i32::MAX.to_be_bytes();
        assert_eq!(JuteReader::new(&bytes).buffer(), Err(JuteError::BadLength));
        assert_eq!(JuteReader::new(&bytes).strings(), Err(JuteError::BadLength));
        let negative = (-2i32).to_be_bytes();
        assert_eq!(
            JuteReader::new(&negative).buffer(),
            Err(JuteError::BadLength)
        );
        assert_eq!(JuteReader::new(&[0, 0]).int(), Err(JuteError::Truncated));
    }

    #[test]
    fn strings_must_be_utf8() {
        let mut w = JuteWriter::new();
        w.buffer(&[0xff, 0xfe]);
        let bytes = w.into_bytes();
        assert_eq!(JuteReader::new(&bytes).string(), Err(JuteError::BadUtf8));
    }
}

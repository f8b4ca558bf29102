//! Bounded byte writer and reader. Reading untrusted bytes never panics and never
//! allocates more than the input could justify: every length is checked against what is
//! left before anything is reserved.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("packet ends early")]
    Truncated,
    #[error("unknown message type {0}")]
    UnknownType(u8),
    #[error("bad value in field {0}")]
    BadValue(&'static str),
    #[error("{0} trailing bytes")]
    Trailing(usize),
    #[error("packet too large ({0} bytes)")]
    TooLarge(usize),
}

#[derive(Default, Debug, Clone)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer { buf: Vec::with_capacity(64) }
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn i8(&mut self, v: i8) {
        self.buf.push(v as u8);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// LEB128 unsigned varint (1 byte below 128).
    pub fn var(&mut self, mut v: u64) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.buf.push(b);
                return;
            }
            self.buf.push(b | 0x80);
        }
    }
    /// Zigzag signed varint.
    pub fn svar(&mut self, v: i64) {
        self.var(((v << 1) ^ (v >> 63)) as u64);
    }
    /// A short string: u8 length then UTF-8 bytes (callers keep it under 256 bytes).
    pub fn str(&mut self, s: &str) {
        let b = &s.as_bytes()[..s.len().min(255)];
        self.u8(b.len() as u8);
        self.buf.extend_from_slice(b);
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated);
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        self.take(n)
    }
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        Ok(self.take(1)?[0] as i8)
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(self.u16()? as i16)
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub fn var(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::BadValue("varint"))
    }
    pub fn var_u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.var()?).map_err(|_| DecodeError::BadValue(field))
    }
    pub fn svar(&mut self) -> Result<i64, DecodeError> {
        let v = self.var()?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }
    pub fn str(&mut self, max: usize, field: &'static str) -> Result<String, DecodeError> {
        let n = self.u8()? as usize;
        if n > max {
            return Err(DecodeError::BadValue(field));
        }
        let b = self.take(n)?;
        let s = std::str::from_utf8(b).map_err(|_| DecodeError::BadValue(field))?;
        // No control or invisible format characters (what `names::clip` would replace), so
        // what decodes re-encodes to itself.
        if s.chars().any(crate::protocol::names::invisible) {
            return Err(DecodeError::BadValue(field));
        }
        Ok(s.to_string())
    }
    /// A count of elements that each need at least `min_size` bytes: bounded by the input.
    pub fn count(&mut self, max: usize, min_size: usize, field: &'static str) -> Result<usize, DecodeError> {
        let n = self.var()? as usize;
        if n > max || n.saturating_mul(min_size) > self.remaining() {
            return Err(DecodeError::BadValue(field));
        }
        Ok(n)
    }
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

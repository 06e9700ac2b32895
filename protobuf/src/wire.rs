//! The protobuf wire format: reading a message's fields and writing them.

use crate::error::{Error, Result};

/// A field's wire value.
#[derive(Debug, Clone, Copy)]
pub enum Wire<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 2: strings, bytes, messages, packed repeats.
    Bytes(&'a [u8]),
    /// Wire types 1 and 5 (no Kubernetes type uses them).
    Fixed,
}

impl Wire<'_> {
    /// The wire type's number, for error messages.
    pub fn number(&self) -> u8 {
        match self {
            Wire::Varint(_) => 0,
            Wire::Bytes(_) => 2,
            Wire::Fixed => 1,
        }
    }
}

/// Reads a varint from the front of `buf`: `(value, bytes read)`, or `None` when `buf` ends
/// inside it.
pub fn read_varint(buf: &[u8]) -> Result<Option<(u64, usize)>> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if buf.len() >= 10 {
        return Err(Error::Malformed("a varint longer than ten bytes"));
    }
    Ok(None)
}

/// Iterates over the fields of one complete protobuf message.
pub struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    /// The fields of `buf`.
    pub fn new(buf: &'a [u8]) -> Fields<'a> {
        Fields { buf, failed: false }
    }

    fn varint(&mut self) -> Result<u64> {
        let (value, n) = read_varint(self.buf)?.ok_or(Error::Malformed("truncated varint"))?;
        self.buf = &self.buf[n..];
        Ok(value)
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8]> {
        let n = usize::try_from(n).map_err(|_| Error::Malformed("a length too large"))?;
        if n > self.buf.len() {
            return Err(Error::Malformed("a field longer than its message"));
        }
        let (taken, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<(u32, Wire<'a>)> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| Error::Malformed("field number"))?;
        if number == 0 {
            return Err(Error::Malformed("field number 0"));
        }
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let len = self.varint()?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            _ => return Err(Error::Malformed("an unsupported wire type")),
        };
        Ok((number, wire))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a length-delimited field.
pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(number) << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a varint field.
pub fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_varint(out, u64::from(number) << 3);
    put_varint(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_truncation_is_told_apart() {
        for value in [
            0,
            1,
            127,
            128,
            300,
            u64::from(u32::MAX),
            u64::MAX,
            (-5i64) as u64,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            assert_eq!(read_varint(&out).unwrap(), Some((value, out.len())));
            assert_eq!(read_varint(&out[..out.len() - 1]).unwrap(), None);
        }
        assert!(read_varint(&[0xff; 11]).is_err());
    }

    #[test]
    fn fields_stop_at_the_first_malformed_one() {
        let mut msg = Vec::new();
        put_bytes(&mut msg, 1, b"abc");
        put_varint_field(&mut msg, 2, 7);
        msg.extend_from_slice(&[0x1a, 0x05, b'x']);
        let fields: Vec<_> = Fields::new(&msg).collect();
        assert_eq!(fields.len(), 3);
        assert!(matches!(fields[0], Ok((1, Wire::Bytes(b"abc")))));
        assert!(matches!(fields[1], Ok((2, Wire::Varint(7)))));
        assert!(fields[2].is_err());
    }
}

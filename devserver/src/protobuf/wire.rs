//! The protobuf wire format: iterating over a message's fields.

use crate::Status;

/// A field's wire value.
pub(super) enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

/// Iterates over the fields of one protobuf message.
pub(super) struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Fields<'a> {
        Fields { buf, failed: false }
    }

    fn varint(&mut self) -> Result<u64, Status> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.buf.split_first().ok_or_else(truncated)?;
            self.buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(truncated())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Status> {
        if n > self.buf.len() {
            return Err(truncated());
        }
        let (taken, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<(u32, Wire<'a>), Status> {
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).map_err(|_| truncated())?;
        let wire = match key & 7 {
            0 => Wire::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| truncated())?;
                Wire::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Wire::Fixed
            }
            other => {
                return Err(Status::bad_request(format!(
                    "unsupported protobuf wire type {other}"
                )));
            }
        };
        Ok((number, wire))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Wire<'a>), Status>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}

pub(super) fn truncated() -> Status {
    Status::bad_request("malformed protobuf body")
}

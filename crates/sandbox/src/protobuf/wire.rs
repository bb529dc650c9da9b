//! The protobuf wire format, the little of it Kubernetes messages use: varints,
//! fixed 64-bit doubles and length-delimited fields (proto2, nothing packed).

use super::ProtobufError;

pub(crate) const VARINT: u8 = 0;
pub(crate) const FIXED64: u8 = 1;
pub(crate) const LENGTH_DELIMITED: u8 = 2;
pub(crate) const FIXED32: u8 = 5;

pub(crate) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// How many bytes [`put_varint`] writes for `value`.
pub(crate) fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

pub(crate) fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    put_varint(out, (u64::from(tag) << 3) | u64::from(wire_type));
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, tag: u32, bytes: &[u8]) {
    put_key(out, tag, LENGTH_DELIMITED);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A length-delimited field whose bytes `write` appends to `out` itself: the length is
/// written after them and moved in front, so that a nested message needs no buffer of
/// its own (an object is dozens of nested messages).
pub(crate) fn put_nested<E>(
    out: &mut Vec<u8>,
    tag: u32,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), E> {
    put_key(out, tag, LENGTH_DELIMITED);
    // One byte is kept for the length, enough below 128 bytes, which most nested
    // messages are; a longer one moves its bytes to make room for the rest.
    let start = out.len();
    out.push(0);
    write(out)?;
    let len = out.len() - start - 1;
    let mut prefix = [0u8; 10];
    let mut size = 0;
    let mut rest = len as u64;
    while rest >= 0x80 {
        prefix[size] = (rest as u8) | 0x80;
        rest >>= 7;
        size += 1;
    }
    prefix[size] = rest as u8;
    size += 1;
    if size > 1 {
        out.splice(start + 1..start + 1, prefix[1..size].iter().copied());
    }
    out[start] = prefix[0];
    Ok(())
}

/// A field as read off the wire.
#[derive(Clone, Copy)]
pub(crate) enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    /// Kubernetes messages have none; read past, never used.
    Fixed32,
    Bytes(&'a [u8]),
}

/// Reads a message's fields in wire order. A clone reads ahead without moving this one.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { rest: bytes }
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, ProtobufError> {
        // Keys and most lengths are one byte.
        if let Some((&byte, rest)) = self.rest.split_first()
            && byte < 0x80
        {
            self.rest = rest;
            return Ok(u64::from(byte));
        }
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self.rest.split_first().ok_or(ProtobufError::Truncated)?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Malformed(
            "varint longer than 10 bytes".into(),
        ))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if self.rest.len() < n {
            return Err(ProtobufError::Truncated);
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// Steps over the next field: its number, or `None` at the end of the message.
    pub(crate) fn skip_field(&mut self) -> Result<Option<u32>, ProtobufError> {
        Ok(self.next_field()?.map(|(tag, _)| tag))
    }

    /// How many fields numbered `tag` come next, one after another: the rest of a
    /// repeated field's run, as Go writes it.
    pub(crate) fn run_of(mut self, tag: u32) -> Result<usize, ProtobufError> {
        let mut count = 0;
        while self.skip_field()? == Some(tag) {
            count += 1;
        }
        Ok(count)
    }

    /// The next field's number and value, or `None` at the end of the message.
    #[inline]
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, Field<'a>)>, ProtobufError> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3)
            .map_err(|_| ProtobufError::Malformed("field number out of range".into()))?;
        let field = match (key & 7) as u8 {
            VARINT => Field::Varint(self.varint()?),
            FIXED64 => {
                let bytes = self.take(8)?;
                let mut word = [0u8; 8];
                word.copy_from_slice(bytes);
                Field::Fixed64(u64::from_le_bytes(word))
            }
            FIXED32 => {
                self.take(4)?;
                Field::Fixed32
            }
            LENGTH_DELIMITED => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| ProtobufError::Malformed("length out of range".into()))?;
                Field::Bytes(self.take(len)?)
            }
            other => {
                return Err(ProtobufError::Malformed(format!(
                    "unsupported wire type {other} for field {tag}"
                )));
            }
        };
        Ok(Some((tag, field)))
    }
}

//! What every column writer is, and the two ways values go into a row: length-prefixed, and
//! as their `Display` text. Apart from the dispatch by type (`writers`) because the writers of
//! each kind of value (`arrays`, `datetime`, `float`, `numeric`) use them too.

use std::fmt::{self, Write as _};

use bytes::{BufMut, BytesMut};
use pgwire::error::PgWireResult;

use super::user_error;

/// Writes the non-null value at a row index.
pub(super) type ValueWriter<'a> = Box<dyn Fn(usize, &mut BytesMut) -> PgWireResult<()> + 'a>;

/// Writes a value after its length, as row fields and array elements go.
pub(super) fn put_length_prefixed(
    buf: &mut BytesMut,
    write: impl FnOnce(&mut BytesMut) -> PgWireResult<()>,
) -> PgWireResult<()> {
    let at = buf.len();
    buf.put_i32(0);
    write(buf)?;
    let len =
        i32::try_from(buf.len() - at - 4).map_err(|_| user_error("54000", "field value too large for the protocol"))?;
    buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// `fmt::Write` into `BytesMut` only grows the buffer and cannot fail.
pub(super) fn put_display(buf: &mut BytesMut, value: impl fmt::Display) {
    let _ = write!(buf, "{value}");
}

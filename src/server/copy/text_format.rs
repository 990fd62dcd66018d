//! PostgreSQL's text COPY format: delimited fields with backslash escapes, `\N` for NULL.

use bytes::{BufMut, BytesMut};

use crate::sql::output::CopyOptions;

/// A record's fields, or the SQLSTATE and message of what is wrong with it.
pub(super) type Fields = Result<Vec<Option<String>>, (&'static str, String)>;

pub(super) fn utf8(bytes: Vec<u8>) -> Result<String, (&'static str, String)> {
    String::from_utf8(bytes).map_err(|_| ("22021", "invalid byte sequence for encoding \"UTF8\"".to_string()))
}

/// One line of the text format, without its newline: delimited fields with backslash
/// escapes, `\N` for NULL.
pub(super) fn text_record(record: &[u8], options: &CopyOptions) -> Fields {
    let line = record.strip_suffix(b"\r").unwrap_or(record);
    let mut fields = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i <= line.len() {
        match line.get(i) {
            None => fields.push(text_field(line.get(start..).unwrap_or_default(), options)?),
            Some(&b) if b == options.delimiter => {
                fields.push(text_field(line.get(start..i).unwrap_or_default(), options)?);
                start = i + 1;
            }
            Some(b'\\') if i + 1 < line.len() => i += 1,
            Some(_) => {}
        }
        i += 1;
    }
    Ok(fields)
}

fn text_field(raw: &[u8], options: &CopyOptions) -> Result<Option<String>, (&'static str, String)> {
    if raw == options.null.as_bytes() {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        i += 1;
        if b != b'\\' || i == raw.len() {
            out.push(b);
            continue;
        }
        let c = raw[i];
        i += 1;
        out.push(match c {
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'v' => 11,
            b'0'..=b'7' => {
                let mut value = u32::from(c - b'0');
                for _ in 0..2 {
                    match raw.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            value = (value << 3) | u32::from(d - b'0');
                            i += 1;
                        }
                        _ => break,
                    }
                }
                (value & 0xff) as u8
            }
            b'x' if raw.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let mut value = 0u8;
                for _ in 0..2 {
                    match raw.get(i).and_then(|d| char::from(*d).to_digit(16)) {
                        Some(d) => {
                            value = (value << 4) | d as u8;
                            i += 1;
                        }
                        None => break,
                    }
                }
                value
            }
            other => other,
        });
    }
    utf8(out).map(Some)
}

/// A value escaped for the text format.
pub(super) fn write_text_value(out: &mut BytesMut, value: &[u8], delimiter: u8) {
    for &b in value {
        match b {
            8 => out.put_slice(b"\\b"),
            12 => out.put_slice(b"\\f"),
            b'\n' => out.put_slice(b"\\n"),
            b'\r' => out.put_slice(b"\\r"),
            b'\t' => out.put_slice(b"\\t"),
            11 => out.put_slice(b"\\v"),
            b'\\' => out.put_slice(b"\\\\"),
            _ if b == delimiter => out.put_slice(&[b'\\', b]),
            _ => out.put_u8(b),
        }
    }
}

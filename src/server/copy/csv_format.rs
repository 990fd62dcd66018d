//! The CSV COPY format: fields quoted where they must be, quotes escaped inside them.

use bytes::{BufMut, BytesMut};

use super::text_format::{Fields, utf8};
use crate::sql::output::CopyOptions;

/// One record of the CSV format, without its line break; quoted values may span lines. An
/// unquoted field equal to the NULL string is NULL; a quoted one never is.
pub(super) fn csv_record(record: &[u8], options: &CopyOptions) -> Fields {
    let CopyOptions { delimiter, quote, escape, .. } = *options;
    let mut fields = Vec::new();
    let mut value = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    let mut i = 0;
    loop {
        match record.get(i).copied() {
            Some(b) if b == quote => {
                quoted = true;
                i += 1;
                loop {
                    match (record.get(i).copied(), record.get(i + 1).copied()) {
                        (None, _) => return Err(("22P04", "unterminated CSV quoted field".to_string())),
                        (Some(c), Some(n)) if c == escape && (n == quote || n == escape) => {
                            value.push(n);
                            i += 2;
                        }
                        (Some(c), _) if c == quote => {
                            i += 1;
                            break;
                        }
                        (Some(c), _) => {
                            value.push(c);
                            i += 1;
                        }
                    }
                }
            }
            Some(b) if b != delimiter => {
                value.push(b);
                i += 1;
            }
            separator => {
                let is_null = !quoted && record.get(start..i) == Some(options.null.as_bytes());
                let text = utf8(std::mem::take(&mut value))?;
                fields.push((!is_null).then_some(text));
                if separator.is_none() {
                    return Ok(fields);
                }
                quoted = false;
                i += 1;
                start = i;
            }
        }
    }
}

/// Quoted when it holds a delimiter, quote, escape or line break, when it reads as the
/// NULL string, or when it is a lone `\.` that would end the data.
pub(super) fn write_csv_value(out: &mut BytesMut, value: &[u8], single_column: bool, options: &CopyOptions) {
    let CopyOptions { delimiter, quote, escape, .. } = *options;
    let needs_quotes = value == options.null.as_bytes()
        || (single_column && value == b"\\.")
        || value.iter().any(|&b| b == delimiter || b == quote || b == escape || b == b'\n' || b == b'\r');
    if !needs_quotes {
        out.put_slice(value);
        return;
    }
    out.put_u8(quote);
    for &b in value {
        if b == quote || b == escape {
            out.put_u8(escape);
        }
        out.put_u8(b);
    }
    out.put_u8(quote);
}

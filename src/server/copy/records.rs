//! A COPY's data split into records as its messages arrive, keeping only the incomplete last
//! record between them: text and CSV lines, whose ends escapes and quotes decide, and binary
//! tuples after the binary header.

use std::fmt::Display;

use bytes::{Buf, Bytes, BytesMut};

use super::binary_format::{BINARY_EOF, BINARY_SIGNATURE, Reader};
use super::csv_format::csv_record;
use super::text_format::text_record;
use crate::error::SqlError;
use crate::sql::output::{CopyFormat, CopyIn, CopyOptions};

/// One input field: text still to be parsed as the column type, or a binary value's bytes;
/// `None` for NULL.
pub(super) enum Value {
    Text(Option<String>),
    Binary(Option<Bytes>),
}

/// `COPY t, line 3, column a: ...`, as PostgreSQL's error context reads.
pub(super) fn copy_error(
    table: &str,
    code: &'static str,
    line: usize,
    column: Option<&str>,
    message: impl Display,
) -> SqlError {
    let column = column.map(|c| format!(", column {c}")).unwrap_or_default();
    SqlError::new(code, format!("COPY {table}, line {line}{column}: {message}"))
}

/// Splits a COPY's data into records as its messages arrive; between messages it keeps only
/// the incomplete last record.
pub(super) struct RecordReader {
    options: CopyOptions,
    table: String,
    /// Fields per record, which a binary tuple states up front.
    columns: usize,
    buffer: BytesMut,
    /// How far the buffered text record was searched for its end without finding it, and
    /// whether a CSV quote is open there: a record spread over many messages is scanned once.
    scanned: usize,
    in_quotes: bool,
    /// Records read so far, a header included: the line number errors name, as PostgreSQL's do.
    line: usize,
    /// The binary header has been read.
    header_read: bool,
    /// The end-of-data marker (`\.`, or the binary trailer) came; what follows is ignored.
    ended: bool,
}

impl RecordReader {
    pub(super) fn new(copy: &CopyIn) -> Self {
        RecordReader {
            options: copy.options.clone(),
            table: copy.table.clone(),
            columns: copy.columns.len(),
            buffer: BytesMut::new(),
            scanned: 0,
            in_quotes: false,
            line: 0,
            header_read: false,
            ended: false,
        }
    }

    pub(super) fn extend(&mut self, data: &[u8]) {
        if !self.ended {
            self.buffer.extend_from_slice(data);
        }
    }

    /// The next complete record and its line number; `None` when the buffer holds no
    /// complete record, or, with `end` (no more data comes), when there is none left.
    pub(super) fn next(&mut self, end: bool) -> Result<Option<(usize, Vec<Value>)>, SqlError> {
        match self.options.format {
            CopyFormat::Binary => self.next_tuple(end),
            CopyFormat::Text | CopyFormat::Csv => self.next_line(end),
        }
    }

    /// Text and CSV input. Line numbers count the header, as PostgreSQL's do.
    fn next_line(&mut self, end: bool) -> Result<Option<(usize, Vec<Value>)>, SqlError> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let Some((length, consumed)) = self.record_end(end) else {
                return Ok(None);
            };
            let record = self.buffer.split_to(consumed);
            let record = &record[..length];
            (self.scanned, self.in_quotes) = (0, false);
            self.line += 1;
            // `\.` alone on a line ends the data.
            if record.strip_suffix(b"\r").unwrap_or(record) == b"\\." {
                self.ended = true;
                self.buffer.clear();
                return Ok(None);
            }
            if self.line == 1 && self.options.header {
                continue;
            }
            let fields = match self.options.format {
                CopyFormat::Csv => csv_record(record, &self.options),
                _ => text_record(record, &self.options),
            };
            let fields = fields.map_err(|(code, message)| copy_error(&self.table, code, self.line, None, message))?;
            return Ok(Some((self.line, fields.into_iter().map(Value::Text).collect())));
        }
    }

    /// The length of the buffered record, without and with its line break, once the buffer
    /// holds all of it: a text record ends at the first newline no backslash escapes, a CSV
    /// record at the first line break outside quotes. With `end`, the rest is the last record.
    fn record_end(&mut self, end: bool) -> Option<(usize, usize)> {
        let CopyOptions { quote, escape, .. } = self.options;
        let csv = self.options.format == CopyFormat::Csv;
        let data = &self.buffer[..];
        let mut i = self.scanned;
        while let Some(&b) = data.get(i) {
            let next = data.get(i + 1).copied();
            if csv && self.in_quotes {
                // Whether an escape escapes a quote or is the closing quote, the next byte says.
                if b == escape && next.is_none() && !end {
                    break;
                }
                if b == escape && next.is_some_and(|n| n == quote || n == escape) {
                    i += 2;
                    continue;
                }
                self.in_quotes = b != quote;
            } else if csv {
                match b {
                    b'\n' => return Some((i, i + 1)),
                    b'\r' if next == Some(b'\n') => return Some((i, i + 2)),
                    b'\r' if next.is_some() || end => return Some((i, i + 1)),
                    // A `\n` may follow in the next message.
                    b'\r' => break,
                    _ => self.in_quotes = b == quote,
                }
            } else {
                match b {
                    b'\n' => return Some((i, i + 1)),
                    b'\\' if next.is_none() && !end => break,
                    b'\\' => i += 1,
                    _ => {}
                }
            }
            i += 1;
        }
        self.scanned = i.min(data.len());
        (end && !data.is_empty()).then_some((data.len(), data.len()))
    }

    /// PostgreSQL's binary COPY: a signature and header, then per row a field count and each
    /// field as a length (-1 for NULL) and the value in its binary send format.
    fn next_tuple(&mut self, end: bool) -> Result<Option<(usize, Vec<Value>)>, SqlError> {
        if self.ended {
            return Ok(None);
        }
        if !self.header_read {
            let Some(length) = self.binary_header(end)? else {
                return Ok(None);
            };
            self.buffer.advance(length);
            self.header_read = true;
        }
        let line = self.line + 1;
        let mut reader = Reader(&self.buffer);
        let Some(count) = reader.i16() else {
            return self.short(end, BINARY_EOF);
        };
        if count == -1 {
            self.ended = true;
            self.buffer.clear();
            return Ok(None);
        }
        if usize::try_from(count) != Ok(self.columns) {
            let message = format!("row field count is {count}, expected {}", self.columns);
            return Err(copy_error(&self.table, "22P04", line, None, message));
        }
        let mut fields = Vec::with_capacity(self.columns);
        for _ in 0..self.columns {
            match reader.i32() {
                None => return self.short(end, BINARY_EOF),
                Some(-1) => fields.push(None),
                Some(length) => {
                    let Ok(length) = usize::try_from(length) else {
                        return Err(self.stream_error(BINARY_EOF));
                    };
                    let start = self.buffer.len() - reader.0.len();
                    if reader.take(length).is_none() {
                        return self.short(end, BINARY_EOF);
                    }
                    fields.push(Some(start..start + length));
                }
            }
        }
        let tuple = self.buffer.split_to(self.buffer.len() - reader.0.len()).freeze();
        self.line = line;
        Ok(Some((line, fields.into_iter().map(|field| Value::Binary(field.map(|range| tuple.slice(range)))).collect())))
    }

    /// The length of the binary header, once the buffer holds all of it.
    fn binary_header(&self, end: bool) -> Result<Option<usize>, SqlError> {
        let unrecognized = "COPY file signature not recognized";
        let mut reader = Reader(&self.buffer);
        match reader.take(BINARY_SIGNATURE.len()) {
            Some(signature) if signature == BINARY_SIGNATURE => {}
            None if BINARY_SIGNATURE.starts_with(&self.buffer) => return self.short(end, unrecognized),
            _ => return Err(self.stream_error(unrecognized)),
        }
        let Some(flags) = reader.i32() else {
            return self.short(end, "invalid COPY file header (missing flags)");
        };
        if flags & (1 << 16) != 0 {
            return Err(SqlError::feature_not_supported("binary COPY with OIDs is not supported"));
        }
        let Some(extension) = reader.i32() else {
            return self.short(end, "invalid COPY file header (missing length)");
        };
        let Ok(extension) = usize::try_from(extension) else {
            return Err(self.stream_error("invalid COPY file header (missing length)"));
        };
        if reader.take(extension).is_none() {
            return self.short(end, "invalid COPY file header (wrong length)");
        }
        Ok(Some(self.buffer.len() - reader.0.len()))
    }

    /// More data is needed; with `end`, none comes, and `message` says what is missing.
    fn short<T>(&self, end: bool, message: &str) -> Result<Option<T>, SqlError> {
        if end { Err(self.stream_error(message)) } else { Ok(None) }
    }

    fn stream_error(&self, message: &str) -> SqlError {
        SqlError::new("22P04", format!("COPY {}: {message}", self.table))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{copy_in, options};
    use super::*;

    /// Reads `data` sent as CopyData messages of `chunk` bytes, as the records it splits into.
    fn records_in_messages(
        data: &[u8],
        options: &CopyOptions,
        chunk: usize,
    ) -> Result<Vec<Vec<Option<String>>>, SqlError> {
        let mut reader = RecordReader::new(&copy_in(options.clone(), &[]));
        let mut records = Vec::new();
        let mut take = |record: (usize, Vec<Value>)| {
            records.push(
                record
                    .1
                    .into_iter()
                    .map(|v| if let Value::Text(text) = v { text } else { panic!("not text") })
                    .collect(),
            )
        };
        for message in data.chunks(chunk) {
            reader.extend(message);
            while let Some(record) = reader.next(false)? {
                take(record);
            }
        }
        while let Some(record) = reader.next(true)? {
            take(record);
        }
        Ok(records)
    }

    /// The records of `data` sent in one message, once every split into smaller messages has
    /// read the same: a record split anywhere, inside a quoted field or an escape, reads as whole.
    fn records(data: &str, options: &CopyOptions) -> Result<Vec<Vec<Option<String>>>, SqlError> {
        let whole = records_in_messages(data.as_bytes(), options, data.len().max(1));
        for chunk in 1..data.len() {
            assert_eq!(
                records_in_messages(data.as_bytes(), options, chunk),
                whole,
                "{data:?} in messages of {chunk} bytes"
            );
        }
        whole
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn text_format_escapes_nulls_and_end_marker() {
        let text = options(CopyFormat::Text);
        assert_eq!(
            records("1\ta\\tb\\\\c\\n\n2\t\\N\r\n3\t\\101\\x41\\.\\q\n\\.\nignored\n", &text).unwrap(),
            vec![vec![s("1"), s("a\tb\\c\n")], vec![s("2"), None], vec![s("3"), s("AA.q")]]
        );
        assert_eq!(records("a\\\tb\tc", &text).unwrap(), vec![vec![s("a\tb"), s("c")]]);
        assert_eq!(records("\n", &text).unwrap(), vec![vec![s("")]]);
        assert_eq!(records("\\303\\251", &text).unwrap(), vec![vec![s("é")]]);
        assert_eq!(records("a\\\nb\n\\.", &text).unwrap(), vec![vec![s("a\nb")]]);
        assert_eq!(records("x\\", &text).unwrap(), vec![vec![s("x\\")]]);
    }

    #[test]
    fn csv_format_quotes_and_nulls() {
        let csv = options(CopyFormat::Csv);
        assert_eq!(
            records("1,\"a,\"\"b\"\"\",\n2,\"\",\"x\ny\"\r\n\\.\n", &csv).unwrap(),
            vec![vec![s("1"), s("a,\"b\""), None], vec![s("2"), s(""), s("x\ny")]]
        );
        assert_eq!(records("a\rb\r\n\"c\r\n\"\r", &csv).unwrap(), vec![vec![s("a")], vec![s("b")], vec![s("c\r\n")]]);
        assert_eq!(records("1,\"open", &csv).unwrap_err().code, "22P04");
        assert_eq!(
            records("1,\"open\n2,b\n", &csv).unwrap_err().message,
            "COPY t, line 1: unterminated CSV quoted field"
        );
        let escaped = CopyOptions { escape: b'\\', ..csv };
        assert_eq!(
            records("\"a\\\"b\\\\\",\"\\n\"\n\"x\"\"y\"\n", &escaped).unwrap(),
            vec![vec![s("a\"b\\"), s("\\n")], vec![s("xy")]]
        );
    }
}

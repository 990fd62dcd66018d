//! COPY on the wire. `FROM STDIN` data (PostgreSQL's text, CSV and binary formats) is parsed
//! as its CopyData messages arrive, keeping only an incomplete last record between them, into
//! batches of the table's rows that stream into one write of the table ([`TableAppend`]); the
//! write commits at CopyDone, so a bad line loads nothing. `TO STDOUT` sends one row per
//! CopyData message, because pgwire's `COPY n` tag counts messages.

use std::collections::VecDeque;
use std::fmt::{Debug, Display};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use datafusion::arrow::array::{Array, ArrayRef, BinaryArray, RecordBatch, StringArray, StringBuilder, new_null_array};
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;
use futures::{Sink, SinkExt, StreamExt, stream};
use pgwire::api::ClientInfo;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyResponse, Response, Tag};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail, CopyOutResponse};

use super::cancel::Interrupt;
use super::encoding::{
    BinaryError, decode_binary, encode_batch, field_infos, numeric_binary_text, parse_bytea, pg_type, user_error,
};
use crate::catalog::types::SparkType;
use crate::error::SqlError;
use crate::sql::output::{CopyFormat, CopyIn, CopyOptions, CopyOut};
use crate::sql::session::Session;
use crate::sql::write::append_stream::TableAppend;

/// Rows per batch handed to the table writer.
const BATCH_ROWS: usize = 8192;
const BINARY_SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";
const BINARY_EOF: &str = "unexpected EOF in COPY data";

/// The connection's COPY FROM STDIN in progress, if any.
pub struct CopyState {
    session: Arc<Session>,
    in_progress: Mutex<Option<CopyInProgress>>,
}

struct CopyInProgress {
    parser: CopyParser,
    /// The table write, or the error that stopped the COPY. Either way the outcome is
    /// reported at CopyDone, when the client reads responses again; after an error the rest
    /// of the data is read and dropped.
    write: Result<TableAppend, SqlError>,
}

impl CopyState {
    pub fn new(session: Arc<Session>) -> Self {
        CopyState { session, in_progress: Mutex::new(None) }
    }

    /// Answers a `COPY ... FROM STDIN` and starts the write of its table; the data then
    /// arrives through [`CopyHandler`].
    pub fn start(&self, copy: CopyIn) -> Result<Response, SqlError> {
        let write = TableAppend::start(Arc::clone(&self.session), &copy.schema, &copy.table)?;
        let format = i8::from(copy.options.format == CopyFormat::Binary);
        let columns = copy.columns.len();
        *self.lock() = Some(CopyInProgress { parser: CopyParser::new(copy), write: Ok(write) });
        Ok(Response::CopyIn(CopyResponse::new(format, columns, stream::empty())))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<CopyInProgress>> {
        self.in_progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self, message: &str) -> PgWireResult<CopyInProgress> {
        self.lock()
            .take()
            .ok_or_else(|| user_error("08P01", format!("{message} without a COPY FROM STDIN in progress")))
    }
}

#[async_trait]
impl CopyHandler for CopyState {
    /// Parses the message's complete records and hands their rows to the write, waiting
    /// while the write is behind, which leaves the socket unread: the client is held back.
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut copy = self.take("CopyData")?;
        copy.write = match copy.write {
            Ok(write) => {
                copy.parser.extend(&copy_data.data);
                load(&mut copy.parser, write, false).await
            }
            failed => failed,
        };
        *self.lock() = Some(copy);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let CopyInProgress { mut parser, write } = self.take("CopyDone")?;
        let rows = async { load(&mut parser, write?, true).await?.finish().await }.await;
        let rows = rows.map_err(|e| user_error(e.code, e.message))?;
        client.send(PgWireBackendMessage::CommandComplete(Tag::new("COPY").with_rows(rows).into())).await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let copy = self.lock().take();
        if let Some(CopyInProgress { write: Ok(write), .. }) = copy {
            write.abort().await;
        }
        user_error("57014", format!("COPY from stdin failed: {}", fail.message))
    }
}

/// Hands the rows of the complete records `parser` holds to `write`; with `end`, also the
/// last record, which needs no line break. A bad record stops the write, which removes what
/// it staged.
async fn load(parser: &mut CopyParser, mut write: TableAppend, end: bool) -> Result<TableAppend, SqlError> {
    loop {
        match parser.next_batch(end) {
            Ok(Some(batch)) => write = write.push(batch).await?,
            Ok(None) => return Ok(write),
            Err(e) => {
                write.abort().await;
                return Err(e);
            }
        }
    }
}

/// Turns a COPY's data into batches of the table's rows as its messages arrive.
struct CopyParser {
    records: RecordReader,
    rows: RowBuilder,
}

impl CopyParser {
    fn new(copy: CopyIn) -> Self {
        CopyParser { records: RecordReader::new(&copy), rows: RowBuilder::new(copy) }
    }

    fn extend(&mut self, data: &[u8]) {
        self.records.extend(data);
        self.rows.copy.progress.processed(data.len(), 0);
    }

    /// The next [`BATCH_ROWS`] rows, once the complete records received hold them; with
    /// `end`, the data is all there and the last rows come however few. Rows count as
    /// processed once parsed, as they reach the batch.
    fn next_batch(&mut self, end: bool) -> Result<Option<RecordBatch>, SqlError> {
        let buffered = self.rows.len();
        while self.rows.len() < BATCH_ROWS {
            match self.records.next(end)? {
                Some((line, fields)) => self.rows.push(line, fields)?,
                None => break,
            }
        }
        self.rows.copy.progress.processed(0, self.rows.len() - buffered);
        if self.rows.len() == BATCH_ROWS || (end && self.rows.len() > 0) {
            self.rows.flush().map(Some)
        } else {
            Ok(None)
        }
    }
}

/// One input field: text still to be parsed as the column type, or a binary value's bytes;
/// `None` for NULL.
enum Value {
    Text(Option<String>),
    Binary(Option<Bytes>),
}

/// `COPY t, line 3, column a: ...`, as PostgreSQL's error context reads.
fn copy_error(table: &str, code: &'static str, line: usize, column: Option<&str>, message: impl Display) -> SqlError {
    let column = column.map(|c| format!(", column {c}")).unwrap_or_default();
    SqlError::new(code, format!("COPY {table}, line {line}{column}: {message}"))
}

/// Splits a COPY's data into records as its messages arrive; between messages it keeps only
/// the incomplete last record.
struct RecordReader {
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
    fn new(copy: &CopyIn) -> Self {
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

    fn extend(&mut self, data: &[u8]) {
        if !self.ended {
            self.buffer.extend_from_slice(data);
        }
    }

    /// The next complete record and its line number; `None` when the buffer holds no
    /// complete record, or, with `end` (no more data comes), when there is none left.
    fn next(&mut self, end: bool) -> Result<Option<(usize, Vec<Value>)>, SqlError> {
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

/// Collects input rows column by column and turns them into table batches.
struct RowBuilder {
    copy: CopyIn,
    text: Vec<StringBuilder>,
    binary: Vec<Vec<ScalarValue>>,
    /// The input line of each buffered row, for error messages.
    lines: Vec<usize>,
}

impl RowBuilder {
    fn new(copy: CopyIn) -> Self {
        let n = copy.columns.len();
        RowBuilder {
            text: (0..n).map(|_| StringBuilder::new()).collect(),
            binary: vec![Vec::new(); n],
            lines: Vec::new(),
            copy,
        }
    }

    fn len(&self) -> usize {
        self.lines.len()
    }

    fn column_type(&self, field: usize) -> &DataType {
        self.copy.table_schema.field(self.copy.columns[field]).data_type()
    }

    fn error(&self, code: &'static str, line: usize, field: Option<usize>, message: impl Display) -> SqlError {
        let column = field.map(|f| self.copy.table_schema.field(self.copy.columns[f]).name().as_str());
        copy_error(&self.copy.table, code, line, column, message)
    }

    fn push(&mut self, line: usize, fields: Vec<Value>) -> Result<(), SqlError> {
        let expected = self.copy.columns.len();
        if fields.len() > expected {
            return Err(self.error("22P04", line, None, "extra data after last expected column"));
        }
        if fields.len() < expected {
            let missing = self.copy.table_schema.field(self.copy.columns[fields.len()]).name();
            return Err(self.error("22P04", line, None, format!("missing data for column \"{missing}\"")));
        }
        for (i, value) in fields.into_iter().enumerate() {
            match value {
                // PostgreSQL's input functions skip surrounding whitespace except for strings.
                Value::Text(text) if *self.column_type(i) == DataType::Utf8 => self.text[i].append_option(text),
                Value::Text(text) => self.text[i].append_option(text.as_deref().map(str::trim)),
                Value::Binary(raw) => {
                    let dt = self.column_type(i);
                    let value = match raw {
                        None => ScalarValue::try_from(dt)?,
                        Some(raw) => binary_value(dt, &raw).map_err(|m| self.error("22P03", line, Some(i), m))?,
                    };
                    self.binary[i].push(value);
                }
            }
        }
        self.lines.push(line);
        Ok(())
    }

    fn flush(&mut self) -> Result<RecordBatch, SqlError> {
        let schema = &self.copy.table_schema;
        let mut columns: Vec<ArrayRef> =
            schema.fields().iter().map(|f| new_null_array(f.data_type(), self.lines.len())).collect();
        for field in 0..self.copy.columns.len() {
            let dt = self.column_type(field).clone();
            columns[self.copy.columns[field]] = if self.copy.options.format == CopyFormat::Binary {
                ScalarValue::iter_to_array(std::mem::take(&mut self.binary[field]))?
            } else {
                let text = self.text[field].finish();
                parse_column(&text, &dt).map_err(|row| {
                    let ty =
                        SparkType::from_arrow(&dt).map(|t| t.as_str().to_string()).unwrap_or_else(|_| dt.to_string());
                    self.error(
                        "22P02",
                        self.lines[row],
                        Some(field),
                        format!("invalid input syntax for type {ty}: \"{}\"", text.value(row)),
                    )
                })?
            };
        }
        let batch = RecordBatch::try_new(Arc::clone(schema), columns)?;
        self.lines.clear();
        Ok(batch)
    }
}

/// Parses text values as `dt`; `Err` holds the first row that does not parse.
fn parse_column(text: &StringArray, dt: &DataType) -> Result<ArrayRef, usize> {
    let parsed: ArrayRef = match dt {
        DataType::Utf8 => return Ok(Arc::new(text.clone())),
        DataType::Binary => {
            Arc::new(text.iter().map(|v| v.and_then(|v| parse_bytea(v.as_bytes()))).collect::<BinaryArray>())
        }
        _ => cast_with_options(text, dt, &CastOptions { safe: true, ..Default::default() }).map_err(|_| 0usize)?,
    };
    match (0..text.len()).find(|&i| text.is_valid(i) && parsed.is_null(i)) {
        Some(row) => Err(row),
        None => Ok(parsed),
    }
}

/// A record's fields, or the SQLSTATE and message of what is wrong with it.
type Fields = Result<Vec<Option<String>>, (&'static str, String)>;

fn utf8(bytes: Vec<u8>) -> Result<String, (&'static str, String)> {
    String::from_utf8(bytes).map_err(|_| ("22021", "invalid byte sequence for encoding \"UTF8\"".to_string()))
}

/// One line of the text format, without its newline: delimited fields with backslash
/// escapes, `\N` for NULL.
fn text_record(record: &[u8], options: &CopyOptions) -> Fields {
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

/// One record of the CSV format, without its line break; quoted values may span lines. An
/// unquoted field equal to the NULL string is NULL; a quoted one never is.
fn csv_record(record: &[u8], options: &CopyOptions) -> Fields {
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

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = tail;
        Some(head)
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
}

/// A value in the binary format of the type the column is described as (see
/// `encoding::pg_type`), as the column's Arrow value.
fn binary_value(dt: &DataType, raw: &[u8]) -> Result<ScalarValue, String> {
    let unsupported = || format!("binary COPY into a column of type {dt} is not supported");
    // Decimals are cast from their text, as in the text format, so the column's scale rounds the exact value.
    if let DataType::Decimal128(..) = dt {
        return match numeric_binary_text(raw)?.as_str() {
            "NaN" | "Infinity" | "-Infinity" => Err("NaN and infinite numerics cannot be stored".to_string()),
            text => {
                ScalarValue::try_from_string(text.to_string(), dt).map_err(|_| "numeric field overflow".to_string())
            }
        };
    }
    let ty = pg_type(dt).map_err(|_| unsupported())?;
    let value = decode_binary(&ty, raw).map_err(|e| match e {
        BinaryError::Invalid(message) => message,
        BinaryError::Encoding => "invalid byte sequence for encoding \"UTF8\"".to_string(),
        BinaryError::Unsupported => unsupported(),
    })?;
    match (dt, value) {
        (_, value) if value.data_type() == *dt => Ok(value),
        (DataType::Int8, value) => value.cast_to(dt).map_err(|_| "tinyint out of range".to_string()),
        (DataType::Timestamp(TimeUnit::Microsecond, tz), ScalarValue::TimestampMicrosecond(micros, _)) => {
            Ok(ScalarValue::TimestampMicrosecond(micros, tz.clone()))
        }
        _ => Err(unsupported()),
    }
}

/// Answers a `COPY ... TO STDOUT`: each row rendered as the text a query would return
/// (escaped for the text or CSV format), or as its binary send format.
pub fn copy_out_response(copy: CopyOut, interrupt: &Interrupt) -> PgWireResult<Response> {
    let CopyOut { options, schema, stream: batches, progress } = copy;
    let binary = options.format == CopyFormat::Binary;
    let fields = Arc::new(field_infos(&schema, if binary { &Format::UnifiedBinary } else { &Format::UnifiedText })?);
    let columns = fields.len();
    let mut prefix = BytesMut::new();
    if binary {
        prefix.put_slice(BINARY_SIGNATURE);
        prefix.put_i32(0);
        prefix.put_i32(0);
    } else if options.header {
        let names: Vec<Option<&[u8]>> = schema.fields().iter().map(|f| Some(f.name().as_bytes())).collect();
        write_row(&mut prefix, &names, &options);
    }
    // The header goes out with the first row (or alone when there is none), so that the
    // message count pgwire reports is the row count.
    // The progress report goes with the stream: the COPY is listed until its rows are sent
    // or the stream is dropped.
    let state = (batches, Some(prefix), VecDeque::new(), false, progress);
    let data = stream::unfold(state, move |(mut batches, mut prefix, mut queue, mut done, progress)| {
        let (fields, options) = (Arc::clone(&fields), options.clone());
        async move {
            loop {
                if let Some(message) = queue.pop_front() {
                    return Some((Ok(message), (batches, prefix, queue, done, progress)));
                }
                if done {
                    return None;
                }
                match batches.next().await {
                    Some(Ok(batch)) => match encode_batch(&batch, &fields) {
                        Ok(rows) => queue.extend(rows.into_iter().map(|row| {
                            let mut out = prefix.take().unwrap_or_default();
                            if binary {
                                out.put_i16(row.field_count);
                                out.put_slice(&row.data);
                            } else {
                                write_row(&mut out, &row_values(&row.data, columns), &options);
                            }
                            progress.processed(out.len(), 1);
                            CopyData::new(out.freeze())
                        })),
                        Err(e) => {
                            done = true;
                            return Some((Err(e), (batches, prefix, queue, done, progress)));
                        }
                    },
                    Some(Err(e)) => {
                        done = true;
                        let e = SqlError::from(e);
                        return Some((Err(user_error(e.code, e.message)), (batches, prefix, queue, done, progress)));
                    }
                    None => {
                        done = true;
                        // No row took the header along: it goes alone.
                        if let Some(header) = prefix.take().filter(|p| !p.is_empty()) {
                            progress.processed(header.len(), 0);
                            queue.push_back(CopyData::new(header.freeze()));
                        }
                    }
                }
            }
        }
    });
    Ok(Response::CopyOut(CopyResponse::new(i8::from(binary), columns, interrupt.clone().guard(data))))
}

/// Sends a `COPY ... TO STDOUT` (`response`, as [`copy_out_response`] made it) from within
/// `do_query`, as PostgreSQL does: CopyOutResponse, the CopyData messages and CopyDone, then
/// its `COPY n` tag as the response.
/// pgwire's own sender answers a failure part way (a cancel, a timeout, a runtime error) with
/// CopyFail, a message only clients send, which leaves clients unable to read the connection;
/// here the data stops and the error goes out as an ErrorResponse, as from PostgreSQL.
pub async fn send_copy_out<C>(client: &mut C, response: Response) -> PgWireResult<Response>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let Response::CopyOut(copy) = response else { return Ok(response) };
    let column_formats = copy.column_formats();
    let CopyResponse { format, columns, mut data_stream, .. } = copy;
    client
        .send(PgWireBackendMessage::CopyOutResponse(CopyOutResponse::new(format, columns as i16, column_formats)))
        .await?;
    let mut rows = 0;
    while let Some(data) = data_stream.next().await {
        let data = data?;
        if data.data.is_empty() {
            continue;
        }
        // The binary format's trailer is not a row.
        if data.data.as_ref() != [0xFF, 0xFF] {
            rows += 1;
        }
        client.feed(PgWireBackendMessage::CopyData(data)).await?;
    }
    client.send(PgWireBackendMessage::CopyDone(CopyDone::new())).await?;
    Ok(Response::Execution(Tag::new("COPY").with_rows(rows)))
}

/// The values of an encoded DataRow: each a length (-1 for NULL) and its bytes.
fn row_values(data: &[u8], columns: usize) -> Vec<Option<&[u8]>> {
    let mut reader = Reader(data);
    (0..columns)
        .map(|_| match reader.i32() {
            Some(len) if len >= 0 => reader.take(len as usize),
            _ => None,
        })
        .collect()
}

fn write_row(out: &mut BytesMut, values: &[Option<&[u8]>], options: &CopyOptions) {
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.put_u8(options.delimiter);
        }
        match value {
            None => out.put_slice(options.null.as_bytes()),
            Some(value) if options.format == CopyFormat::Csv => write_csv_value(out, value, values.len() == 1, options),
            Some(value) => write_text_value(out, value, options.delimiter),
        }
    }
    out.put_u8(b'\n');
}

fn write_text_value(out: &mut BytesMut, value: &[u8], delimiter: u8) {
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

/// Quoted when it holds a delimiter, quote, escape or line break, when it reads as the
/// NULL string, or when it is a lone `\.` that would end the data.
fn write_csv_value(out: &mut BytesMut, value: &[u8], single_column: bool, options: &CopyOptions) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::activity::{Backend, CopyCommand};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::util::display::array_value_to_string;

    fn options(format: CopyFormat) -> CopyOptions {
        let csv = format == CopyFormat::Csv;
        CopyOptions {
            format,
            header: false,
            delimiter: if csv { b',' } else { b'\t' },
            null: if csv { String::new() } else { "\\N".to_string() },
            quote: b'"',
            escape: b'"',
        }
    }

    fn copy_in(options: CopyOptions, columns: &[(&str, DataType)]) -> CopyIn {
        let fields: Vec<Field> = columns.iter().map(|(name, dt)| Field::new(*name, dt.clone(), true)).collect();
        CopyIn {
            schema: "default".to_string(),
            table: "t".to_string(),
            table_schema: Arc::new(Schema::new(fields)),
            columns: (0..columns.len()).collect(),
            options,
            progress: Arc::new(Backend::new(None)).report_copy(0, CopyCommand::From),
        }
    }

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

    /// The batches a parser makes of `data` sent as CopyData messages of `chunk` bytes.
    fn batches_in_messages(copy: CopyIn, data: &[u8], chunk: usize) -> Result<Vec<RecordBatch>, SqlError> {
        let mut parser = CopyParser::new(copy);
        let mut batches = Vec::new();
        for message in data.chunks(chunk) {
            parser.extend(message);
            while let Some(batch) = parser.next_batch(false)? {
                batches.push(batch);
            }
        }
        while let Some(batch) = parser.next_batch(true)? {
            batches.push(batch);
        }
        Ok(batches)
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

    #[test]
    fn rows_split_across_messages_parse_as_sent_whole() {
        let columns = [("k", DataType::Int64), ("v", DataType::Utf8), ("d", DataType::Date32)];
        let csv = "1,\"multi\nline, \"\"quoted\"\"\",2024-01-02\r\n2,,\n3,plain,1999-12-31";
        let text = "1\tmulti\\nline, \"quoted\"\t2024-01-02\r\n2\t\\N\t\\N\n3\tplain\t1999-12-31\n\\.\n";
        let mut binary = BytesMut::from(BINARY_SIGNATURE);
        binary.put_i32(0);
        binary.put_i32(4);
        binary.put_slice(b"skip");
        for (k, v, days) in
            [(1i64, Some("multi\nline, \"quoted\""), Some(19724)), (2, None, None), (3, Some("plain"), Some(10956))]
        {
            binary.put_i16(3);
            binary.put_i32(8);
            binary.put_i64(k);
            match v {
                Some(v) => {
                    binary.put_i32(v.len() as i32);
                    binary.put_slice(v.as_bytes());
                }
                None => binary.put_i32(-1),
            }
            match days {
                // PostgreSQL's dates count days from 2000-01-01.
                Some(days) => {
                    binary.put_i32(4);
                    binary.put_i32(days - 10957);
                }
                None => binary.put_i32(-1),
            }
        }
        binary.put_i16(-1);
        let mut expected = None;
        for (format, data) in
            [(CopyFormat::Csv, csv.as_bytes()), (CopyFormat::Text, text.as_bytes()), (CopyFormat::Binary, &binary[..])]
        {
            let whole = batches_in_messages(copy_in(options(format), &columns), data, data.len()).unwrap();
            let expected = expected.get_or_insert_with(|| whole.clone());
            assert_eq!(&whole, &*expected, "{format:?} reads the same rows");
            for chunk in 1..data.len() {
                let split = batches_in_messages(copy_in(options(format), &columns), data, chunk).unwrap();
                assert_eq!(&split, &*expected, "{format:?} in messages of {chunk} bytes");
            }
        }
        let expected = expected.unwrap();
        assert_eq!(expected.len(), 1);
        assert_eq!(array_value_to_string(expected[0].column(1), 0).unwrap(), "multi\nline, \"quoted\"");
        assert_eq!(array_value_to_string(expected[0].column(2), 2).unwrap(), "1999-12-31");
        // A tuple cut short by the end of the data, wherever it is cut.
        for cut in 0..binary.len() {
            let err =
                batches_in_messages(copy_in(options(CopyFormat::Binary), &columns), &binary[..cut], 7).unwrap_err();
            assert_eq!(err.code, "22P04", "cut at {cut}: {err:?}");
        }
    }

    #[test]
    fn batches_fill_across_messages_and_errors_name_the_line() {
        let columns = [("k", DataType::Int64)];
        let mut data: String = (0..BATCH_ROWS + 3).map(|k| format!("{k}\n")).collect();
        let batches = batches_in_messages(copy_in(options(CopyFormat::Text), &columns), data.as_bytes(), 1000).unwrap();
        assert_eq!(batches.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), vec![BATCH_ROWS, 3]);
        data.push_str("x\n");
        let err = batches_in_messages(copy_in(options(CopyFormat::Text), &columns), data.as_bytes(), 1000).unwrap_err();
        assert_eq!(err.code, "22P02");
        assert_eq!(
            err.message,
            format!("COPY t, line {}, column k: invalid input syntax for type bigint: \"x\"", BATCH_ROWS + 4)
        );
    }

    #[test]
    fn text_values_parse_as_column_types() {
        let text = StringArray::from(vec![Some("1"), None, Some("t")]);
        let bools = parse_column(&text, &DataType::Boolean).unwrap();
        assert_eq!(bools.null_count(), 1);
        assert_eq!(parse_column(&text, &DataType::Int32).unwrap_err(), 2);
        let floats = StringArray::from(vec!["NaN", "Infinity", "-Infinity", "1.5e3"]);
        let floats = parse_column(&floats, &DataType::Float64).unwrap();
        assert_eq!(array_value_to_string(&floats, 2).unwrap(), "-inf");
        let stamps = StringArray::from(vec!["2024-01-02 03:04:05.5+00", "2024-01-02 03:04:05-02", "2024-01-02"]);
        let stamps = parse_column(&stamps, &DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))).unwrap();
        assert_eq!(array_value_to_string(&stamps, 1).unwrap(), "2024-01-02T05:04:05Z");
        let bytes = parse_column(&StringArray::from(vec!["\\x0aff"]), &DataType::Binary).unwrap();
        assert_eq!(bytes.as_any().downcast_ref::<BinaryArray>().unwrap().value(0), &[10, 255]);
    }

    #[test]
    fn values_render_escaped() {
        let mut out = BytesMut::new();
        let text = options(CopyFormat::Text);
        write_row(&mut out, &[Some(b"a\tb\\"), None, Some(b"")], &text);
        let csv = options(CopyFormat::Csv);
        write_row(&mut out, &[Some(b"a,\"b\""), None, Some(b""), Some(b"x")], &csv);
        assert_eq!(&out[..], b"a\\tb\\\\\t\\N\t\n\"a,\"\"b\"\"\",,\"\",x\n");
    }
}

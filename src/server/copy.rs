//! COPY on the wire. `FROM STDIN` data (PostgreSQL's text, CSV and binary formats) is
//! buffered until CopyDone, parsed into the table's Arrow batches and appended in one
//! commit, so a bad line loads nothing. `TO STDOUT` sends one row per CopyData message,
//! because pgwire's `COPY n` tag counts messages.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::{BufMut, BytesMut};
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
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};

use super::cancel::Interrupt;
use super::encoding::{
    BinaryError, decode_binary, encode_batch, field_infos, numeric_binary_text, parse_bytea, pg_type, user_error,
};
use crate::catalog::types::SparkType;
use crate::error::SqlError;
use crate::sql::copy::{CopyFormat, CopyIn, CopyOptions, CopyOut};
use crate::sql::dml::append_batches;
use crate::sql::session::Session;

/// Rows per batch handed to the table writer.
const BATCH_ROWS: usize = 8192;
const BINARY_SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// The connection's COPY FROM STDIN in progress, if any.
pub struct CopyState {
    session: Arc<Session>,
    pending: Mutex<Option<(CopyIn, Vec<u8>)>>,
}

impl CopyState {
    pub fn new(session: Arc<Session>) -> Self {
        CopyState { session, pending: Mutex::new(None) }
    }

    /// Answers a `COPY ... FROM STDIN`; its data then arrives through [`CopyHandler`].
    pub fn start(&self, copy: CopyIn) -> Response {
        let format = i8::from(copy.options.format == CopyFormat::Binary);
        let columns = copy.columns.len();
        *self.lock() = Some((copy, Vec::new()));
        Response::CopyIn(CopyResponse::new(format, columns, stream::empty()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(CopyIn, Vec<u8>)>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl CopyHandler for CopyState {
    async fn on_copy_data<C>(&self, _client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self.lock().as_mut() {
            Some((_, data)) => {
                data.extend_from_slice(&copy_data.data);
                Ok(())
            }
            None => Err(user_error("08P01", "CopyData without a COPY FROM STDIN in progress")),
        }
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let Some((copy, data)) = self.lock().take() else {
            return Err(user_error("08P01", "CopyDone without a COPY FROM STDIN in progress"));
        };
        let rows = load(&self.session, &copy, &data).await.map_err(|e| user_error(e.code, e.message))?;
        client.send(PgWireBackendMessage::CommandComplete(Tag::new("COPY").with_rows(rows).into())).await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.lock().take();
        user_error("57014", format!("COPY from stdin failed: {}", fail.message))
    }
}

async fn load(session: &Session, copy: &CopyIn, data: &[u8]) -> Result<usize, SqlError> {
    let mut rows = RowBuilder::new(copy);
    match copy.options.format {
        CopyFormat::Binary => read_binary(data, &mut rows)?,
        CopyFormat::Text | CopyFormat::Csv => read_text(data, &copy.options, &mut rows)?,
    }
    let batches = rows.finish()?;
    if batches.is_empty() {
        return Ok(0);
    }
    append_batches(session, &copy.schema, &copy.table, batches).await
}

/// One input field: text still to be parsed as the column type, or a decoded binary value.
enum Value {
    Text(Option<String>),
    Binary(ScalarValue),
}

/// Collects input rows column by column and turns them into table batches.
struct RowBuilder<'a> {
    copy: &'a CopyIn,
    text: Vec<StringBuilder>,
    binary: Vec<Vec<ScalarValue>>,
    /// The input line of each buffered row, for error messages.
    lines: Vec<usize>,
    batches: Vec<RecordBatch>,
}

impl<'a> RowBuilder<'a> {
    fn new(copy: &'a CopyIn) -> Self {
        let n = copy.columns.len();
        RowBuilder {
            copy,
            text: (0..n).map(|_| StringBuilder::new()).collect(),
            binary: vec![Vec::new(); n],
            lines: Vec::new(),
            batches: Vec::new(),
        }
    }

    fn column_type(&self, field: usize) -> &DataType {
        self.copy.table_schema.field(self.copy.columns[field]).data_type()
    }

    /// `COPY t, line 3, column a: ...`, as PostgreSQL's error context reads.
    fn error(
        &self,
        code: &'static str,
        line: usize,
        field: Option<usize>,
        message: impl std::fmt::Display,
    ) -> SqlError {
        let column = field.map(|f| format!(", column {}", self.copy.table_schema.field(self.copy.columns[f]).name()));
        SqlError::new(code, format!("COPY {}, line {line}{}: {message}", self.copy.table, column.unwrap_or_default()))
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
                Value::Binary(value) => self.binary[i].push(value),
            }
        }
        self.lines.push(line);
        if self.lines.len() == BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SqlError> {
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
        self.batches.push(RecordBatch::try_new(schema.clone(), columns)?);
        self.lines.clear();
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<RecordBatch>, SqlError> {
        if !self.lines.is_empty() {
            self.flush()?;
        }
        Ok(self.batches)
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

/// Text and CSV input. Line numbers count the header, as PostgreSQL's do.
fn read_text(data: &[u8], options: &CopyOptions, rows: &mut RowBuilder) -> Result<(), SqlError> {
    let mut pos = 0;
    let mut line = 0;
    loop {
        line += 1;
        let record = match options.format {
            CopyFormat::Csv => csv_record(data, &mut pos, options),
            _ => text_record(data, &mut pos, options),
        };
        let fields = match record {
            Ok(Some(fields)) => fields,
            Ok(None) => return Ok(()),
            Err((code, message)) => return Err(rows.error(code, line, None, message)),
        };
        if line == 1 && options.header {
            continue;
        }
        rows.push(line, fields.into_iter().map(Value::Text).collect())?;
    }
}

type Record = Result<Option<Vec<Option<String>>>, (&'static str, String)>;

/// `\.` alone on a line ends the data.
fn at_end_marker(rest: &[u8]) -> bool {
    rest.strip_prefix(b"\\.").is_some_and(|after| matches!(after, [] | [b'\n', ..] | [b'\r', ..]))
}

fn utf8(bytes: Vec<u8>) -> Result<String, (&'static str, String)> {
    String::from_utf8(bytes).map_err(|_| ("22021", "invalid byte sequence for encoding \"UTF8\"".to_string()))
}

/// One line of the text format: delimited fields with backslash escapes, `\N` for NULL.
fn text_record(data: &[u8], pos: &mut usize, options: &CopyOptions) -> Record {
    let rest = &data[(*pos).min(data.len())..];
    if rest.is_empty() || at_end_marker(rest) {
        return Ok(None);
    }
    // An escaped newline belongs to the value, so the line ends at the first unescaped one.
    let mut end = 0;
    while end < rest.len() && rest[end] != b'\n' {
        end += if rest[end] == b'\\' { 2 } else { 1 };
    }
    let end = end.min(rest.len());
    *pos += end + 1;
    let line = rest[..end].strip_suffix(b"\r").unwrap_or(&rest[..end]);
    let mut fields = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i <= line.len() {
        if i == line.len() || line[i] == options.delimiter {
            fields.push(text_field(&line[start..i], options)?);
            start = i + 1;
        } else if line[i] == b'\\' && i + 1 < line.len() {
            i += 1;
        }
        i += 1;
    }
    Ok(Some(fields))
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

/// One record of the CSV format, which may span lines inside quotes. An unquoted field
/// equal to the NULL string is NULL; a quoted one never is.
fn csv_record(data: &[u8], pos: &mut usize, options: &CopyOptions) -> Record {
    let CopyOptions { delimiter, quote, escape, .. } = *options;
    let rest = &data[(*pos).min(data.len())..];
    if rest.is_empty() || at_end_marker(rest) {
        return Ok(None);
    }
    let mut fields = Vec::new();
    let mut value = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    let mut i = 0;
    loop {
        let b = rest.get(i).copied();
        if b == Some(quote) {
            quoted = true;
            i += 1;
            loop {
                match rest.get(i).copied() {
                    None => return Err(("22P04", "unterminated CSV quoted field".to_string())),
                    Some(c) if c == escape && rest.get(i + 1).is_some_and(|&n| n == quote || n == escape) => {
                        value.push(rest[i + 1]);
                        i += 2;
                    }
                    Some(c) if c == quote => {
                        i += 1;
                        break;
                    }
                    Some(c) => {
                        value.push(c);
                        i += 1;
                    }
                }
            }
            continue;
        }
        if matches!(b, None | Some(b'\n' | b'\r')) || b == Some(delimiter) {
            let is_null = !quoted && &rest[start..i] == options.null.as_bytes();
            let text = utf8(std::mem::take(&mut value))?;
            fields.push((!is_null).then_some(text));
            quoted = false;
            i += 1;
            start = i;
            if b == Some(b'\r') && rest.get(i) == Some(&b'\n') {
                i += 1;
            }
            if b != Some(delimiter) {
                *pos += i.min(rest.len());
                return Ok(Some(fields));
            }
            continue;
        }
        value.push(rest[i]);
        i += 1;
    }
}

/// PostgreSQL's binary COPY: a signature and header, then per row a field count and each
/// field as a length (-1 for NULL) and the value in its binary send format.
fn read_binary(data: &[u8], rows: &mut RowBuilder) -> Result<(), SqlError> {
    let copy = rows.copy;
    let bad = |message: &str| SqlError::new("22P04", format!("COPY {}: {message}", copy.table));
    let mut reader = Reader(data);
    if reader.take(BINARY_SIGNATURE.len()) != Some(BINARY_SIGNATURE) {
        return Err(bad("COPY file signature not recognized"));
    }
    let flags = reader.i32().ok_or_else(|| bad("invalid COPY file header (missing flags)"))?;
    if flags & (1 << 16) != 0 {
        return Err(SqlError::feature_not_supported("binary COPY with OIDs is not supported"));
    }
    let extension = reader
        .i32()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| bad("invalid COPY file header (missing length)"))?;
    reader.take(extension).ok_or_else(|| bad("invalid COPY file header (wrong length)"))?;
    let mut line = 0;
    loop {
        line += 1;
        let count = reader.i16().ok_or_else(|| bad("unexpected EOF in COPY data"))?;
        if count == -1 {
            return Ok(());
        }
        if count as usize != copy.columns.len() {
            return Err(rows.error(
                "22P04",
                line,
                None,
                format!("row field count is {count}, expected {}", copy.columns.len()),
            ));
        }
        let mut fields = Vec::with_capacity(count as usize);
        for field in 0..count as usize {
            let dt = copy.table_schema.field(copy.columns[field]).data_type();
            let value = match reader.i32() {
                Some(-1) => ScalarValue::try_from(dt)?,
                Some(len) => {
                    let raw = usize::try_from(len)
                        .ok()
                        .and_then(|len| reader.take(len))
                        .ok_or_else(|| bad("unexpected EOF in COPY data"))?;
                    binary_value(dt, raw).map_err(|m| rows.error("22P03", line, Some(field), m))?
                }
                None => return Err(bad("unexpected EOF in COPY data")),
            };
            fields.push(Value::Binary(value));
        }
        rows.push(line, fields)?;
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
    let CopyOut { options, schema, stream: batches } = copy;
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
    let state = (batches, Some(prefix), VecDeque::new(), false);
    let data = stream::unfold(state, move |(mut batches, mut prefix, mut queue, mut done)| {
        let (fields, options) = (Arc::clone(&fields), options.clone());
        async move {
            loop {
                if let Some(message) = queue.pop_front() {
                    return Some((Ok(message), (batches, prefix, queue, done)));
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
                            CopyData::new(out.freeze())
                        })),
                        Err(e) => {
                            done = true;
                            return Some((Err(e), (batches, prefix, queue, done)));
                        }
                    },
                    Some(Err(e)) => {
                        done = true;
                        let e = SqlError::from(e);
                        return Some((Err(user_error(e.code, e.message)), (batches, prefix, queue, done)));
                    }
                    None => {
                        done = true;
                        queue.extend(prefix.take().filter(|p| !p.is_empty()).map(|p| CopyData::new(p.freeze())));
                    }
                }
            }
        }
    });
    Ok(Response::CopyOut(CopyResponse::new(i8::from(binary), columns, interrupt.clone().guard(data))))
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

    fn records(data: &str, options: &CopyOptions) -> Vec<Vec<Option<String>>> {
        let mut pos = 0;
        let mut out = Vec::new();
        loop {
            let record = match options.format {
                CopyFormat::Csv => csv_record(data.as_bytes(), &mut pos, options),
                _ => text_record(data.as_bytes(), &mut pos, options),
            };
            match record.unwrap() {
                Some(r) => out.push(r),
                None => return out,
            }
        }
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn text_format_escapes_nulls_and_end_marker() {
        let text = options(CopyFormat::Text);
        assert_eq!(
            records("1\ta\\tb\\\\c\\n\n2\t\\N\r\n3\t\\101\\x41\\.\\q\n\\.\nignored\n", &text),
            vec![vec![s("1"), s("a\tb\\c\n")], vec![s("2"), None], vec![s("3"), s("AA.q")]]
        );
        assert_eq!(records("a\\\tb\tc", &text), vec![vec![s("a\tb"), s("c")]]);
        assert_eq!(records("\n", &text), vec![vec![s("")]]);
        assert_eq!(records("\\303\\251", &text), vec![vec![s("é")]]);
    }

    #[test]
    fn csv_format_quotes_and_nulls() {
        let csv = options(CopyFormat::Csv);
        assert_eq!(
            records("1,\"a,\"\"b\"\"\",\n2,\"\",\"x\ny\"\r\n\\.\n", &csv),
            vec![vec![s("1"), s("a,\"b\""), None], vec![s("2"), s(""), s("x\ny")]]
        );
        let mut pos = 0;
        assert_eq!(csv_record(b"1,\"open", &mut pos, &csv).unwrap_err().0, "22P04");
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

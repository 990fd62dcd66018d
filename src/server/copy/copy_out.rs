//! `COPY ... TO STDOUT`: each row as a CopyData message, rendered as the text a query would
//! return (escaped for the text or CSV format) or in its binary send format, sent the way
//! PostgreSQL sends it.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use futures::{Sink, SinkExt, StreamExt, stream};
use pgwire::api::portal::Format;
use pgwire::api::results::{CopyResponse, Response, Tag};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyOutResponse};

use super::binary_format::{BINARY_SIGNATURE, Reader};
use super::csv_format::write_csv_value;
use super::text_format::write_text_value;
use crate::error::SqlError;
use crate::server::cancel::Interrupt;
use crate::server::encoding::{encode_batch, field_infos, user_error};
use crate::sql::output::{CopyFormat, CopyOptions, CopyOut};

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

#[cfg(test)]
mod tests {
    use super::super::test_support::options;
    use super::*;

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

//! `COPY ... FROM STDIN`: the write of the table started when the statement is answered, the
//! rows of each CopyData message's complete records handed to it, and the write committed at
//! CopyDone (or dropped at CopyFail or at the first bad record).

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use futures::{Sink, SinkExt, stream};
use pgwire::api::ClientInfo;
use pgwire::api::copy::CopyHandler;
use pgwire::api::results::{CopyResponse, Response, Tag};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};

use super::records::RecordReader;
use super::rows::RowBuilder;
use crate::error::SqlError;
use crate::server::encoding::user_error;
use crate::sql::output::{CopyFormat, CopyIn};
use crate::sql::session::Session;
use crate::sql::write::append_stream::TableAppend;

/// Rows per batch handed to the table writer.
const BATCH_ROWS: usize = 8192;

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

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use datafusion::arrow::datatypes::DataType;
    use datafusion::arrow::util::display::array_value_to_string;

    use super::super::binary_format::BINARY_SIGNATURE;
    use super::super::test_support::{copy_in, options};
    use super::*;

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
}

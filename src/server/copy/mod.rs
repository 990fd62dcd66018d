//! COPY on the wire. `FROM STDIN` data (PostgreSQL's text, CSV and binary formats) is parsed
//! as its CopyData messages arrive, keeping only an incomplete last record between them, into
//! batches of the table's rows that stream into one write of the table (`copy_in`); the
//! write commits at CopyDone, so a bad line loads nothing. `TO STDOUT` sends one row per
//! CopyData message, because pgwire's `COPY n` tag counts messages (`copy_out`).
//!
//! - `records`: the data split into records as it arrives, `rows`: records into table batches.
//! - `text_format`, `csv_format`, `binary_format`: each format's fields, read and written.

mod binary_format;
mod copy_in;
mod copy_out;
mod csv_format;
mod records;
mod rows;
#[cfg(test)]
mod test_support;
mod text_format;

pub use copy_in::CopyState;
pub use copy_out::{copy_out_response, send_copy_out};

//! What the COPY tests build their input from.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};

use crate::sql::activity::{Backend, CopyCommand};
use crate::sql::output::{CopyFormat, CopyIn, CopyOptions};

pub(super) fn options(format: CopyFormat) -> CopyOptions {
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

pub(super) fn copy_in(options: CopyOptions, columns: &[(&str, DataType)]) -> CopyIn {
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

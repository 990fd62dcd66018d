//! Helpers for the encoding tests: encoding one column and reading the
//! DataRow fields back, hex literals, dates, and Bind portals to decode.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use chrono::{Datelike, NaiveDate};
use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use pgwire::api::Type;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::stmt::StoredStatement;
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::Bind;

use super::{decode_parameters, encode_batch, field_infos};

/// `num_days_from_ce` of 1970-01-01.
const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

pub(super) fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// The fields of a DataRow: `None` for NULL.
pub(super) fn row_fields(row: &DataRow) -> Vec<Option<Vec<u8>>> {
    let mut data = &row.data[..];
    let mut fields = Vec::new();
    for _ in 0..row.field_count {
        let len = i32::from_be_bytes(data[..4].try_into().unwrap());
        data = &data[4..];
        if len < 0 {
            fields.push(None);
        } else {
            fields.push(Some(data[..len as usize].to_vec()));
            data = &data[len as usize..];
        }
    }
    assert!(data.is_empty(), "trailing bytes in DataRow");
    fields
}

/// Encodes a single column, returning each row's value.
fn encode_column(array: ArrayRef, format: Format) -> Vec<Option<Vec<u8>>> {
    let schema = Schema::new(vec![Field::new("c", array.data_type().clone(), true)]);
    let batch = RecordBatch::try_new(Arc::new(schema.clone()), vec![array]).unwrap();
    let fields = Arc::new(field_infos(&schema, &format).unwrap());
    encode_batch(&batch, &fields).unwrap().iter().map(|row| row_fields(row).remove(0)).collect()
}

pub(super) fn text(array: ArrayRef) -> Vec<Option<String>> {
    encode_column(array, Format::UnifiedText).into_iter().map(|v| v.map(|b| String::from_utf8(b).unwrap())).collect()
}

pub(super) fn binary(array: ArrayRef) -> Vec<Option<Vec<u8>>> {
    encode_column(array, Format::UnifiedBinary)
}

pub(super) fn texts(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some(v.to_string())).collect()
}

pub(super) fn hexes(values: &[&str]) -> Vec<Option<Vec<u8>>> {
    values.iter().map(|v| Some(hex(v))).collect()
}

pub(super) fn micros(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, us: u32) -> i64 {
    NaiveDate::from_ymd_opt(y, mo, d).unwrap().and_hms_micro_opt(h, mi, s, us).unwrap().and_utc().timestamp_micros()
}

pub(super) fn days(y: i32, mo: u32, d: u32) -> i32 {
    NaiveDate::from_ymd_opt(y, mo, d).unwrap().num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE
}

pub(super) fn code(result: PgWireResult<impl fmt::Debug>) -> String {
    result.unwrap_err().code().to_owned()
}

pub(super) fn portal(declared: Vec<Option<Type>>, formats: Vec<i16>, values: Vec<Option<&[u8]>>) -> Portal<String> {
    let bind =
        Bind::new(None, None, formats, values.into_iter().map(|v| v.map(Bytes::copy_from_slice)).collect(), vec![]);
    let statement = StoredStatement::new("s".to_owned(), "SELECT".to_owned(), declared);
    Portal::try_new(&bind, Arc::new(statement)).unwrap()
}

/// Decodes one parameter of type `ty` in the given format (0 text, 1 binary).
pub(super) fn decode_one(ty: Type, format: i16, value: Option<&[u8]>) -> PgWireResult<ScalarValue> {
    decode_parameters(&portal(vec![Some(ty)], vec![format], vec![value]), &[]).map(|mut v| v.remove(0))
}

pub(super) fn decode_text_one(ty: Type, value: &str) -> PgWireResult<ScalarValue> {
    decode_one(ty, 0, Some(value.as_bytes()))
}

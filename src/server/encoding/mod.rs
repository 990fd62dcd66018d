//! Arrow values on the PostgreSQL wire.
//!
//! Result columns become `DataRow`s in the text or binary format each column
//! was asked for, byte for byte as PostgreSQL's output and send functions
//! produce them, because drivers (psql, pgjdbc, asyncpg, psycopg,
//! tokio-postgres) parse those bytes strictly. Bound parameters go the other
//! way, into `ScalarValue`s for DataFusion.
//!
//! - `types`: which PostgreSQL type each Arrow type is sent as, RowDescription fields, format codes.
//! - `writers`: per-column value writers and [`encode_batch`]; `arrays` for lists, `json` for
//!   maps and structs; `value_writer`
//!   for what every writer is and how values go into a row.
//! - `float`, `numeric`, `datetime`: PostgreSQL's text and binary forms of those values.
//! - `params`: Bind parameters, read by `text_values` or `binary_values` (which binary COPY shares),
//!   rejected with a `param_error`.

mod arrays;
mod binary_values;
mod datetime;
mod float;
mod json;
mod numeric;
mod param_error;
mod params;
#[cfg(test)]
mod test_support;
mod text_values;
mod types;
mod value_writer;
mod writers;

use pgwire::error::{ErrorInfo, PgWireError};

pub(crate) use binary_values::{BinaryError, decode_binary};
pub(crate) use numeric::numeric_binary_text;
pub use params::decode_parameters;
pub(crate) use text_values::parse_bytea;
pub use types::{arrow_type, field_infos, pg_type};
pub use writers::encode_batch;

/// An `ERROR` with the given SQLSTATE, the way all of the server reports
/// failures to clients (drivers key their exceptions on the code).
pub fn user_error(sqlstate: &str, message: impl Into<String>) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new("ERROR".to_owned(), sqlstate.to_owned(), message.into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_error_is_an_error_with_the_sqlstate() {
        let PgWireError::UserError(info) = user_error("42P01", "no such table") else {
            panic!("not a user error");
        };
        assert_eq!(
            (info.severity.as_str(), info.code.as_str(), info.message.as_str()),
            ("ERROR", "42P01", "no such table")
        );
    }
}

//! A rejected bound value as the readers report it (`text_values`, and `binary_values`
//! through `From`), for `params` to turn into the error that names the parameter.

use pgwire::api::Type;
use pgwire::error::PgWireError;

use super::binary_values::BinaryError;
use super::user_error;

/// Why a bound value was rejected; turned into an error naming the parameter.
pub(super) enum ParamError {
    Invalid(String),
    OutOfRange,
    BinaryUnsupported,
    /// Text that is not UTF-8: PostgreSQL's 22021.
    Encoding,
}

impl ParamError {
    pub(super) fn syntax(input: &str) -> Self {
        ParamError::Invalid(format!("invalid input syntax: \"{input}\""))
    }

    pub(super) fn into_pg(self, number: usize, ty: &Type) -> PgWireError {
        let name = ty.name();
        match self {
            ParamError::Invalid(detail) => {
                user_error("22P02", format!("invalid value for parameter ${number} of type {name}: {detail}"))
            }
            ParamError::OutOfRange => {
                user_error("22003", format!("value for parameter ${number} is out of range for type {name}"))
            }
            ParamError::BinaryUnsupported => {
                user_error("0A000", format!("binary format for parameter ${number} of type {name} is not supported"))
            }
            ParamError::Encoding => user_error(
                "22021",
                format!("invalid byte sequence for encoding \"UTF8\" in parameter ${number} of type {name}"),
            ),
        }
    }
}

impl From<BinaryError> for ParamError {
    fn from(e: BinaryError) -> Self {
        match e {
            BinaryError::Invalid(detail) => ParamError::Invalid(detail),
            BinaryError::Unsupported => ParamError::BinaryUnsupported,
            BinaryError::Encoding => ParamError::Encoding,
        }
    }
}

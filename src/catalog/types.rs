//! Column types: how Spark and PostgreSQL spell them in DDL, how the metastore stores them
//! (Spark's simple type strings, so `DESCRIBE` prints what Spark prints) and the Arrow type
//! the Parquet files hold (the one Spark writes for the same column, so Spark can read them).

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::sql::sqlparser::ast::{DataType as SqlType, ExactNumberInfo, ObjectName, TimezoneInfo};

use crate::error::SqlError;

/// Spark's timestamp type (`TIMESTAMP`, `TIMESTAMP_LTZ`) is an instant: Parquet INT64
/// micros adjusted to UTC, which Arrow reads as a UTC-zoned timestamp.
pub const UTC: &str = "UTC";

/// The largest decimal precision Spark (and Arrow's Decimal128) supports.
const MAX_DECIMAL_PRECISION: u64 = 38;

/// A column type in the metastore's spelling, e.g. `bigint` or `decimal(10,2)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparkType(String);

impl SparkType {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Reads a type string stored in the metastore.
    pub fn parse(text: &str) -> Result<Self, SqlError> {
        let ty = SparkType(text.to_string());
        ty.to_arrow()?;
        Ok(ty)
    }

    /// The type of a DDL column definition, as Spark or PostgreSQL users write it.
    pub fn from_sql(ty: &SqlType) -> Result<Self, SqlError> {
        let name = match ty {
            SqlType::Boolean | SqlType::Bool => "boolean".to_string(),
            SqlType::TinyInt(_) | SqlType::Int8(None) => "tinyint".to_string(),
            SqlType::SmallInt(_) | SqlType::Int2(_) => "smallint".to_string(),
            SqlType::Int(_) | SqlType::Integer(_) | SqlType::Int4(_) | SqlType::MediumInt(_) => "int".to_string(),
            SqlType::BigInt(_) | SqlType::Int8(Some(_)) | SqlType::Int64 => "bigint".to_string(),
            SqlType::Float(_) | SqlType::Real | SqlType::Float4 => "float".to_string(),
            SqlType::Double(_) | SqlType::DoublePrecision | SqlType::Float8 | SqlType::Float64 => "double".to_string(),
            SqlType::Decimal(info) | SqlType::Numeric(info) | SqlType::Dec(info) => {
                let (precision, scale) = match info {
                    ExactNumberInfo::None => (10, 0),
                    ExactNumberInfo::Precision(p) => (*p, 0),
                    ExactNumberInfo::PrecisionAndScale(p, s) => (
                        *p,
                        u64::try_from(*s).map_err(|_| {
                            SqlError::invalid_parameter(format!("decimal scale {s} must not be negative"))
                        })?,
                    ),
                };
                decimal_type(precision, scale)?
            }
            SqlType::String(_)
            | SqlType::Text
            | SqlType::Varchar(_)
            | SqlType::CharVarying(_)
            | SqlType::CharacterVarying(_)
            | SqlType::Char(_)
            | SqlType::Character(_)
            | SqlType::Nvarchar(_) => "string".to_string(),
            SqlType::Date => "date".to_string(),
            SqlType::Timestamp(_, TimezoneInfo::WithoutTimeZone) => "timestamp_ntz".to_string(),
            SqlType::Timestamp(_, _) => "timestamp".to_string(),
            SqlType::TimestampNtz(_) => "timestamp_ntz".to_string(),
            SqlType::Binary(_) | SqlType::Bytea | SqlType::Varbinary(_) | SqlType::Blob(_) => "binary".to_string(),
            SqlType::Custom(name, modifiers) if modifiers.is_empty() => custom_type(name)?,
            other => {
                return Err(SqlError::feature_not_supported(format!("column type {other} is not supported")));
            }
        };
        Ok(SparkType(name))
    }

    /// The Arrow type of a table column written in Spark's type.
    pub fn from_arrow(dt: &DataType) -> Result<Self, SqlError> {
        let name = match dt {
            DataType::Boolean => "boolean".to_string(),
            DataType::Int8 => "tinyint".to_string(),
            DataType::Int16 | DataType::UInt8 => "smallint".to_string(),
            DataType::Int32 | DataType::UInt16 => "int".to_string(),
            DataType::Int64 | DataType::UInt32 => "bigint".to_string(),
            DataType::UInt64 => "decimal(20,0)".to_string(),
            DataType::Float16 | DataType::Float32 => "float".to_string(),
            DataType::Float64 => "double".to_string(),
            DataType::Decimal32(p, s)
            | DataType::Decimal64(p, s)
            | DataType::Decimal128(p, s)
            | DataType::Decimal256(p, s) => decimal_type(u64::from(*p), (*s).max(0) as u64)?,
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => "string".to_string(),
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "binary".to_string(),
            DataType::Date32 | DataType::Date64 => "date".to_string(),
            DataType::Timestamp(_, Some(_)) => "timestamp".to_string(),
            DataType::Timestamp(_, None) => "timestamp_ntz".to_string(),
            DataType::Dictionary(_, value) => return Self::from_arrow(value),
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "a table column cannot hold values of type {other}"
                )));
            }
        };
        Ok(SparkType(name))
    }

    pub fn to_arrow(&self) -> Result<DataType, SqlError> {
        let dt = match self.0.as_str() {
            "boolean" => DataType::Boolean,
            "tinyint" => DataType::Int8,
            "smallint" => DataType::Int16,
            "int" => DataType::Int32,
            "bigint" => DataType::Int64,
            "float" => DataType::Float32,
            "double" => DataType::Float64,
            "string" => DataType::Utf8,
            "binary" => DataType::Binary,
            "date" => DataType::Date32,
            "timestamp" => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
            "timestamp_ntz" => DataType::Timestamp(TimeUnit::Microsecond, None),
            other => match parse_decimal(other) {
                Some((p, s)) => DataType::Decimal128(p, s),
                None => {
                    return Err(SqlError::internal(format!("unknown column type {other} in the metastore")));
                }
            },
        };
        Ok(dt)
    }

    /// The type as `SHOW CREATE TABLE` prints it (`BIGINT`, `DECIMAL(10,2)`).
    pub fn ddl_name(&self) -> String {
        self.0.to_uppercase()
    }
}

fn decimal_type(precision: u64, scale: u64) -> Result<String, SqlError> {
    if precision == 0 || precision > MAX_DECIMAL_PRECISION || scale > precision {
        return Err(SqlError::invalid_parameter(format!(
            "decimal({precision},{scale}) is not valid: precision must be 1 to {MAX_DECIMAL_PRECISION} and scale at most the precision"
        )));
    }
    Ok(format!("decimal({precision},{scale})"))
}

fn parse_decimal(text: &str) -> Option<(u8, i8)> {
    let inner = text.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// Spark's type names that sqlparser does not know.
fn custom_type(name: &ObjectName) -> Result<String, SqlError> {
    let spelled = name.to_string().to_lowercase();
    let mapped = match spelled.as_str() {
        "long" => "bigint",
        "short" => "smallint",
        "byte" => "tinyint",
        "timestamp_ltz" => "timestamp",
        "timestamp_ntz" => "timestamp_ntz",
        "timestamptz" => "timestamp",
        "binary" => "binary",
        "string" => "string",
        _ => {
            return Err(SqlError::undefined_type(format!("type \"{spelled}\" does not exist")));
        }
    };
    Ok(mapped.to_string())
}

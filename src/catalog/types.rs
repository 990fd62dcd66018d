//! Column types: how Spark and PostgreSQL spell them in DDL, how the metastore stores them
//! (Spark's catalog type strings, so `DESCRIBE` prints what Spark prints: `array<int>`,
//! `map<string,bigint>`, `struct<a:int,b:string>`) and the Arrow type the Parquet files hold
//! (the one Spark writes for the same column, so Spark can read them: a list's element is
//! named `element` and a map's entries `key_value`, as in Spark's Parquet files).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, DataType as SqlType, ExactNumberInfo, ObjectName, StructField, TimezoneInfo,
};

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
            SqlType::Array(ArrayElemTypeDef::AngleBracket(element) | ArrayElemTypeDef::SquareBracket(element, _)) => {
                format!("array<{}>", Self::from_sql(element)?.0)
            }
            SqlType::Map(key, value) => format!("map<{},{}>", Self::from_sql(key)?.0, Self::from_sql(value)?.0),
            SqlType::Struct(fields, _) if !fields.is_empty() => struct_type(fields)?,
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
            DataType::List(element) | DataType::LargeList(element) | DataType::FixedSizeList(element, _) => {
                format!("array<{}>", Self::from_arrow(element.data_type())?.0)
            }
            DataType::Map(entries, _) => match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => {
                    format!(
                        "map<{},{}>",
                        Self::from_arrow(kv[0].data_type())?.0,
                        Self::from_arrow(kv[1].data_type())?.0
                    )
                }
                other => return Err(SqlError::internal(format!("a map's entries of type {other}"))),
            },
            DataType::Struct(fields) if !fields.is_empty() => {
                let fields = fields
                    .iter()
                    .map(|f| Ok(format!("{}:{}", quote_field_name(f.name()), Self::from_arrow(f.data_type())?.0)))
                    .collect::<Result<Vec<_>, SqlError>>()?;
                format!("struct<{}>", fields.join(","))
            }
            other => {
                return Err(SqlError::feature_not_supported(format!(
                    "a table column cannot hold values of type {other}"
                )));
            }
        };
        Ok(SparkType(name))
    }

    pub fn to_arrow(&self) -> Result<DataType, SqlError> {
        let mut reader = TypeReader { text: &self.0 };
        let dt = reader.data_type()?;
        if !reader.text.is_empty() {
            return Err(SqlError::internal(format!("unknown column type {} in the metastore", self.0)));
        }
        Ok(dt)
    }

    /// Whether values of this type are arrays, maps or structs, which Spark neither partitions
    /// nor buckets by.
    pub fn is_complex(&self) -> bool {
        ["array<", "map<", "struct<"].iter().any(|p| self.0.starts_with(p))
    }

    /// The type as `SHOW CREATE TABLE` prints it (`BIGINT`, `DECIMAL(10,2)`,
    /// `MAP<STRING, ARRAY<INT>>`, `STRUCT<a: INT>`), as Spark's `DataType.sql`.
    pub fn ddl_name(&self) -> String {
        self.to_arrow().map_or_else(|_| self.0.to_uppercase(), |dt| ddl_name(&dt, false))
    }

    /// The type as Spark 4's `SHOW CREATE TABLE` prints it: every string, nested ones too, with
    /// its collation (`STRING COLLATE UTF8_BINARY`).
    pub fn collated_ddl_name(&self) -> String {
        self.to_arrow().map_or_else(|_| self.0.to_uppercase(), |dt| ddl_name(&dt, true))
    }
}

fn ddl_name(dt: &DataType, collated: bool) -> String {
    let name = |dt: &DataType| ddl_name(dt, collated);
    match dt {
        DataType::List(element) => format!("ARRAY<{}>", name(element.data_type())),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!("MAP<{}, {}>", name(kv[0].data_type()), name(kv[1].data_type()))
            }
            other => other.to_string(),
        },
        DataType::Struct(fields) => {
            let fields: Vec<String> =
                fields.iter().map(|f| format!("{}: {}", quote_field_name(f.name()), name(f.data_type()))).collect();
            format!("STRUCT<{}>", fields.join(", "))
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View if collated => "STRING COLLATE UTF8_BINARY".into(),
        other => SparkType::from_arrow(other).map_or_else(|_| other.to_string(), |t| t.0.to_uppercase()),
    }
}

/// A struct type of DDL fields, each of which must be named.
fn struct_type(fields: &[StructField]) -> Result<String, SqlError> {
    let fields = fields
        .iter()
        .map(|f| {
            let name = f
                .field_name
                .as_ref()
                .ok_or_else(|| SqlError::syntax(format!("a STRUCT field needs a name: {}", f.field_type)))?;
            Ok(format!("{}:{}", quote_field_name(&name.value), SparkType::from_sql(&f.field_type)?.0))
        })
        .collect::<Result<Vec<_>, SqlError>>()?;
    Ok(format!("struct<{}>", fields.join(",")))
}

/// A struct field's name as Spark's catalog strings write it: backquoted unless it is a plain
/// identifier.
fn quote_field_name(name: &str) -> String {
    if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

/// Reads a catalog type string from its start, nested types included.
struct TypeReader<'a> {
    text: &'a str,
}

impl TypeReader<'_> {
    fn data_type(&mut self) -> Result<DataType, SqlError> {
        if self.eat("array<") {
            let element = self.data_type()?;
            self.expect(">")?;
            return Ok(DataType::List(Arc::new(Field::new("element", element, true))));
        }
        if self.eat("map<") {
            let key = self.data_type()?;
            self.expect(",")?;
            let value = self.data_type()?;
            self.expect(">")?;
            return Ok(map_type(key, value));
        }
        if self.eat("struct<") {
            let mut fields = Vec::new();
            loop {
                let name = self.field_name()?;
                self.expect(":")?;
                fields.push(Field::new(name, self.data_type()?, true));
                if !self.eat(",") {
                    break;
                }
            }
            self.expect(">")?;
            return Ok(DataType::Struct(Fields::from(fields)));
        }
        let end = self.text.find([',', '>']).unwrap_or(self.text.len());
        let (name, rest) = self.text.split_at(end);
        // A decimal's own comma: `decimal(10,2)`.
        let (name, rest) = match (name.starts_with("decimal(") && !name.ends_with(')'), rest.find(')')) {
            (true, Some(close)) => (&self.text[..end + close + 1], &rest[close + 1..]),
            _ => (name, rest),
        };
        self.text = rest;
        simple_type(name)
    }

    fn field_name(&mut self) -> Result<String, SqlError> {
        if let Some(quoted) = self.text.strip_prefix('`') {
            let mut name = String::new();
            let mut chars = quoted.char_indices();
            while let Some((i, c)) = chars.next() {
                if c == '`' {
                    if quoted[i + 1..].starts_with('`') {
                        chars.next();
                    } else {
                        self.text = &quoted[i + 1..];
                        return Ok(name);
                    }
                }
                name.push(c);
            }
            return Err(self.unknown());
        }
        let end = self.text.find(':').ok_or_else(|| self.unknown())?;
        let (name, rest) = self.text.split_at(end);
        self.text = rest;
        Ok(name.to_string())
    }

    fn eat(&mut self, token: &str) -> bool {
        self.text.strip_prefix(token).map(|rest| self.text = rest).is_some()
    }

    fn expect(&mut self, token: &str) -> Result<(), SqlError> {
        if self.eat(token) { Ok(()) } else { Err(self.unknown()) }
    }

    fn unknown(&self) -> SqlError {
        SqlError::internal(format!("unknown column type at \"{}\" in the metastore", self.text))
    }
}

/// A map as Spark's Parquet files hold it: entries named `key_value`, keys never NULL.
pub fn map_type(key: DataType, value: DataType) -> DataType {
    let entries = Fields::from(vec![Field::new("key", key, false), Field::new("value", value, true)]);
    DataType::Map(Arc::new(Field::new("key_value", DataType::Struct(entries), false)), false)
}

fn simple_type(name: &str) -> Result<DataType, SqlError> {
    let dt = match name {
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

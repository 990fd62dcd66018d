//! Errors a statement can end with, each carrying the SQLSTATE a PostgreSQL client expects.
//!
//! Every failure reaching a client goes through [`SqlError`]; DataFusion's errors are mapped
//! here, in one place, so that user mistakes never surface as `XX000` (internal error).

use std::fmt;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use datafusion::parquet::errors::ParquetError;
use datafusion::sql::sqlparser::parser::ParserError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlError {
    pub code: &'static str,
    pub message: String,
}

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        SqlError { code, message: message.into() }
    }

    pub fn syntax(message: impl Into<String>) -> Self {
        Self::new("42601", message)
    }
    /// Spark's DIVIDE_BY_ZERO, which ANSI mode raises for every numeric type.
    pub fn divide_by_zero() -> Self {
        Self::new(
            "22012",
            "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and return NULL instead.",
        )
    }
    pub fn undefined_table(message: impl Into<String>) -> Self {
        Self::new("42P01", message)
    }
    pub fn undefined_column(message: impl Into<String>) -> Self {
        Self::new("42703", message)
    }
    pub fn undefined_type(message: impl Into<String>) -> Self {
        Self::new("42704", message)
    }
    pub fn undefined_schema(message: impl Into<String>) -> Self {
        Self::new("3F000", message)
    }
    pub fn duplicate_table(message: impl Into<String>) -> Self {
        Self::new("42P07", message)
    }
    pub fn duplicate_column(message: impl Into<String>) -> Self {
        Self::new("42701", message)
    }
    pub fn invalid_parameter(message: impl Into<String>) -> Self {
        Self::new("22023", message)
    }
    pub fn feature_not_supported(message: impl Into<String>) -> Self {
        Self::new("0A000", message)
    }
    pub fn datatype_mismatch(message: impl Into<String>) -> Self {
        Self::new("42804", message)
    }
    pub fn insufficient_privilege(message: impl Into<String>) -> Self {
        Self::new("42501", message)
    }
    pub fn query_canceled(message: impl Into<String>) -> Self {
        Self::new("57014", message)
    }
    pub fn io(message: impl Into<String>) -> Self {
        Self::new("58030", message)
    }
    /// An operating-system I/O failure: a full disk (or quota) is PostgreSQL's `53100`
    /// disk_full, the rest `58030` io_error; an object store's failure carried as one is
    /// told as [`Self::object_store`] tells it.
    pub fn storage(context: &str, e: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        if let Some(store) = object_store_cause(e) {
            return Self::object_store(context, store);
        }
        let code = if matches!(e.kind(), ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge) {
            "53100"
        } else {
            "58030"
        };
        Self::new(code, format!("{context}: {e}"))
    }
    /// An object store's failure: a missing object is `58P01` undefined_file, refused
    /// credentials `42501` insufficient_privilege, the rest (a store unreachable or failing)
    /// `58030` io_error.
    pub fn object_store(context: &str, e: &object_store::Error) -> Self {
        let code = match e {
            object_store::Error::NotFound { .. } => "58P01",
            object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => "42501",
            _ => "58030",
        };
        Self::new(code, format!("{context}: {e}"))
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new("XX000", message)
    }
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SqlError {}

/// Begins the text of a [`numeric_literal_out_of_range`] error.
const LITERAL_OUT_OF_RANGE: &str = "numeric literal out of range: ";

/// A literal its type cannot hold (`128Y`): Spark refuses it while parsing, with
/// `INVALID_NUMERIC_LITERAL_RANGE` (22003) rather than a syntax error.
pub fn numeric_literal_out_of_range(message: String) -> ParserError {
    ParserError::ParserError(format!("{LITERAL_OUT_OF_RANGE}{message}"))
}

impl From<ParserError> for SqlError {
    fn from(e: ParserError) -> Self {
        let text = match e {
            ParserError::ParserError(m) if m.starts_with(LITERAL_OUT_OF_RANGE) => return SqlError::new("22003", m),
            ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
            ParserError::RecursionLimitExceeded => {
                return SqlError::new("54001", "statement is too deeply nested");
            }
        };
        SqlError::syntax(format!("syntax error: {text}"))
    }
}

impl From<rusqlite::Error> for SqlError {
    fn from(e: rusqlite::Error) -> Self {
        SqlError::internal(format!("metastore: {e}"))
    }
}

impl From<std::io::Error> for SqlError {
    fn from(e: std::io::Error) -> Self {
        SqlError::storage("could not access table files", &e)
    }
}

/// The object store's failure under `e`, if one caused it: in its chain of sources, or
/// carried inside an I/O error there.
fn object_store_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a object_store::Error> {
    let mut current = Some(e);
    while let Some(error) = current {
        let carried = error.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()).map(|inner| inner as _);
        for candidate in [Some(error), carried].into_iter().flatten() {
            if let Some(store) = candidate.downcast_ref::<object_store::Error>() {
                return Some(store);
            }
        }
        current = error.source();
    }
    None
}

/// The operating system's error at the root of `e`, if there is one.
pub fn io_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut current = Some(e);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        current = error.source();
    }
    None
}

impl From<ArrowError> for SqlError {
    fn from(e: ArrowError) -> Self {
        arrow_error(&e)
    }
}

impl From<DataFusionError> for SqlError {
    fn from(e: DataFusionError) -> Self {
        datafusion_error(&e)
    }
}

/// A failure inside DataFusion's execution (a function, an operator) that must reach the
/// client with its own SQLSTATE: `From<DataFusionError>` finds it again.
impl From<SqlError> for DataFusionError {
    fn from(e: SqlError) -> Self {
        DataFusionError::External(Box::new(e))
    }
}

impl From<&DataFusionError> for SqlError {
    fn from(e: &DataFusionError) -> Self {
        datafusion_error(e)
    }
}

/// Read by reference: an error every partition of an exchange saw arrives `Shared`, and
/// must get the SQLSTATE it would have had alone.
fn arrow_error(e: &ArrowError) -> SqlError {
    match e {
        ArrowError::DivideByZero => SqlError::divide_by_zero(),
        ArrowError::ArithmeticOverflow(m) => SqlError::new("22003", format!("numeric value out of range: {m}")),
        ArrowError::CastError(m) if m.contains("Can't cast value") || m.contains("overflow") => {
            SqlError::new("22003", format!("numeric value out of range: {m}"))
        }
        ArrowError::CastError(m) | ArrowError::ParseError(m) => cast_invalid_input(m),
        ArrowError::ComputeError(m) | ArrowError::InvalidArgumentError(m)
            if m.contains("Overflow") || m.contains("overflow") =>
        {
            SqlError::new("22003", format!("numeric value out of range: {m}"))
        }
        ArrowError::InvalidArgumentError(m) if m.contains("too large to store in a Decimal") => {
            SqlError::new("22003", format!("[NUMERIC_VALUE_OUT_OF_RANGE] {m}"))
        }
        ArrowError::InvalidArgumentError(m) => SqlError::invalid_parameter(m.clone()),
        ArrowError::ExternalError(inner) => external_error(inner.as_ref()),
        ArrowError::IoError(m, e) => SqlError::storage(m, e),
        other => unclassified(other.to_string()),
    }
}

/// Spark's CAST_INVALID_INPUT (22018) for a string no cast could read, named as Spark names
/// the value and the type; Arrow's message where it names neither.
fn cast_invalid_input(message: &str) -> SqlError {
    let quoted = |m: &str| -> Option<(String, String)> {
        let start = m.find('\'')? + 1;
        let end = start + m[start..].find('\'')?;
        Some((m[start..end].to_string(), m[end + 1..].to_string()))
    };
    let spark = quoted(message).and_then(|(value, rest)| {
        let target = match rest.strip_prefix(" to value of ").and_then(|t| t.strip_suffix(" type")) {
            Some(arrow_type) => spark_type_name(arrow_type)?,
            None if message.starts_with("Error parsing timestamp") => "TIMESTAMP".to_string(),
            None => return None,
        };
        Some((value, target))
    });
    match spark {
        Some((value, target)) => malformed_string(&value, &target),
        None => SqlError::new("22018", format!("invalid input: {message}")),
    }
}

/// Spark's CAST_INVALID_INPUT (22018): the string `value` is no `target` (Spark's type name).
pub fn malformed_string(value: &str, target: &str) -> SqlError {
    SqlError::new(
        "22018",
        format!(
            "[CAST_INVALID_INPUT] The value '{value}' of the type \"STRING\" cannot be cast to \"{target}\" because it is malformed. Correct the value as per the syntax, or change its target type. Use `try_cast` to tolerate malformed input and return NULL instead."
        ),
    )
}

/// What a client is told of a feature DataFusion lacks. Its SQL planner names some by their
/// keywords alone ("CLUSTER BY"), and `DISTRIBUTE BY` reaches its physical planner as a
/// repartitioning it cannot run ("... does not support DistributeBy partitioning").
fn unsupported_feature(message: &str) -> String {
    if message.contains("DistributeBy") {
        return "DISTRIBUTE BY is not supported".into();
    }
    let keywords = !message.is_empty() && message.chars().all(|c| c.is_ascii_uppercase() || c == ' ');
    if keywords { format!("{message} is not supported") } else { message.to_string() }
}

/// Spark's DATATYPE_MISMATCH (42K09) for a cast between types no value of which converts,
/// which Spark refuses while analysing the query, from DataFusion's "Unsupported CAST from
/// Date32 to Float32".
fn unsupported_cast(message: &str) -> Option<SqlError> {
    let rest = message
        .strip_prefix("Unsupported CAST from ")
        .or_else(|| message.strip_prefix("Unsupported TRY_CAST from "))?;
    let (from, to) = rest.split_once(" to ")?;
    Some(cast_type_mismatch("CAST_WITHOUT_SUGGESTION", from, to))
}

/// Spark's DATATYPE_MISMATCH (42K09) of subclass `subclass` for a cast from `from` to `to`,
/// Arrow types as Arrow prints them.
pub fn cast_type_mismatch(subclass: &str, from: &str, to: &str) -> SqlError {
    let name = |t: &str| spark_type_name(t).unwrap_or_else(|| t.to_uppercase());
    SqlError::new(
        "42K09",
        format!(
            "[DATATYPE_MISMATCH.{subclass}] Cannot resolve the cast due to data type mismatch: cannot cast \"{}\" to \"{}\".",
            name(from),
            name(to)
        ),
    )
}

/// Spark's name of an Arrow type as Arrow's messages print it.
fn spark_type_name(arrow_type: &str) -> Option<String> {
    Some(match arrow_type {
        "Int8" => "TINYINT".to_string(),
        "Int16" => "SMALLINT".to_string(),
        "Int32" => "INT".to_string(),
        "Int64" => "BIGINT".to_string(),
        "Float32" => "FLOAT".to_string(),
        "Float64" => "DOUBLE".to_string(),
        "Boolean" => "BOOLEAN".to_string(),
        "Date32" | "Date64" => "DATE".to_string(),
        t if t.starts_with("Timestamp") => "TIMESTAMP".to_string(),
        t => {
            let digits = t.strip_prefix("Decimal128(")?.strip_suffix(')')?;
            format!("DECIMAL({})", digits.replace(' ', ""))
        }
    })
}

fn external_error(inner: &(dyn std::error::Error + Send + Sync + 'static)) -> SqlError {
    if let Some(sql) = inner.downcast_ref::<SqlError>() {
        sql.clone()
    } else if let Some(df) = inner.downcast_ref::<DataFusionError>() {
        datafusion_error(df)
    } else if let Some(arrow) = inner.downcast_ref::<ArrowError>() {
        arrow_error(arrow)
    } else if let Some(store) = object_store_cause(inner) {
        SqlError::object_store("could not read table files", store)
    } else {
        unclassified(inner.to_string())
    }
}

fn datafusion_error(e: &DataFusionError) -> SqlError {
    use datafusion::common::SchemaError;
    match e {
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => datafusion_error(inner),
        DataFusionError::Shared(inner) => datafusion_error(inner),
        // Several errors of one statement (each unknown column, say): the first one speaks.
        DataFusionError::Collection(errors) if !errors.is_empty() => datafusion_error(&errors[0]),
        DataFusionError::External(inner) => external_error(inner.as_ref()),
        DataFusionError::ArrowError(inner, _) => arrow_error(inner),
        DataFusionError::SQL(inner, _) => SqlError::from(inner.as_ref().clone()),
        DataFusionError::SchemaError(inner, _) => match inner.as_ref() {
            SchemaError::FieldNotFound { field, .. } => {
                SqlError::undefined_column(format!("column \"{}\" does not exist", field.name()))
            }
            SchemaError::AmbiguousReference { field } => {
                SqlError::new("42702", format!("column reference \"{}\" is ambiguous", field.name()))
            }
            SchemaError::DuplicateQualifiedField { .. } | SchemaError::DuplicateUnqualifiedField { .. } => {
                SqlError::duplicate_column(inner.to_string())
            }
        },
        DataFusionError::NotImplemented(m) => match unsupported_cast(m) {
            Some(refused) => refused,
            None => SqlError::feature_not_supported(unsupported_feature(m)),
        },
        DataFusionError::Plan(m) => plan_error(m.clone()),
        DataFusionError::Configuration(m) => SqlError::invalid_parameter(m.clone()),
        DataFusionError::Execution(m) => execution_error(m.clone()),
        DataFusionError::ExecutionJoin(e) => SqlError::internal(e.to_string()),
        DataFusionError::ResourcesExhausted(m) => SqlError::new("53200", m.clone()),
        // Operators that cannot spill further report running out of memory this way.
        DataFusionError::Internal(m) if m.contains("Resources exhausted") || m.contains("Not enough memory") => {
            SqlError::new("53200", format!("out of memory: {m}"))
        }
        DataFusionError::IoError(e) => SqlError::storage("could not access table files", e),
        DataFusionError::ParquetError(e) => parquet_failure(e, "could not read table files", "parquet"),
        DataFusionError::ObjectStore(e) => SqlError::object_store("could not read table files", e),
        other => unclassified(other.to_string()),
    }
}

/// A Parquet reader's or writer's failure, with the SQLSTATE of its cause: the object store
/// (told of as `store_context`), the operating system, or one of ours carried through it.
pub fn parquet_failure(e: &ParquetError, store_context: &str, context: &str) -> SqlError {
    if let ParquetError::External(inner) = e
        && let Some(ours) = inner.downcast_ref::<SqlError>()
    {
        return ours.clone();
    }
    match (object_store_cause(e), io_cause(e)) {
        (Some(store), _) => SqlError::object_store(store_context, store),
        (None, Some(io)) => SqlError::storage(context, io),
        (None, None) => SqlError::io(format!("{context}: {e}")),
    }
}

/// An error no variant classifies, told apart by its text where a client can act on it: a
/// pattern the regex engine refuses (from `~`, `RLIKE`, `regexp_*` alike) is the user's
/// mistake, `2201B` as in PostgreSQL, not an internal error.
fn unclassified(message: String) -> SqlError {
    if message.contains("regex parse error")
        || message.contains("Regular expression did not compile")
        || message.contains("exceeds size limit")
    {
        SqlError::new("2201B", format!("invalid regular expression: {message}"))
    } else {
        SqlError::internal(message)
    }
}

/// DataFusion reports most semantic mistakes as plan errors with a free-form text; the
/// ones clients act on are told apart by it.
fn plan_error(message: String) -> SqlError {
    let lower = message.to_lowercase();
    if lower.contains("table") && lower.contains("not found") {
        SqlError::undefined_table(message)
    } else if lower.contains("no field named") || lower.contains("column") && lower.contains("not found") {
        SqlError::undefined_column(message)
    } else if lower.contains("function") && (lower.contains("not found") || lower.contains("invalid function")) {
        SqlError::new("42883", message)
    } else if lower.contains("divide by zero") || lower.contains("division by zero") {
        SqlError::divide_by_zero()
    } else if lower.contains("cannot") && lower.contains("cast")
        || lower.contains("coerc")
        || lower.contains("compatible types")
    {
        SqlError::datatype_mismatch(message)
    } else if lower.contains("must be in group by") || lower.contains("must appear in the group by") {
        SqlError::new("42803", message)
    } else {
        SqlError::new("42000", message)
    }
}

fn execution_error(message: String) -> SqlError {
    let lower = message.to_lowercase();
    if let Some(text) = message.strip_prefix("Error parsing timestamp from '").and_then(|rest| rest.split('\'').next())
        && lower.contains("using format")
    {
        // `to_date` or `to_timestamp` with a pattern the text does not follow.
        SqlError::new(
            "22007",
            format!(
                "[CANNOT_PARSE_TIMESTAMP] Text '{text}' could not be parsed. Use `try_to_timestamp` to tolerate invalid input string and return NULL instead."
            ),
        )
    } else if lower.contains("divide by zero") || lower.contains("division by zero") {
        SqlError::divide_by_zero()
    } else if lower.contains("overflow") {
        SqlError::new("22003", format!("numeric value out of range: {message}"))
    } else if lower.contains("coercion failed") {
        // A function's own check of its argument types (`2.5D div 2`), found while planning.
        SqlError::datatype_mismatch(message)
    } else if lower.contains("cast") || lower.contains("parse") {
        SqlError::new("22P02", message)
    } else {
        SqlError::new("22023", message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_store_failures_keep_their_kind_through_io_errors() {
        let denied = object_store::Error::PermissionDenied { path: "k".into(), source: "403 Forbidden".into() };
        assert_eq!(SqlError::storage("could not write parquet", &std::io::Error::other(denied)).code, "42501");
        let missing = object_store::Error::NotFound { path: "k".into(), source: "404".into() };
        assert_eq!(datafusion_error(&DataFusionError::ObjectStore(Box::new(missing))).code, "58P01");
        let down = object_store::Error::Generic { store: "S3", source: "connection refused".into() };
        assert_eq!(SqlError::storage("could not write parquet", &std::io::Error::other(down)).code, "58030");
    }

    #[test]
    fn datafusion_errors_get_postgres_sqlstates() {
        let div = DataFusionError::ArrowError(Box::new(ArrowError::DivideByZero), None);
        assert_eq!(SqlError::from(div).code, "22012");
        let missing = DataFusionError::Plan("table 'spark_catalog.default.nope' not found".into());
        assert_eq!(SqlError::from(missing).code, "42P01");
        let wrapped = DataFusionError::Context(
            "while planning".into(),
            Box::new(DataFusionError::NotImplemented("LATERAL".into())),
        );
        let wrapped = SqlError::from(wrapped);
        assert_eq!((wrapped.code, wrapped.message.as_str()), ("0A000", "LATERAL is not supported"));
        let ours = DataFusionError::External(Box::new(SqlError::duplicate_table("t exists")));
        assert_eq!(SqlError::from(ours).code, "42P07");
        let unknown = |name: &str| {
            DataFusionError::SchemaError(
                Box::new(datafusion::common::SchemaError::FieldNotFound {
                    field: Box::new(datafusion::common::Column::from_name(name)),
                    valid_fields: Vec::new(),
                }),
                Box::new(None),
            )
        };
        let collection = DataFusionError::Collection(vec![unknown("a"), unknown("s")]);
        let error = SqlError::from(collection);
        assert_eq!((error.code, error.message.as_str()), ("42703", "column \"a\" does not exist"));
    }

    #[test]
    fn errors_shared_across_an_exchange_keep_their_sqlstate() {
        let cast = |m: &str| {
            let arrow = DataFusionError::ArrowError(Box::new(ArrowError::CastError(m.into())), None);
            SqlError::from(DataFusionError::Shared(std::sync::Arc::new(arrow))).code
        };
        assert_eq!(cast("Cannot cast string 'Zed' to value of Int32 type"), "22018");
        assert_eq!(cast("Can't cast value -6211183224 to type Int32"), "22003");
        let shared_sql = DataFusionError::Shared(std::sync::Arc::new(DataFusionError::External(Box::new(
            SqlError::new("53200", "out of memory"),
        ))));
        assert_eq!(SqlError::from(shared_sql).code, "53200");
    }

    /// Spark 4.3's messages for `CAST('abc' AS INT)`, `CAST('x' AS DECIMAL(5,1))`,
    /// `CAST('abc' AS BOOLEAN)` and `CAST('2024-13-01' AS TIMESTAMP)`.
    #[test]
    fn a_string_no_cast_reads_is_sparks_cast_invalid_input() {
        let cast = |m: &str| SqlError::from(ArrowError::CastError(m.into()));
        let error = cast("Cannot cast string 'abc' to value of Int32 type");
        assert_eq!(error.code, "22018");
        assert_eq!(
            error.message,
            "[CAST_INVALID_INPUT] The value 'abc' of the type \"STRING\" cannot be cast to \"INT\" because it is malformed. Correct the value as per the syntax, or change its target type. Use `try_cast` to tolerate malformed input and return NULL instead."
        );
        let target = |m: &str| cast(m).message.split('"').nth(3).map(str::to_string);
        assert_eq!(target("Cannot cast string 'x' to value of Decimal128(5, 1) type").as_deref(), Some("DECIMAL(5,1)"));
        assert_eq!(target("Cannot cast value 'abc' to value of Boolean type").as_deref(), Some("BOOLEAN"));
        let timestamp = SqlError::from(ArrowError::ParseError(
            "Error parsing timestamp from '2024-13-01': error parsing date".into(),
        ));
        assert!(
            timestamp.message.contains("The value '2024-13-01' of the type \"STRING\" cannot be cast to \"TIMESTAMP\"")
        );
        assert_eq!(cast("Cannot cast to something else").code, "22018");
    }

    #[test]
    fn parser_errors_are_syntax_errors() {
        let e = SqlError::from(ParserError::ParserError("Expected: an SQL statement".into()));
        assert_eq!(e.code, "42601");
    }
}

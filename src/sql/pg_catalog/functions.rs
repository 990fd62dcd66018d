//! The functions PostgreSQL clients call in their catalog and session queries.
//!
//! Lookups (`pg_table_is_visible`, `obj_description`, `to_regclass`, ...) read the same
//! relations as the catalog views, at each call. Functions about objects bucketsql does
//! not have (indexes, constraints, views' SQL) answer NULL, as PostgreSQL does for an OID
//! that names nothing. Every connection is the superuser, so privilege checks are true.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, Int64Array, ListBuilder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Int64Type};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};
use datafusion::prelude::SessionContext;

use super::oids::*;
use super::scan::{Relation, Scan};
use super::settings::Settings;
use super::types;
use super::views::catalog_relations;
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::catalog::metastore::Metastore;
use crate::config;
use crate::error::SqlError;
use crate::sql::activity::Backend;
use crate::sql::statement_stats::StatementStats;

/// What `version()` answers: PostgreSQL's shape, so that clients parsing it (SQLAlchemy's
/// `PostgreSQL (\d+)\.?(\d+)?`) read the version the server reports at startup.
pub fn version() -> String {
    format!(
        "PostgreSQL 16.6 (bucketsql {}) on {}-{}, compiled by rustc, {}-bit",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::env::consts::OS,
        usize::BITS
    )
}

/// Registers the catalog functions on a session, and `settings` where `pg_settings` reads it.
/// `backend` is the session's connection, whose pid `pg_backend_pid()` answers.
/// `stats` are the figures `pg_stat_statements_reset()` clears.
pub fn register_functions(
    ctx: &mut SessionContext,
    metastore: Arc<Metastore>,
    settings: Settings,
    backend: Arc<Backend>,
    stats: Arc<StatementStats>,
) -> Result<()> {
    ctx.state_ref().write().config_mut().set_extension(Arc::new(settings.clone()));
    for function in functions(metastore, settings, backend, stats) {
        ctx.register_udf(function);
    }
    Ok(())
}

type Body = dyn Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync;

/// A function taking any argument types (each body casts what it reads), so that the
/// int4 OIDs, int8 literals and `'16384'` strings clients pass all work.
struct PgFunction {
    name: &'static str,
    signature: Signature,
    returns: DataType,
    body: Box<Body>,
}

impl fmt::Debug for PgFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgFunction({})", self.name)
    }
}

impl PartialEq for PgFunction {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PgFunction {}

impl Hash for PgFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl ScalarUDFImpl for PgFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(self.returns.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        let arrays = args.args.iter().map(|a| a.to_array(rows)).collect::<Result<Vec<_>>>()?;
        Ok(ColumnarValue::Array((self.body)(&arrays, rows)?))
    }
}

fn function(
    name: &'static str,
    arities: &[usize],
    volatility: Volatility,
    returns: DataType,
    body: impl Fn(&[ArrayRef], usize) -> Result<ArrayRef> + Send + Sync + 'static,
) -> ScalarUDF {
    let signatures =
        arities.iter().map(|&n| if n == 0 { TypeSignature::Nullary } else { TypeSignature::Any(n) }).collect();
    ScalarUDF::new_from_impl(PgFunction {
        name,
        signature: Signature::one_of(signatures, volatility),
        returns,
        body: Box::new(body),
    })
}

fn ints(array: &ArrayRef) -> Result<Int32Array> {
    Ok(cast(array, &DataType::Int32)?.as_primitive::<Int32Type>().clone())
}

fn texts(array: &ArrayRef) -> Result<StringArray> {
    Ok(cast(array, &DataType::Utf8)?.as_string::<i32>().clone())
}

fn bools(array: &ArrayRef) -> Result<BooleanArray> {
    Ok(cast(array, &DataType::Boolean)?.as_boolean().clone())
}

/// The `i`th argument as OIDs, one per row.
fn oids(args: &[ArrayRef], i: usize) -> Result<Vec<Option<i32>>> {
    Ok(ints(&args[i])?.iter().collect())
}

fn text_array(values: impl IntoIterator<Item = Option<String>>) -> ArrayRef {
    Arc::new(values.into_iter().collect::<StringArray>())
}

fn constant_text(name: &'static str, value: String) -> ScalarUDF {
    function(name, &[0], Volatility::Stable, DataType::Utf8, move |_, rows| {
        Ok(text_array(vec![Some(value.clone()); rows]))
    })
}

/// `NULL` of the given type for every row: objects of this kind do not exist.
fn nothing(name: &'static str, arities: &[usize], returns: DataType) -> ScalarUDF {
    let null_type = returns.clone();
    function(name, arities, Volatility::Stable, returns, move |_, rows| {
        Ok(datafusion::arrow::array::new_null_array(&null_type, rows))
    })
}

fn always_true(name: &'static str, arities: &[usize]) -> ScalarUDF {
    function(name, arities, Volatility::Stable, DataType::Boolean, |_, rows| {
        Ok(Arc::new(BooleanArray::from(vec![true; rows])))
    })
}

/// Maps each row's OID argument through `f` over the current relations.
fn per_relation<T>(
    metastore: &Arc<Metastore>,
    args: &[ArrayRef],
    f: impl Fn(&Scan, i32, usize) -> Result<Option<T>>,
) -> Result<Vec<Option<T>>> {
    let scan = Scan::new(metastore, None, catalog_relations);
    oids(args, 0)?.into_iter().enumerate().map(|(row, oid)| oid.map_or(Ok(None), |oid| f(&scan, oid, row))).collect()
}

fn functions(
    metastore: Arc<Metastore>,
    settings: Settings,
    backend: Arc<Backend>,
    stats: Arc<StatementStats>,
) -> Vec<ScalarUDF> {
    let text = DataType::Utf8;
    let oid = DataType::Int32;
    let list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    let mut all = vec![
        constant_text("version", version()),
        constant_text("current_database", DATABASE_NAME.to_string()),
        constant_text("current_catalog", DATABASE_NAME.to_string()),
        constant_text("current_schema", DEFAULT_SCHEMA.to_string()),
        constant_text("current_user", SUPERUSER.to_string()),
        constant_text("current_role", SUPERUSER.to_string()),
        constant_text("session_user", SUPERUSER.to_string()),
        function("current_schemas", &[1], Volatility::Stable, list, |args, _| {
            let mut builder = ListBuilder::new(StringBuilder::new());
            for implicit in bools(&args[0])?.iter() {
                match implicit {
                    Some(implicit) => {
                        if implicit {
                            builder.values().append_value(PG_CATALOG);
                        }
                        builder.values().append_value(DEFAULT_SCHEMA);
                        builder.append(true);
                    }
                    None => builder.append(false),
                }
            }
            Ok(Arc::new(builder.finish()))
        }),
        // The pid of BackendKeyData and `pg_stat_activity`; NULL in a session no client opened.
        function("pg_backend_pid", &[0], Volatility::Stable, DataType::Int32, move |_, rows| {
            Ok(Arc::new(Int32Array::from(vec![backend.login().map(|login| login.pid); rows])))
        }),
        // PostgreSQL 16's returns void, which reads as an empty text.
        function("pg_stat_statements_reset", &[0], Volatility::Volatile, text.clone(), move |_, rows| {
            stats.reset();
            Ok(text_array((0..rows).map(|_| Some(String::new()))))
        }),
        function("pg_is_in_recovery", &[0], Volatility::Stable, DataType::Boolean, |_, rows| {
            Ok(Arc::new(BooleanArray::from(vec![false; rows])))
        }),
        function("format_type", &[2], Volatility::Immutable, text.clone(), |args, _| {
            let typmods = ints(&args[1])?;
            Ok(text_array(oids(args, 0)?.into_iter().enumerate().map(|(i, oid)| {
                oid.map(|oid| {
                    types::format_type(oid, typmods.is_valid(i).then(|| typmods.value(i)))
                        .unwrap_or_else(|| "???".into())
                })
            })))
        }),
        // Expressions are kept as their SQL text, so decompiling one is reading it.
        function("pg_get_expr", &[2, 3], Volatility::Stable, text.clone(), |args, _| Ok(Arc::new(texts(&args[0])?))),
        function("pg_get_userbyid", &[1], Volatility::Stable, text.clone(), |args, _| {
            Ok(text_array(oids(args, 0)?.into_iter().map(|oid| {
                oid.map(|oid| if oid == SUPERUSER_OID { SUPERUSER.to_string() } else { format!("unknown (OID={oid})") })
            })))
        }),
        function("pg_encoding_to_char", &[1], Volatility::Stable, text.clone(), |args, _| {
            Ok(text_array(
                oids(args, 0)?.into_iter().map(|e| e.map(|e| if e == UTF8_ENCODING { "UTF8" } else { "" }.to_string())),
            ))
        }),
        // BIGINT, not PostgreSQL's int4: DataFusion's `generate_series` takes BIGINT arguments.
        function("array_upper", &[2], Volatility::Immutable, DataType::Int64, |args, _| array_bound(args, true)),
        function("array_lower", &[2], Volatility::Immutable, DataType::Int64, |args, _| array_bound(args, false)),
        function("current_setting", &[1, 2], Volatility::Stable, text.clone(), {
            let settings = settings.clone();
            move |args, _| {
                let names = texts(&args[0])?;
                let missing_ok = args.get(1).map(bools).transpose()?;
                let values = names.iter().enumerate().map(|(i, name)| {
                    let Some(name) = name else { return Ok(None) };
                    match settings.get(name) {
                        Some(value) => Ok(Some(value)),
                        None if missing_ok.as_ref().is_some_and(|m| m.value(i)) => Ok(None),
                        None => {
                            Err(SqlError::new("42704", format!("unrecognized configuration parameter \"{name}\""))
                                .into())
                        }
                    }
                });
                Ok(text_array(values.collect::<Result<Vec<_>>>()?))
            }
        }),
        function("set_config", &[3], Volatility::Volatile, text.clone(), move |args, _| {
            let (names, values) = (texts(&args[0])?, texts(&args[1])?);
            let mut out = Vec::with_capacity(names.len());
            for (name, value) in names.iter().zip(values.iter()) {
                if let (Some(name), Some(value)) = (name, value) {
                    config::validate(&name.to_lowercase(), value)
                        .map_err(|e| DataFusionError::External(Box::new(e)))?;
                    settings.lock().insert(name.to_lowercase(), value.to_string());
                }
                out.push(value.map(str::to_string));
            }
            Ok(text_array(out))
        }),
        function("pg_table_is_visible", &[1], Volatility::Stable, DataType::Boolean, {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let visible =
                    per_relation(&metastore, args, |scan, oid, _| Ok(scan.relation(oid)?.map(Relation::visible)))?;
                Ok(Arc::new(BooleanArray::from(visible)))
            }
        }),
        function("obj_description", &[1, 2], Volatility::Stable, text.clone(), {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let catalogs = args.get(1).map(texts).transpose()?;
                let comments = per_relation(&metastore, args, |scan, oid, row| {
                    if catalogs.as_ref().is_some_and(|c| c.is_null(row) || c.value(row) != "pg_class") {
                        return Ok(None);
                    }
                    Ok(scan.relation(oid)?.and_then(|r| r.comment.clone()))
                })?;
                Ok(text_array(comments))
            }
        }),
        function("col_description", &[2], Volatility::Stable, text.clone(), {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let numbers = ints(&args[1])?;
                let comments = per_relation(&metastore, args, |scan, oid, row| {
                    let column = usize::try_from(numbers.value(row) - 1).ok().filter(|_| numbers.is_valid(row));
                    Ok(scan.relation(oid)?.zip(column).and_then(|(r, c)| r.columns.get(c)?.comment.clone()))
                })?;
                Ok(text_array(comments))
            }
        }),
        function("regclassout", &[1], Volatility::Stable, text.clone(), {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let names = per_relation(&metastore, args, |scan, oid, _| {
                    Ok(Some(scan.relation(oid)?.map_or_else(|| oid.to_string(), Relation::qualified_name)))
                })?;
                Ok(text_array(names))
            }
        }),
        function("to_regclass", &[1], Volatility::Stable, oid.clone(), {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let scan = Scan::new(&metastore, None, catalog_relations);
                let relations = scan.relations()?;
                let names = texts(&args[0])?;
                Ok(Arc::new(
                    names.iter().map(|name| name.and_then(|n| find_relation(relations, n))).collect::<Int32Array>(),
                ))
            }
        }),
        function("regnamespaceout", &[1], Volatility::Stable, text.clone(), {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let scan = Scan::new(&metastore, None, catalog_relations);
                let schemas = scan.schemas()?;
                Ok(text_array(oids(args, 0)?.into_iter().map(|oid| {
                    oid.map(|oid| {
                        schemas.iter().find(|s| schema_oid(s) == oid).map_or_else(|| oid.to_string(), |s| s.to_string())
                    })
                })))
            }
        }),
        function("to_regnamespace", &[1], Volatility::Stable, oid.clone(), {
            let metastore = Arc::clone(&metastore);
            move |args, _| {
                let scan = Scan::new(&metastore, None, catalog_relations);
                let schemas = scan.schemas()?;
                let names = texts(&args[0])?;
                let oids = names.iter().map(|name| {
                    let name = unquote(name?);
                    schemas.iter().find(|s| **s == name).map(|s| schema_oid(s))
                });
                Ok(Arc::new(oids.collect::<Int32Array>()))
            }
        }),
        function("regtypeout", &[1], Volatility::Immutable, text.clone(), |args, _| {
            Ok(text_array(
                oids(args, 0)?
                    .into_iter()
                    .map(|oid| oid.map(|oid| types::format_type(oid, None).unwrap_or_else(|| oid.to_string()))),
            ))
        }),
        function("to_regtype", &[1], Volatility::Immutable, oid.clone(), |args, _| {
            Ok(Arc::new(texts(&args[0])?.iter().map(|name| name.and_then(types::parse_type)).collect::<Int32Array>()))
        }),
        function("pg_relation_size", &[1, 2], Volatility::Stable, DataType::Int64, {
            let metastore = Arc::clone(&metastore);
            move |args, _| relation_sizes(&metastore, args)
        }),
        function("pg_table_size", &[1], Volatility::Stable, DataType::Int64, {
            let metastore = Arc::clone(&metastore);
            move |args, _| relation_sizes(&metastore, args)
        }),
        function("pg_total_relation_size", &[1], Volatility::Stable, DataType::Int64, {
            let metastore = Arc::clone(&metastore);
            move |args, _| relation_sizes(&metastore, args)
        }),
        function("pg_database_size", &[1], Volatility::Stable, DataType::Int64, {
            let metastore = Arc::clone(&metastore);
            move |_, rows| {
                let scan = Scan::new(&metastore, None, catalog_relations);
                let total: u64 = scan.relations()?.iter().map(|r| r.bytes).sum();
                Ok(Arc::new(Int64Array::from(vec![total as i64; rows])))
            }
        }),
        // bucketsql has no logical replication.
        function("pg_relation_is_publishable", &[1], Volatility::Stable, DataType::Boolean, |_, rows| {
            Ok(Arc::new(BooleanArray::from(vec![false; rows])))
        }),
        function(
            "json_build_object",
            &[0, 2, 4, 6, 8, 10, 12, 14, 16],
            Volatility::Stable,
            text.clone(),
            |args, rows| {
                let keys = args.iter().step_by(2).map(texts).collect::<Result<Vec<_>>>()?;
                let objects = (0..rows).map(|row| {
                    let fields = keys.iter().zip(args.iter().skip(1).step_by(2)).map(|(key, value)| {
                        let key = if key.is_null(row) { "null".to_string() } else { json_string(key.value(row)) };
                        Ok(format!("{key} : {}", json_value(value, row)?))
                    });
                    Ok(Some(format!("{{{}}}", fields.collect::<Result<Vec<_>>>()?.join(", "))))
                });
                Ok(text_array(objects.collect::<Result<Vec<_>>>()?))
            },
        ),
        function("pg_size_pretty", &[1], Volatility::Immutable, text.clone(), |args, _| {
            let sizes = cast(&args[0], &DataType::Int64)?;
            Ok(text_array(sizes.as_primitive::<Int64Type>().iter().map(|s| s.map(size_pretty))))
        }),
        // The data directory is the one tablespace.
        function("pg_tablespace_location", &[1], Volatility::Stable, text.clone(), |_, rows| {
            Ok(text_array(vec![Some(String::new()); rows]))
        }),
        nothing("shobj_description", &[2], text.clone()),
        nothing("pg_get_function_arguments", &[1], text.clone()),
        nothing("pg_get_function_identity_arguments", &[1], text.clone()),
        nothing("pg_get_function_result", &[1], text.clone()),
        nothing("pg_get_indexdef", &[1, 3], text.clone()),
        nothing("pg_get_constraintdef", &[1, 2], text.clone()),
        nothing("pg_get_viewdef", &[1, 2], text.clone()),
        nothing("pg_get_triggerdef", &[1, 2], text.clone()),
        nothing("pg_get_ruledef", &[1, 2], text.clone()),
        nothing("pg_get_partkeydef", &[1], text.clone()),
        nothing("pg_get_statisticsobjdef_columns", &[1], text.clone()),
        nothing("pg_get_serial_sequence", &[2], text),
    ];
    for name in ["pg_type_is_visible", "pg_function_is_visible", "pg_collation_is_visible"] {
        all.push(always_true(name, &[1]));
    }
    for name in [
        "has_table_privilege",
        "has_schema_privilege",
        "has_database_privilege",
        "has_any_column_privilege",
        "has_column_privilege",
        "has_function_privilege",
        "has_sequence_privilege",
    ] {
        all.push(always_true(name, &[2, 3, 4]));
    }
    all
}

/// `array_upper` / `array_lower` of a one-dimensional array: NULL when empty or not
/// dimension 1, as in PostgreSQL.
fn array_bound(args: &[ArrayRef], upper: bool) -> Result<ArrayRef> {
    let dims = ints(&args[1])?;
    let list = &args[0];
    let lens: Vec<Option<i64>> = match list.data_type() {
        DataType::List(_) => list.as_list::<i32>().iter().map(|a| a.map(|a| a.len() as i64)).collect(),
        DataType::LargeList(_) => list.as_list::<i64>().iter().map(|a| a.map(|a| a.len() as i64)).collect(),
        DataType::Null => vec![None; list.len()],
        other => {
            return Err(DataFusionError::Plan(format!(
                "array_{} needs an array, not {other}",
                if upper { "upper" } else { "lower" }
            )));
        }
    };
    let bounds = lens.into_iter().zip(dims.iter()).map(|(len, dim)| match (len, dim) {
        (Some(len), Some(1)) if len > 0 => Some(if upper { len } else { 1 }),
        _ => None,
    });
    Ok(Arc::new(bounds.collect::<Int64Array>()))
}

fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_json_string(&mut out, text);
    out
}

/// `text` as a JSON string: quoted, with quotes, backslashes and control characters escaped.
pub(crate) fn write_json_string(out: &mut impl fmt::Write, text: &str) {
    let _ = out.write_char('"');
    for c in text.chars() {
        let _ = match c {
            '"' => out.write_str("\\\""),
            '\\' => out.write_str("\\\\"),
            '\n' => out.write_str("\\n"),
            '\r' => out.write_str("\\r"),
            '\t' => out.write_str("\\t"),
            c if u32::from(c) < 0x20 => write!(out, "\\u{:04x}", u32::from(c)),
            c => out.write_char(c),
        };
    }
    let _ = out.write_char('"');
}

/// One value of `json_build_object`: numbers and booleans as themselves, NULL as `null`,
/// anything else as its text in a JSON string.
fn json_value(array: &ArrayRef, row: usize) -> Result<String> {
    if array.is_null(row) {
        return Ok("null".to_string());
    }
    let text = datafusion::arrow::util::display::array_value_to_string(array, row)?;
    Ok(match array.data_type() {
        DataType::Boolean => text,
        dt if dt.is_numeric() => text,
        _ => json_string(&text),
    })
}

/// PostgreSQL's `pg_size_pretty`: bytes below 10 kB, then the largest unit that keeps the
/// number below 20 (kB, MB, ...), rounded half away from zero.
fn size_pretty(bytes: i64) -> String {
    const LIMIT: i64 = 10 * 1024;
    if bytes.unsigned_abs() < LIMIT as u64 {
        return format!("{bytes} bytes");
    }
    let half_rounded = |x: i64| (x + if x < 0 { -1 } else { 1 }) / 2;
    // One extra bit is kept for rounding.
    let mut size = bytes >> 9;
    for unit in ["kB", "MB", "GB", "TB"] {
        if size.abs() < LIMIT * 2 - 1 {
            return format!("{} {unit}", half_rounded(size));
        }
        size >>= 10;
    }
    format!("{} PB", half_rounded(size))
}

fn relation_sizes(metastore: &Arc<Metastore>, args: &[ArrayRef]) -> Result<ArrayRef> {
    let sizes = per_relation(metastore, args, |scan, oid, _| Ok(scan.relation(oid)?.map(|r| r.bytes as i64)))?;
    Ok(Arc::new(Int64Array::from(sizes)))
}

/// An identifier as `regclass` input spells it: quoted keeps its case, else lower-cased.
fn unquote(name: &str) -> String {
    match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => name.to_lowercase(),
    }
}

/// `to_regclass`: `name` or `schema.name`; an unqualified name is looked up on the search
/// path (`pg_catalog`, `default`).
fn find_relation(relations: &[Relation], name: &str) -> Option<i32> {
    let (schema, table) = match split_qualified(name) {
        (Some(schema), table) => (Some(unquote(schema)), unquote(table)),
        (None, table) => (None, unquote(table)),
    };
    relations
        .iter()
        .filter(|r| r.name == table)
        .find(|r| schema.as_ref().map_or_else(|| r.visible(), |s| *s == r.schema))
        .map(|r| r.oid)
}

/// Splits `schema.name` at the dot outside double quotes.
fn split_qualified(name: &str) -> (Option<&str>, &str) {
    let mut quoted = false;
    for (i, c) in name.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => return (Some(&name[..i]), &name[i + 1..]),
            _ => {}
        }
    }
    (None, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_matches_what_sqlalchemy_parses() {
        let v = version();
        assert!(v.starts_with("PostgreSQL 16.6 (bucketsql "), "{v}");
        assert!(v.ends_with("compiled by rustc, 64-bit"), "{v}");
    }

    #[test]
    fn sizes_print_as_postgresql_prints_them() {
        assert_eq!(size_pretty(8192), "8192 bytes");
        assert_eq!(size_pretty(10 * 1024), "10 kB");
        assert_eq!(size_pretty(1_500_000), "1465 kB");
        assert_eq!(size_pretty(25_000_000), "24 MB");
        // The extremes of bigint, whose absolute value does not fit one.
        assert_eq!(size_pretty(i64::MIN), "-8192 PB");
        assert_eq!(size_pretty(i64::MAX), "8192 PB");
    }

    #[test]
    fn json_values_are_quoted_by_type() {
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some("a \"q\"\n"), None]));
        let number: ArrayRef = Arc::new(Int64Array::from(vec![7]));
        assert_eq!(json_value(&text, 0).unwrap(), r#""a \"q\"\n""#);
        assert_eq!(json_value(&text, 1).unwrap(), "null");
        assert_eq!(json_value(&number, 0).unwrap(), "7");
    }

    #[test]
    fn qualified_names_split_outside_quotes() {
        assert_eq!(split_qualified("pg_catalog.pg_class"), (Some("pg_catalog"), "pg_class"));
        assert_eq!(split_qualified("\"a.b\".t"), (Some("\"a.b\""), "t"));
        assert_eq!(split_qualified("t"), (None, "t"));
        assert_eq!(unquote("\"Mixed\""), "Mixed");
        assert_eq!(unquote("Mixed"), "mixed");
    }
}

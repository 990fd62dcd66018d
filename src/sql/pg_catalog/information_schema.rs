//! The rows of `information_schema`'s relations, over the same relations `pg_catalog` shows.

use datafusion::arrow::datatypes::DataType;
use datafusion::error::Result;

use super::oids::*;
use super::scan::Scan;
use super::types;
use super::values::{Row, Value, row};

pub(super) fn information_schema_tables(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .map(|r| {
            let (kind, insertable) = if r.kind == "r" { ("BASE TABLE", "YES") } else { ("VIEW", "NO") };
            row![
                DATABASE_NAME,
                r.schema.as_str(),
                r.name.as_str(),
                kind,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                insertable,
                "NO",
                Value::Null,
            ]
        })
        .collect())
}

pub(super) fn information_schema_columns(scan: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in scan.relations()? {
        for (i, c) in r.columns.iter().enumerate() {
            let (oid, _) = types::column_type(&c.data_type);
            let (ty, array) = types::lookup(oid).expect("column types are in pg_type");
            let data_type = if array { "ARRAY".to_string() } else { ty.sql_name.to_string() };
            let (precision, radix, scale) = match (array, &c.data_type) {
                (true, _) => (None, None, None),
                (_, DataType::Decimal128(p, s)) => (Some(i32::from(*p)), Some(10), Some(i32::from(*s))),
                _ => match ty.name {
                    "int2" => (Some(16), Some(2), Some(0)),
                    "int4" => (Some(32), Some(2), Some(0)),
                    "int8" => (Some(64), Some(2), Some(0)),
                    "float4" => (Some(24), Some(2), None),
                    "float8" => (Some(53), Some(2), None),
                    _ => (None, None, None),
                },
            };
            let datetime_precision = match ty.name {
                "date" => Some(0),
                "time" | "timestamp" | "timestamptz" | "interval" if !array => Some(6),
                _ => None,
            };
            let udt_name = if array { format!("_{}", ty.name) } else { ty.name.to_string() };
            let updatable = if r.kind == "r" { "YES" } else { "NO" };
            rows.push(row![
                DATABASE_NAME,
                r.schema.as_str(),
                r.name.as_str(),
                c.name.as_str(),
                i as i32 + 1,
                Value::Null,
                if c.nullable { "YES" } else { "NO" },
                data_type,
                Value::Null,
                Value::Null,
                precision,
                radix,
                scale,
                datetime_precision,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                DATABASE_NAME,
                PG_CATALOG,
                udt_name,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                (i + 1).to_string(),
                "NO",
                "NO",
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                "NO",
                "NEVER",
                Value::Null,
                updatable,
            ]);
        }
    }
    Ok(rows)
}

pub(super) fn information_schema_schemata(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .schemas()?
        .into_iter()
        .map(|s| row![DATABASE_NAME, s, SUPERUSER, Value::Null, Value::Null, Value::Null, Value::Null])
        .collect())
}

pub(super) fn information_schema_views(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .filter(|r| r.kind == "v")
        .map(|r| {
            row![DATABASE_NAME, r.schema.as_str(), r.name.as_str(), Value::Null, "NONE", "NO", "NO", "NO", "NO", "NO"]
        })
        .collect())
}

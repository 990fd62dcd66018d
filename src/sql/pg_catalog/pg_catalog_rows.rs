//! The rows of `pg_catalog`'s relations: the metastore's schemas, tables and columns, the
//! server's types, functions and settings, and the one superuser every connection acts as.

use std::collections::BTreeSet;

use datafusion::error::Result;
use datafusion::logical_expr::Volatility;

use super::oids::*;
use super::scan::Scan;
use super::types::{self, TYPES};
use super::values::{Row, Value, row};

/// The settings `pg_settings` lists besides those the session set.
const SERVER_SETTINGS: &[&str] = &[
    "client_encoding",
    "datestyle",
    "default_transaction_isolation",
    "integer_datetimes",
    "max_identifier_length",
    "max_index_keys",
    "search_path",
    "server_encoding",
    "server_version",
    "server_version_num",
    "standard_conforming_strings",
    "statement_timeout",
    "timezone",
    "transaction_isolation",
];

pub(super) fn pg_namespace(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan.schemas()?.into_iter().map(|s| row![schema_oid(s), s, SUPERUSER_OID, Value::Null]).collect())
}

pub(super) fn pg_class(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .map(|r| {
            let table = r.kind == "r";
            row![
                r.oid,
                r.name.as_str(),
                r.namespace,
                0,
                0,
                SUPERUSER_OID,
                if table { PARQUET_AM_OID } else { 0 },
                0,
                0,
                0,
                // -1: never counted; tables know their row count exactly.
                r.rows.map_or(-1.0, |n| n as f64),
                0,
                0,
                false,
                false,
                "p",
                r.kind,
                r.columns.len() as i32,
                0,
                false,
                false,
                false,
                false,
                false,
                true,
                if table { "d" } else { "n" },
                false,
                0,
                0,
                0,
                Value::Null,
                r.options.clone(),
                Value::Null,
            ]
        })
        .collect())
}

pub(super) fn pg_attribute(scan: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in scan.relations()? {
        for (i, c) in r.columns.iter().enumerate() {
            let (oid, typmod) = types::column_type(&c.data_type);
            let (ty, array) = types::lookup(oid).expect("column types are in pg_type");
            let (len, by_value, align, storage) =
                if array { (-1, false, "i", "x") } else { (ty.len, ty.by_value, ty.align, ty.storage) };
            let collation = if ty.oid == types::TEXT { DEFAULT_COLLATION_OID } else { 0 };
            rows.push(row![
                r.oid,
                c.name.as_str(),
                oid,
                -1,
                i32::from(len),
                i as i32 + 1,
                i32::from(array),
                -1,
                typmod,
                by_value,
                align,
                storage,
                "",
                !c.nullable,
                false,
                false,
                "",
                "",
                false,
                true,
                0,
                collation,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
    }
    Ok(rows)
}

pub(super) fn pg_type(_: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for t in TYPES {
        let collation = if t.oid == types::TEXT { DEFAULT_COLLATION_OID } else { 0 };
        let (name, len, by_value, category, align, storage) =
            (t.name, i32::from(t.len), t.by_value, t.category, t.align, t.storage);
        rows.push(row![
            t.oid,
            name,
            PG_CATALOG_OID,
            SUPERUSER_OID,
            len,
            by_value,
            "b",
            category,
            t.preferred,
            true,
            ",",
            0,
            "-",
            0,
            t.array_oid,
            format!("{name}in"),
            format!("{name}out"),
            format!("{name}recv"),
            format!("{name}send"),
            "-",
            "-",
            "-",
            align,
            storage,
            false,
            0,
            -1,
            0,
            collation,
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
        let align = if t.align == "d" { "d" } else { "i" };
        rows.push(row![
            t.array_oid,
            format!("_{name}"),
            PG_CATALOG_OID,
            SUPERUSER_OID,
            -1,
            false,
            "b",
            "A",
            false,
            true,
            ",",
            0,
            "array_subscript_handler",
            t.oid,
            0,
            "array_in",
            "array_out",
            "array_recv",
            "array_send",
            "-",
            "-",
            "array_typanalyze",
            align,
            "x",
            false,
            0,
            -1,
            0,
            collation,
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
    }
    Ok(rows)
}

pub(super) fn pg_database(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![
        DATABASE_OID,
        DATABASE_NAME,
        SUPERUSER_OID,
        UTF8_ENCODING,
        "c",
        false,
        true,
        -1,
        0,
        0,
        DEFAULT_TABLESPACE_OID,
        "C",
        "C",
        Value::Null,
        Value::Null,
        Value::Null,
    ]])
}

pub(super) fn pg_settings(scan: &Scan) -> Result<Vec<Row>> {
    let Some(settings) = scan.settings() else {
        return Ok(Vec::new());
    };
    let session: BTreeSet<String> = settings.lock().keys().cloned().collect();
    let names: BTreeSet<String> =
        SERVER_SETTINGS.iter().map(|s| s.to_string()).chain(session.iter().cloned()).collect();
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let value = settings.get(&name)?;
            let source = if session.contains(&name) { "session" } else { "default" };
            Some(row![
                name,
                value,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                "user",
                "string",
                source,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                false,
            ])
        })
        .collect())
}

pub(super) fn pg_am(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![PARQUET_AM_OID, "parquet", "-", "t"]])
}

pub(super) fn pg_description(scan: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in scan.relations()? {
        if let Some(comment) = &r.comment {
            rows.push(row![r.oid, PG_CLASS_OID, 0, comment.as_str()]);
        }
        for (i, c) in r.columns.iter().enumerate() {
            if let Some(comment) = &c.comment {
                rows.push(row![r.oid, PG_CLASS_OID, i as i32 + 1, comment.as_str()]);
            }
        }
    }
    Ok(rows)
}

pub(super) fn pg_roles(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![
        SUPERUSER,
        true,
        true,
        true,
        true,
        true,
        true,
        -1,
        "********",
        Value::Null,
        true,
        Value::Null,
        SUPERUSER_OID
    ]])
}

pub(super) fn pg_user(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![SUPERUSER, SUPERUSER_OID, true, true, true, true, "********", Value::Null, Value::Null]])
}

pub(super) fn pg_authid(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![SUPERUSER_OID, SUPERUSER, true, true, true, true, true, true, true, -1, Value::Null, Value::Null]])
}

/// The session's functions: DataFusion's, Spark's and these catalog ones. Their argument and
/// result types depend on the call, so `pg_proc` leaves them unknown (0).
pub(super) fn pg_proc(scan: &Scan) -> Result<Vec<Row>> {
    let Some(state) = scan.state else {
        return Ok(Vec::new());
    };
    let volatility = |v: Volatility| match v {
        Volatility::Immutable => "i",
        Volatility::Stable => "s",
        Volatility::Volatile => "v",
    };
    let mut functions: Vec<(&str, &str, &str)> = Vec::new();
    functions
        .extend(state.scalar_functions().iter().map(|(n, f)| (n.as_str(), "f", volatility(f.signature().volatility))));
    functions.extend(
        state.aggregate_functions().iter().map(|(n, f)| (n.as_str(), "a", volatility(f.signature().volatility))),
    );
    functions
        .extend(state.window_functions().iter().map(|(n, f)| (n.as_str(), "w", volatility(f.signature().volatility))));
    functions.sort();
    functions.dedup_by_key(|f| f.0);
    Ok(functions
        .into_iter()
        .map(|(name, kind, volatile)| {
            row![
                name_oid(name),
                name,
                PG_CATALOG_OID,
                SUPERUSER_OID,
                12,
                1.0,
                0.0,
                0,
                "-",
                kind,
                false,
                false,
                false,
                false,
                volatile,
                "s",
                0,
                0,
                0,
                Vec::<i32>::new(),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                name,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        })
        .collect())
}

pub(super) fn pg_collation(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![
        row![
            DEFAULT_COLLATION_OID,
            "default",
            PG_CATALOG_OID,
            SUPERUSER_OID,
            "d",
            true,
            -1,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null
        ],
        row![950, "C", PG_CATALOG_OID, SUPERUSER_OID, "c", true, -1, "C", "C", Value::Null, Value::Null],
    ])
}

pub(super) fn pg_tablespace(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![DEFAULT_TABLESPACE_OID, "pg_default", SUPERUSER_OID, Value::Null, Value::Null]])
}

pub(super) fn pg_tables(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .filter(|r| r.kind == "r")
        .map(|r| row![r.schema.as_str(), r.name.as_str(), SUPERUSER, Value::Null, false, false, false, false])
        .collect())
}

/// The catalog views; their definition is the server's code, not SQL.
pub(super) fn pg_views(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .filter(|r| r.kind == "v")
        .map(|r| row![r.schema.as_str(), r.name.as_str(), SUPERUSER, Value::Null])
        .collect())
}

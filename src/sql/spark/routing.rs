//! Which engine runs a statement, by the session's `bucketsql.engine`:
//! - `local`: here;
//! - `spark`: queries and their EXPLAIN on Spark Connect, refused (08001) when the server has
//!   no `--spark-connect`;
//! - `auto`: on Spark when the tables a query reads hold more than
//!   `bucketsql.engine.autoThresholdBytes` of files (the metastore's sizes), else here.
//!
//! Whatever the setting, these stay here: writes, DDL and the other commands (the metastore
//! is ours), queries of `pg_catalog` and `information_schema` or of PostgreSQL's functions
//! (drivers ask them about the server they talk to), and EXPLAIN ANALYZE.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    Expr, ObjectName, Query, SetExpr, Statement, visit_expressions, visit_relations,
};

use crate::catalog::table::TableMeta;
use crate::config::EngineChoice;
use crate::error::SqlError;
use crate::sql::names::table_name;
use crate::sql::pg_catalog::oids::{INFORMATION_SCHEMA, PG_CATALOG};
use crate::sql::session::Session;

/// Where a statement runs, and why, as EXPLAIN says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub on_spark: bool,
    pub reason: String,
}

impl Route {
    fn local(reason: impl Into<String>) -> Self {
        Route { on_spark: false, reason: reason.into() }
    }

    fn spark(reason: impl Into<String>) -> Self {
        Route { on_spark: true, reason: reason.into() }
    }
}

/// PostgreSQL's functions that drivers call to learn about the server; a query using one is
/// about this server, not the data.
const SERVER_FUNCTIONS: &[&str] = &[
    "version",
    "current_schema",
    "current_schemas",
    "current_database",
    "current_catalog",
    "current_user",
    "session_user",
    "current_setting",
    "set_config",
    "obj_description",
    "col_description",
    "format_type",
    "to_regclass",
    "to_regtype",
    "txid_current",
];

/// Where `query` (a query, or the query an EXPLAIN explains) runs.
pub(crate) fn route(session: &Session, query: &Statement) -> Result<Route, SqlError> {
    let conf = session.spark_conf();
    let setting = format!("bucketsql.engine = {}", conf.engine.name());
    if conf.engine == EngineChoice::Local {
        return Ok(Route::local(setting));
    }
    if session.engine.spark.is_none() {
        return match conf.engine {
            EngineChoice::Auto => Ok(Route::local(format!("{setting}, and the server has no --spark-connect"))),
            _ => Err(SqlError::new(
                "08001",
                format!("{setting}, but the server was started without --spark-connect: SET bucketsql.engine = local"),
            )),
        };
    }
    if let Some(why) = about_the_server(query) {
        return Ok(Route::local(format!("{setting}, but the query reads {why}, which only this server has")));
    }
    if conf.engine == EngineChoice::Spark {
        return Ok(Route::spark(setting));
    }
    let tables = relations(session, query)?.tables;
    if let Some(table) = tables.iter().find(|t| t.location.local().is_none()) {
        return Ok(Route::local(format!(
            "{setting}, but `{}`.`{}` lives at {}, which Spark is not set up to read",
            table.schema, table.name, table.location
        )));
    }
    let bytes: u64 = tables.iter().flat_map(|t| &t.files).map(|f| f.byte_size).sum();
    let threshold = conf.engine_auto_threshold;
    Ok(if bytes > threshold {
        Route::spark(format!(
            "{setting}: its tables hold {bytes} bytes, over bucketsql.engine.autoThresholdBytes ({threshold})"
        ))
    } else {
        Route::local(format!(
            "{setting}: its tables hold {bytes} bytes, within bucketsql.engine.autoThresholdBytes ({threshold})"
        ))
    })
}

/// Where the query of a write (INSERT's source, CREATE TABLE … AS's query) runs; VALUES and
/// writes without a query run here.
pub(crate) fn route_write(session: &Session, source: Option<&Query>) -> Result<Route, SqlError> {
    match source {
        Some(query) if !matches!(query.body.as_ref(), SetExpr::Values(_)) => {
            route(session, &Statement::Query(Box::new(query.clone())))
        }
        _ => Ok(Route::local("the rows are given in the statement")),
    }
}

/// What in `query` only this server can answer: a catalog relation or a server function.
fn about_the_server(query: &Statement) -> Option<String> {
    let mut found = None;
    let _ = visit_relations(query, |name: &ObjectName| {
        let parts: Vec<String> = name.0.iter().filter_map(|p| p.as_ident()).map(|i| i.value.to_lowercase()).collect();
        let catalog = match parts.as_slice() {
            [schema, _] => schema == PG_CATALOG || schema == INFORMATION_SCHEMA,
            [table] => table.starts_with("pg_"),
            _ => false,
        };
        if catalog {
            found = Some(format!("the catalog relation {name}"));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    if found.is_some() {
        return found;
    }
    let _ = visit_expressions(query, |expr: &Expr| {
        if let Expr::Function(function) = expr {
            let name = function.name.0.last().and_then(|p| p.as_ident()).map(|i| i.value.to_lowercase());
            if let Some(name) = name
                && (name.starts_with("pg_") || name.starts_with("has_") || SERVER_FUNCTIONS.contains(&name.as_str()))
            {
                found = Some(format!("the server function {name}()"));
                return ControlFlow::Break(());
            }
        }
        ControlFlow::Continue(())
    });
    found
}

/// What `query` reads: the metastore's tables it names, as the session sees them, and the
/// names that are no table here (a CTE's, a dropped table's), which Spark resolves: a
/// registration Spark may still hold for one of those must go, so that Spark does not answer
/// from a dropped table's files.
pub(crate) struct Relations {
    pub tables: Vec<TableMeta>,
    pub missing: Vec<(String, String)>,
}

pub(crate) fn relations(session: &Session, query: &Statement) -> Result<Relations, SqlError> {
    let mut names = Vec::new();
    let _ = visit_relations(query, |name: &ObjectName| {
        if let Ok(name) = table_name(name)
            && !names.contains(&name)
        {
            names.push(name);
        }
        ControlFlow::<()>::Continue(())
    });
    let mut relations = Relations { tables: Vec::new(), missing: Vec::new() };
    for (schema, name) in names {
        match session.tables.table(&schema, &name)? {
            Some(table) => relations.tables.push(table),
            None => relations.missing.push((schema, name)),
        }
    }
    Ok(relations)
}

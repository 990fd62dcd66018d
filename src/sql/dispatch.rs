//! One dispatch over statement kinds: each statement goes to its command in [`commands`],
//! and the row shape of a command's answer is known before it runs, for Describe.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::ScalarValue;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast::{
    DescribeAlias, HiveDescribeFormat, Ident, Set, ShowCreateObject, ShowStatementFilter, ShowStatementFilterPosition,
    Statement,
};
use futures::StreamExt;

use super::commands::{
    add_columns, analyze_table, copy, create_table, describe_column, describe_table, drop_table, explain, insert,
    optimize, query, refresh_table, rename_table, repair_table, set_location, show_buckets, show_create_table,
    show_partitions, show_tables, table_properties, transaction, truncate_table, variables,
};
use super::dialect::{AnalyzedColumns, BucketSqlStatement, explain_mode};
use super::names::{schema_of, table_name};
use super::output::{Output, plan_schema};
use super::session::Session;
use super::spark::{self, routing};
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::config::{self, EngineChoice};
use crate::error::SqlError;
use crate::explain::ExplainMode;
use crate::storage::transaction::BlockStatus;

/// Runs one statement, whose text is `text`, with `params` bound to its `$n`, under the
/// session's settings as they are now: queries on the engine `bucketsql.engine` picks. Files
/// the statement reads are not deleted before its rows have been read.
pub(crate) async fn run(
    session: &Session,
    text: &str,
    statement: &BucketSqlStatement,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    use BucketSqlStatement as Bucket;
    match session.tables.status() {
        BlockStatus::Failed if !matches!(statement, Bucket::Sql(s) if transaction::ends_failed_block(s)) => {
            return Err(transaction::failed_block_error());
        }
        // A read-only block, or outside one a read-only default (each statement its own
        // transaction), refuses writes.
        BlockStatus::InBlock | BlockStatus::Idle if session.transaction_modes().1 => {
            if let Some(command) = writes(statement) {
                return Err(transaction::read_only_error(command));
            }
        }
        _ => {}
    }
    // Settings may have changed since the last statement (`SET`, `set_config()`).
    session.install_spark_conf();
    let guard = session.engine.janitor.begin_statement();
    let output = match statement {
        Bucket::Sql(stmt @ Statement::Query(_)) => match routing::route(session, stmt)? {
            route if route.on_spark => spark::run::query(session, text, stmt, params).await?,
            _ => query::run(session, stmt, params).await?,
        },
        Bucket::Sql(stmt @ Statement::Insert(target)) => match routing::route_write(session, target.source.as_deref())?
        {
            route if route.on_spark => spark::write::insert(session, stmt, target, params).await?,
            _ => insert::insert(session, stmt, target, params).await?,
        },
        Bucket::Sql(stmt @ Statement::Explain { statement, .. }) => {
            let mode = explain_mode(stmt).unwrap_or(ExplainMode::Simple);
            let route = match (mode, statement.as_ref()) {
                (ExplainMode::Analyze, _) | (_, Statement::Insert(_)) => None,
                (_, query) => Some(routing::route(session, query)?),
            };
            match route {
                Some(route) if route.on_spark => {
                    spark::run::explain(session, text, statement, mode, params, &route).await?
                }
                route => {
                    // Where a session chose another engine, EXPLAIN says why this one runs it.
                    let engine = route
                        .filter(|_| session.spark_conf().engine != EngineChoice::Local)
                        .map(|route| spark::run::engine_section("bucketsql", &route));
                    explain::explain(session, statement, mode, params, engine).await?
                }
            }
        }
        Bucket::Sql(Statement::CreateTable(create)) => create_table::create_table(session, create).await?,
        Bucket::Sql(stmt @ Statement::Drop { .. }) => drop_table::drop(session, stmt)?,
        Bucket::Sql(Statement::Truncate(truncate)) => truncate_table::truncate(session, truncate).await?,
        Bucket::Sql(Statement::ShowTables { show_options, .. }) => {
            let schema = match &show_options.show_in {
                Some(show_in) => show_in.parent_name.as_ref().map(schema_of).transpose()?,
                None => None,
            };
            let pattern = match &show_options.filter_position {
                Some(ShowStatementFilterPosition::Infix(filter) | ShowStatementFilterPosition::Suffix(filter)) => {
                    match filter {
                        ShowStatementFilter::Like(pattern) | ShowStatementFilter::NoKeyword(pattern) => Some(pattern),
                        other => {
                            return Err(SqlError::syntax(format!("SHOW TABLES takes a LIKE pattern, not {other}")));
                        }
                    }
                }
                None => None,
            };
            show_tables::show_tables(session, schema.as_deref().unwrap_or(DEFAULT_SCHEMA), pattern.map(String::as_str))?
        }
        Bucket::Sql(Statement::ExplainTable {
            describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
            hive_format,
            table_name: name,
            ..
        }) => {
            let (schema, table) = table_name(name)?;
            let extended = matches!(hive_format, Some(HiveDescribeFormat::Extended | HiveDescribeFormat::Formatted));
            describe_table::describe(session, &schema, &table, extended)?
        }
        Bucket::Sql(Statement::ShowCreate { obj_type: ShowCreateObject::Table, obj_name }) => {
            let (schema, table) = table_name(obj_name)?;
            show_create_table::show_create_table(session, &schema, &table)?
        }
        Bucket::ShowPartitions { table, partition_spec } => {
            if !partition_spec.is_empty() {
                return Err(SqlError::feature_not_supported("SHOW PARTITIONS with a PARTITION spec"));
            }
            let (schema, name) = table_name(table)?;
            show_partitions::show_partitions(session, &schema, &name)?
        }
        Bucket::Sql(Statement::OptimizeTable { name, .. }) => {
            let (schema, table) = table_name(name)?;
            optimize::optimize(session, &schema, &table).await?
        }
        Bucket::Sql(Statement::Analyze(analyze)) => {
            let name = analyze.table_name.as_ref().ok_or_else(|| SqlError::syntax("ANALYZE needs TABLE name"))?;
            analyze_table::analyze_table(session, name, &[], &AnalyzedColumns::Table).await?
        }
        Bucket::AnalyzeTable { table, partition_spec, columns } => {
            analyze_table::analyze_table(session, table, partition_spec, columns).await?
        }
        Bucket::ShowBuckets { table, partition_spec } => {
            show_buckets::show_buckets(session, table, partition_spec).await?
        }
        Bucket::DescribeColumn { table, column, extended } => {
            describe_column::describe_column(session, table, column, *extended)?
        }
        Bucket::SetTableProperties { table, properties } => {
            table_properties::set_table_properties(session, table, properties)?
        }
        Bucket::AddColumns { table, columns } => add_columns::add_columns(session, table, columns)?,
        Bucket::SetLocation { table, location } => set_location::set_location(session, table, location).await?,
        Bucket::UnsetTableProperties { table, keys, if_exists } => {
            table_properties::unset_table_properties(session, table, keys, *if_exists)?
        }
        Bucket::RefreshTable { table } => refresh_table::refresh_table(session, table).await?,
        Bucket::Sql(Statement::Msck(msck)) => repair_table::repair_table(session, msck).await?,
        Bucket::Sql(stmt @ Statement::Copy { .. }) => copy::copy(session, stmt).await?,
        Bucket::SetVariable { name, value: Some(value) }
            if name.eq_ignore_ascii_case(config::TRANSACTION_ISOLATION) =>
        {
            transaction::set_isolation(session, value)?
        }
        Bucket::SetVariable { name, value } => variables::set(session, name, value.as_deref())?,
        Bucket::ShowVariable { name } => variables::show(session, name.as_deref())?,
        Bucket::Sql(Statement::ShowVariable { variable }) => {
            let name: Vec<&str> = variable.iter().map(|i| i.value.as_str()).collect();
            variables::show(session, Some(&name.join(".")))?
        }
        Bucket::Reset { name } => variables::reset(session, name.as_deref()),
        // Drivers close prepared statements and reset sessions this way; nothing is kept
        // server-side beyond pgwire's own statement store.
        Bucket::Sql(Statement::Deallocate { .. }) => Output::command("DEALLOCATE"),
        Bucket::Sql(Statement::Discard { .. }) => Output::command("DISCARD ALL"),
        Bucket::Sql(Statement::StartTransaction { modes, .. }) => transaction::begin(session, modes),
        Bucket::Sql(Statement::Commit { chain, .. }) => transaction::commit(session, *chain)?,
        Bucket::Sql(Statement::Rollback { savepoint: Some(name), .. }) => {
            transaction::rollback_to(session, &savepoint_name(name))?
        }
        Bucket::Sql(Statement::Rollback { chain, .. }) => transaction::rollback(session, *chain),
        Bucket::Sql(Statement::Savepoint { name }) => transaction::savepoint(session, &savepoint_name(name))?,
        Bucket::Sql(Statement::ReleaseSavepoint { name }) => transaction::release(session, &savepoint_name(name))?,
        Bucket::Sql(Statement::Set(Set::SetTransaction { modes, session: for_session, .. })) => {
            transaction::set_transaction(session, modes, *for_session)?
        }
        Bucket::Sql(Statement::AlterTable(alter)) if rename_table::renames(alter) => {
            rename_table::rename(session, alter).await?
        }
        Bucket::Sql(other) => {
            return Err(SqlError::feature_not_supported(format!("statement not supported: {}", statement_kind(other))));
        }
    };
    Ok(match output {
        Output::Rows { schema, stream } => {
            // The guard lives as long as the stream: retired files stay until it is read.
            let stream = stream.map(move |batch| {
                let _ = &guard;
                batch
            });
            Output::Rows {
                schema: Arc::clone(&schema),
                stream: Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
            }
        }
        other => other,
    })
}

/// The row shape of the statements whose answer is built here rather than planned by
/// DataFusion.
pub(crate) fn result_schema(statement: &BucketSqlStatement) -> Option<SchemaRef> {
    use BucketSqlStatement as Bucket;
    match statement {
        Bucket::Sql(Statement::ShowTables { .. }) => Some(show_tables::show_tables_schema()),
        // `SET key` without a value shows the key, as Spark does.
        Bucket::ShowVariable { .. }
        | Bucket::SetVariable { value: None, .. }
        | Bucket::Sql(Statement::ShowVariable { .. }) => Some(variables::variables_schema()),
        Bucket::ShowPartitions { .. } => Some(show_partitions::show_partitions_schema()),
        Bucket::ShowBuckets { .. } => Some(show_buckets::show_buckets_schema()),
        Bucket::DescribeColumn { .. } => Some(describe_column::describe_column_schema()),
        Bucket::Sql(Statement::ExplainTable { .. }) => Some(describe_table::describe_schema()),
        Bucket::Sql(Statement::ShowCreate { .. }) => Some(show_create_table::show_create_schema()),
        Bucket::Sql(Statement::Explain { .. }) => Some(plan_schema()),
        _ => None,
    }
}

/// A savepoint's name as PostgreSQL keeps it: folded to lower case unless quoted.
fn savepoint_name(name: &Ident) -> String {
    if name.quote_style.is_some() { name.value.clone() } else { name.value.to_lowercase() }
}

/// The command a statement that changes what is stored runs, which a READ ONLY transaction
/// refuses.
fn writes(statement: &BucketSqlStatement) -> Option<&'static str> {
    use BucketSqlStatement as Bucket;
    match statement {
        Bucket::Sql(stmt) => transaction::writes(stmt),
        Bucket::AnalyzeTable { .. } => Some("ANALYZE"),
        Bucket::SetTableProperties { .. }
        | Bucket::UnsetTableProperties { .. }
        | Bucket::AddColumns { .. }
        | Bucket::SetLocation { .. } => Some("ALTER TABLE"),
        Bucket::RefreshTable { .. } => Some("REFRESH TABLE"),
        _ => None,
    }
}

/// A statement's first two words, which name its kind in an error.
fn statement_kind(stmt: &Statement) -> String {
    let text = stmt.to_string();
    text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

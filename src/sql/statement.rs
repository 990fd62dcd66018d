//! Running statements: each parsed statement of a session, in the simple and the extended
//! protocol, under the session's `statement_timeout`, kept in the query history from where it
//! can be cancelled. What each statement does is [`dispatch`]'s.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast::Statement;
use futures::FutureExt;

use super::dialect::{BucketSqlStatement, parse_sql};
use super::history::QueryState;
use super::output::{Output, Prepared};
use super::session::Session;
use super::statement_end::StatementEnd;
use super::{dispatch, interrupt};
use crate::error::SqlError;
use crate::exec::executor;

/// The statements of a simple-protocol query string, each with its text: the query's own
/// when it holds one statement. The backend turns active with the query's text here, as in
/// `prepare` (Parse) and `execute_prepared` (Execute); the wire front end turns it idle when
/// it answers ReadyForQuery.
pub async fn parse_query(session: &Arc<Session>, sql: &str) -> Result<Vec<(String, BucketSqlStatement)>, SqlError> {
    session.backend.statement_started(sql);
    let parsed = executor::run(session.statement_deadline(), parse_off_workers(sql.to_string())).await;
    match parsed.and_then(|parsed| parsed.ok_or_else(interrupt::timed_out)) {
        Ok(statements) => {
            let one = statements.len() == 1;
            Ok(statements
                .into_iter()
                .map(|statement| (if one { sql.to_string() } else { statement.to_string() }, statement))
                .collect())
        }
        Err(e) => {
            record_failure(session, sql, &e);
            Err(e)
        }
    }
}

/// Runs one statement of a simple-protocol query string (see [`parse_query`]).
pub async fn execute_statement(
    session: &Arc<Session>,
    text: &str,
    statement: &BucketSqlStatement,
) -> Result<Output, SqlError> {
    execute(session, text, statement, Vec::new()).await
}

/// Parses one statement and works out its parameter and result types (extended protocol).
/// `declared` holds the types the client gave for `$1..$n`. Parsing and planning it count
/// against `statement_timeout`, as running it does.
pub async fn prepare(
    session: &Arc<Session>,
    sql: &str,
    declared: &[Option<DataType>],
) -> Result<Option<Prepared>, SqlError> {
    session.backend.statement_started(sql);
    let (preparing, text, declared) = (Arc::clone(session), sql.to_string(), declared.to_vec());
    let prepared =
        executor::run(session.statement_deadline(), async move { prepare_untimed(&preparing, text, &declared).await });
    let prepared = prepared.await.and_then(|p| p.ok_or_else(interrupt::timed_out));
    if let Err(e) = &prepared {
        record_failure(session, sql, e);
    }
    prepared
}

/// Ends a statement that failed before it could run (it did not parse, or timed out parsing).
fn record_failure(session: &Arc<Session>, sql: &str, error: &SqlError) {
    session.running.set(None);
    let record = session.engine.history.begin(&session.backend, sql, session.tables.transaction_id());
    StatementEnd::unparsed(session, sql, record).end(QueryState::Failed, None, Some(error));
}

async fn prepare_untimed(
    session: &Session,
    sql: String,
    declared: &[Option<DataType>],
) -> Result<Option<Prepared>, SqlError> {
    let mut statements = parse_off_workers(sql.clone()).await?;
    if statements.len() > 1 {
        return Err(SqlError::syntax("cannot insert multiple commands into a prepared statement"));
    }
    let Some(statement) = statements.pop() else {
        return Ok(None);
    };
    let (planned_types, result_schema) = match &statement {
        BucketSqlStatement::Sql(stmt) if plans_through_datafusion(stmt) => {
            let plan = session.plan(stmt).await?;
            let types = parameter_types(&plan)?;
            let schema = match stmt {
                Statement::Insert(_) => None,
                _ => Some(session.result_schema(plan).await?),
            };
            (types, schema)
        }
        other => (Vec::new(), dispatch::result_schema(other)),
    };
    let parameter_types = (0..declared.len().max(planned_types.len()))
        .map(|i| declared.get(i).cloned().flatten().or_else(|| planned_types.get(i).cloned().flatten()))
        .collect();
    Ok(Some(Prepared { sql, statement, parameter_types, planned_types, result_schema }))
}

/// Runs a prepared statement with bound parameter values. The statement is planned
/// again here, so it reads the tables as they are now, not as they were at Parse.
pub async fn execute_prepared(
    session: &Arc<Session>,
    prepared: &Prepared,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    session.backend.statement_started(&prepared.sql);
    let params = params
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            let planned = prepared.planned_types.get(i).cloned().flatten();
            match planned.or_else(|| prepared.parameter_types.get(i).cloned().flatten()) {
                Some(dt) if value.data_type() != dt => value
                    .cast_to(&dt)
                    .map_err(|e| SqlError::new("22P02", format!("invalid value for parameter ${}: {e}", i + 1))),
                _ => Ok(value),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    execute(session, &prepared.sql, &prepared.statement, params).await
}

/// Runs one statement on the query runtime ([`executor`]) under the session's
/// `statement_timeout`, which covers its rows too, and keeps it in the query history
/// (`sql` its text), from where it can also be cancelled.
async fn execute(
    session: &Arc<Session>,
    sql: &str,
    statement: &BucketSqlStatement,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    let cancel = session.backend.statement_cancellation();
    let record = session.engine.history.begin(&session.backend, sql, session.tables.transaction_id());
    session.running.set(record.clone());
    let mut end = StatementEnd::begin(session, sql, record);
    let output = tokio::select! {
        output = execute_timed(session, sql, statement, params) => output,
        () = cancel.clone().cancelled_owned() => Err(cancelled_by_user()),
    };
    match output {
        Err(e) => {
            end.end(QueryState::Failed, None, Some(&e));
            Err(e)
        }
        Ok(Output::Rows { schema, stream }) => {
            let stop = cancel.cancelled_owned().map(|()| Err(DataFusionError::External(Box::new(cancelled_by_user()))));
            let rows = Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&schema), interrupt::until(stream, stop)));
            Ok(Output::Rows { schema, stream: end.rows(rows) })
        }
        Ok(output) => {
            let rows = match &output {
                Output::Command { rows, .. } => rows.map(|r| r as u64),
                _ => None,
            };
            end.end(QueryState::Finished, rows, None);
            Ok(output)
        }
    }
}

async fn execute_timed(
    session: &Arc<Session>,
    sql: &str,
    statement: &BucketSqlStatement,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    let deadline = session.statement_deadline();
    let (running, text, statement) = (Arc::clone(session), sql.to_string(), statement.clone());
    let output =
        executor::run(deadline, async move { dispatch::run(&running, &text, &statement, params).await }).await?;
    Ok(match output.ok_or_else(interrupt::timed_out)? {
        Output::Rows { schema, stream } => {
            Output::Rows { schema, stream: interrupt::limit(executor::drive(stream), deadline) }
        }
        other => other,
    })
}

/// The error of a statement cancelled from the web UI, as of one cancelled by a CancelRequest.
fn cancelled_by_user() -> SqlError {
    SqlError::query_canceled("canceling statement due to user request")
}

/// `sql`'s statements, parsed on a blocking thread: a statement of megabytes takes long
/// enough to parse to hold up a worker, and every connection waiting on it.
async fn parse_off_workers(sql: String) -> Result<Vec<BucketSqlStatement>, SqlError> {
    interrupt::off_workers(async move { Ok(parse_sql(&sql)?) }).await
}

/// Statements DataFusion plans: queries, and INSERT (whose source we then write ourselves).
fn plans_through_datafusion(stmt: &Statement) -> bool {
    matches!(stmt, Statement::Query(_) | Statement::Insert(_))
}

/// The most parameters a Bind message can carry (its count is 16 bits).
const MAX_PARAMETERS: usize = u16::MAX as usize;

/// `$1..$n` in order, from the plan's placeholder map.
fn parameter_types(plan: &LogicalPlan) -> Result<Vec<Option<DataType>>, SqlError> {
    let found: HashMap<String, Option<DataType>> = plan.get_parameter_types()?;
    let mut types = Vec::new();
    for (name, ty) in found {
        let index: usize = name
            .trim_start_matches('$')
            .parse()
            .map_err(|_| SqlError::syntax(format!("parameter {name} is not of the form $n")))?;
        if index == 0 {
            return Err(SqlError::syntax("parameters are numbered from $1"));
        }
        // No Bind could fill it, and the list below would be as long as the number.
        if index > MAX_PARAMETERS {
            return Err(SqlError::new("42P02", format!("there is no parameter {name}")));
        }
        if types.len() < index {
            types.resize(index, None);
        }
        types[index - 1] = ty;
    }
    Ok(types)
}

//! Statement dispatch: runs each parsed statement of a session, in the simple and the
//! extended protocol, under the session's `statement_timeout`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::execution::RecordBatchStream;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, execute_stream};
use datafusion::sql::sqlparser::ast::{DescribeAlias, HiveDescribeFormat, ObjectName, ShowCreateObject, Statement};
use futures::{FutureExt, Stream, StreamExt};

use super::dialect::{AnalyzedColumns, BucketSqlStatement, explain_mode, parse_sql};
use super::history::{QueryRecord, QueryState};
use super::output::{Output, Prepared, rows_output};
use super::session::Session;
use super::static_partitions::{self, StaticPartitions};
use super::variables::variables_schema;
use super::{copy, ddl, describe, dml, interrupt, refresh, table_statistics};
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::error::SqlError;
use crate::exec::executor;
use crate::explain::{self, ExplainContext, ExplainMode};
use crate::planner::table_provider::CATALOG_NAME;

impl Session {
    /// Runs every statement of a simple-protocol query string, stopping at the first error
    /// (which comes last in the returned list). The backend turns active with the query's text
    /// here, as in `prepare` (Parse) and `execute_prepared` (Execute); the wire front end turns
    /// it idle when it answers ReadyForQuery.
    pub async fn execute_sql(self: &Arc<Self>, sql: &str) -> Vec<Result<Output, SqlError>> {
        self.backend.statement_started(sql);
        let parsed = executor::run(self.statement_deadline(), parse_off_workers(sql.to_string())).await;
        let statements = match parsed.and_then(|parsed| parsed.ok_or_else(interrupt::timed_out)) {
            Ok(s) => s,
            Err(e) => {
                self.record_failure(sql, &e);
                return vec![Err(e)];
            }
        };
        let mut outputs = Vec::with_capacity(statements.len());
        let one = statements.len() == 1;
        for statement in statements {
            let text = if one { sql.to_string() } else { statement.to_string() };
            let result = self.execute(&text, &statement, Vec::new()).await;
            let failed = result.is_err();
            outputs.push(result);
            if failed {
                break;
            }
        }
        outputs
    }

    /// Parses one statement and works out its parameter and result types (extended protocol).
    /// `declared` holds the types the client gave for `$1..$n`. Parsing and planning it count
    /// against `statement_timeout`, as running it does.
    pub async fn prepare(
        self: &Arc<Self>,
        sql: &str,
        declared: &[Option<DataType>],
    ) -> Result<Option<Prepared>, SqlError> {
        self.backend.statement_started(sql);
        let (session, text, declared) = (Arc::clone(self), sql.to_string(), declared.to_vec());
        let prepared =
            executor::run(self.statement_deadline(), async move { session.prepare_untimed(text, &declared).await });
        let prepared = prepared.await.and_then(|p| p.ok_or_else(interrupt::timed_out));
        if let Err(e) = &prepared {
            self.record_failure(sql, e);
        }
        prepared
    }

    /// Keeps in the query history a statement that failed before it could run.
    fn record_failure(&self, sql: &str, error: &SqlError) {
        if let Some(record) = self.engine.history.begin(&self.backend, sql) {
            record.end(QueryState::Failed, None, Some(error));
        }
    }

    async fn prepare_untimed(&self, sql: String, declared: &[Option<DataType>]) -> Result<Option<Prepared>, SqlError> {
        let mut statements = parse_off_workers(sql.clone()).await?;
        if statements.len() > 1 {
            return Err(SqlError::syntax("cannot insert multiple commands into a prepared statement"));
        }
        let Some(statement) = statements.pop() else {
            return Ok(None);
        };
        let (planned_types, result_schema) = match &statement {
            BucketSqlStatement::Sql(stmt) if plans_through_datafusion(stmt) => {
                let plan = self.plan(stmt).await?;
                let schema = match stmt {
                    Statement::Insert(_) => None,
                    _ => Some(Arc::new(plan.schema().as_arrow().clone())),
                };
                (parameter_types(&plan)?, schema)
            }
            other => (Vec::new(), self.describe_command(other)),
        };
        let parameter_types = (0..declared.len().max(planned_types.len()))
            .map(|i| declared.get(i).cloned().flatten().or_else(|| planned_types.get(i).cloned().flatten()))
            .collect();
        Ok(Some(Prepared { sql, statement, parameter_types, planned_types, result_schema }))
    }

    /// Runs a prepared statement with bound parameter values. The statement is planned
    /// again here, so it reads the tables as they are now, not as they were at Parse.
    pub async fn execute_prepared(
        self: &Arc<Self>,
        prepared: &Prepared,
        params: Vec<ScalarValue>,
    ) -> Result<Output, SqlError> {
        self.backend.statement_started(&prepared.sql);
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
        self.execute(&prepared.sql, &prepared.statement, params).await
    }

    /// Runs one statement on the query runtime ([`executor`]) under the session's
    /// `statement_timeout`, which covers its rows too, and keeps it in the query history
    /// (`sql` its text), from where it can also be cancelled.
    async fn execute(
        self: &Arc<Self>,
        sql: &str,
        statement: &BucketSqlStatement,
        params: Vec<ScalarValue>,
    ) -> Result<Output, SqlError> {
        let record = self.engine.history.begin(&self.backend, sql);
        self.running.set(record.clone());
        let Some(record) = record else {
            return self.execute_timed(statement, params).await;
        };
        let output = tokio::select! {
            output = self.execute_timed(statement, params) => output,
            () = record.cancelled() => Err(cancelled_by_user()),
        };
        match &output {
            Err(e) => record.end(QueryState::Failed, None, Some(e)),
            Ok(Output::Command { rows, .. }) => record.end(QueryState::Finished, rows.map(|r| r as u64), None),
            Ok(Output::Rows { .. }) => {}
            Ok(_) => record.end(QueryState::Finished, None, None),
        }
        Ok(match output? {
            Output::Rows { schema, stream } => {
                let stop = record.cancelled().map(|()| Err(DataFusionError::External(Box::new(cancelled_by_user()))));
                let rows = interrupt::until(stream, stop);
                Output::Rows { schema: Arc::clone(&schema), stream: Box::pin(RecordedRows::new(schema, rows, record)) }
            }
            other => other,
        })
    }

    async fn execute_timed(
        self: &Arc<Self>,
        statement: &BucketSqlStatement,
        params: Vec<ScalarValue>,
    ) -> Result<Output, SqlError> {
        let deadline = self.statement_deadline();
        let (session, statement) = (Arc::clone(self), statement.clone());
        let output = executor::run(deadline, async move { session.execute_untimed(&statement, params).await }).await?;
        Ok(match output.ok_or_else(interrupt::timed_out)? {
            Output::Rows { schema, stream } => {
                Output::Rows { schema, stream: interrupt::limit(executor::drive(stream), deadline) }
            }
            other => other,
        })
    }

    async fn execute_untimed(
        &self,
        statement: &BucketSqlStatement,
        params: Vec<ScalarValue>,
    ) -> Result<Output, SqlError> {
        let guard = self.engine.janitor.begin_statement();
        let output = match statement {
            BucketSqlStatement::Sql(stmt) => self.execute_sql_statement(stmt, params).await?,
            BucketSqlStatement::SetVariable { name, value } => self.set_variable(name, value.as_deref())?,
            BucketSqlStatement::ShowVariable { name } => self.show_variable(name.as_deref())?,
            BucketSqlStatement::Reset { name } => self.reset(name.as_deref()),
            BucketSqlStatement::ShowPartitions { table, partition_spec } => {
                if !partition_spec.is_empty() {
                    return Err(SqlError::feature_not_supported("SHOW PARTITIONS with a PARTITION spec"));
                }
                let (schema, name) = table_name(table)?;
                describe::show_partitions(self, &schema, &name)?
            }
            BucketSqlStatement::RefreshTable { table } => refresh::refresh_table(self, table)?,
            BucketSqlStatement::ShowBuckets { table, partition_spec } => {
                table_statistics::show_buckets(self, table, partition_spec).await?
            }
            BucketSqlStatement::AnalyzeTable { table, partition_spec, columns } => {
                table_statistics::analyze_table(self, table, partition_spec, columns).await?
            }
            BucketSqlStatement::SetTableProperties { table, properties } => {
                table_statistics::set_table_properties(self, table, properties)?
            }
            BucketSqlStatement::UnsetTableProperties { table, keys, if_exists } => {
                table_statistics::unset_table_properties(self, table, keys, *if_exists)?
            }
            BucketSqlStatement::DescribeColumn { table, column, extended } => {
                table_statistics::describe_column(self, table, column, *extended)?
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

    async fn execute_sql_statement(&self, stmt: &Statement, params: Vec<ScalarValue>) -> Result<Output, SqlError> {
        match stmt {
            Statement::CreateTable(create) => ddl::create_table(self, create).await,
            Statement::Drop { .. } => ddl::drop(self, stmt),
            Statement::ShowTables { show_options, .. } => {
                let schema = match &show_options.show_in {
                    Some(show_in) => show_in.parent_name.as_ref().map(schema_of).transpose()?,
                    None => None,
                };
                ddl::show_tables(self, schema.as_deref().unwrap_or(DEFAULT_SCHEMA))
            }
            Statement::Insert(insert) => {
                let plan = self.plan(stmt).await?.with_param_values(ParamValues::from(params))?;
                let overwritten = match &insert.partitioned {
                    Some(_) if insert.overwrite => {
                        let meta = static_partitions::insert_target(self, insert)?;
                        let spec = StaticPartitions::of(insert, &meta)?;
                        let dynamic_mode = self.spark_conf().dynamic_partition_overwrite && spec.partial;
                        if spec.values.is_empty() || dynamic_mode {
                            None
                        } else {
                            Some(spec.directory(self, &meta).await?)
                        }
                    }
                    _ => None,
                };
                dml::insert(self, plan, overwritten).await
            }
            Statement::ExplainTable {
                describe_alias: DescribeAlias::Describe | DescribeAlias::Desc,
                hive_format,
                table_name: name,
                ..
            } => {
                let (schema, table) = table_name(name)?;
                let extended =
                    matches!(hive_format, Some(HiveDescribeFormat::Extended | HiveDescribeFormat::Formatted));
                describe::describe(self, &schema, &table, extended)
            }
            Statement::ShowCreate { obj_type: ShowCreateObject::Table, obj_name } => {
                let (schema, table) = table_name(obj_name)?;
                describe::show_create_table(self, &schema, &table)
            }
            Statement::ShowVariable { variable } => {
                let name: Vec<&str> = variable.iter().map(|i| i.value.as_str()).collect();
                self.show_variable(Some(&name.join(".")))
            }
            Statement::OptimizeTable { name, .. } => {
                let (schema, table) = table_name(name)?;
                dml::optimize(self, &schema, &table).await
            }
            Statement::Analyze(analyze) => {
                let name = analyze.table_name.as_ref().ok_or_else(|| SqlError::syntax("ANALYZE needs TABLE name"))?;
                table_statistics::analyze_table(self, name, &[], &AnalyzedColumns::Table).await
            }
            Statement::Msck(msck) => refresh::repair_table(self, msck),
            Statement::Copy { .. } => copy::copy(self, stmt).await,
            // Drivers close prepared statements and reset sessions this way; nothing is kept
            // server-side beyond pgwire's own statement store.
            Statement::Deallocate { .. } => Ok(Output::command("DEALLOCATE")),
            Statement::Discard { .. } => Ok(Output::command("DISCARD ALL")),
            // Savepoints are accepted like transactions: every statement has committed already.
            Statement::Savepoint { .. } => Ok(Output::command("SAVEPOINT")),
            Statement::ReleaseSavepoint { .. } => Ok(Output::command("RELEASE")),
            Statement::StartTransaction { .. } => Ok(Output::TransactionStart("BEGIN")),
            Statement::Commit { .. } => Ok(Output::TransactionEnd("COMMIT")),
            Statement::Rollback { savepoint: Some(_), .. } => Ok(Output::command("ROLLBACK")),
            Statement::Rollback { .. } => Ok(Output::TransactionEnd("ROLLBACK")),
            Statement::Query(_) => {
                let plan = self.plan(stmt).await?.with_param_values(ParamValues::from(params))?;
                self.run_query(stmt, plan).await
            }
            Statement::Explain { statement, .. } => {
                let mode = explain_mode(stmt).unwrap_or(ExplainMode::Simple);
                self.explain(statement, mode, params).await
            }
            other => {
                Err(SqlError::feature_not_supported(format!("statement not supported: {}", statement_kind(other))))
            }
        }
    }

    /// Parses and plans one query, for callers that run the plan themselves.
    pub async fn plan_query(&self, sql: &str) -> Result<Arc<dyn ExecutionPlan>, SqlError> {
        let statements = parse_sql(sql)?;
        let [BucketSqlStatement::Sql(stmt @ Statement::Query(_))] = statements.as_slice() else {
            return Err(SqlError::syntax("expected exactly one query"));
        };
        let plan = self.plan(stmt).await?;
        self.physical_plan(stmt, &plan).await
    }

    /// EXPLAIN in Spark's formats, rendered from the plan that would run. EXPLAIN ANALYZE
    /// runs it and adds what each operator measured.
    async fn explain(
        &self,
        statement: &Statement,
        mode: ExplainMode,
        params: Vec<ScalarValue>,
    ) -> Result<Output, SqlError> {
        if !matches!(statement, Statement::Query(_)) {
            return Err(SqlError::feature_not_supported("EXPLAIN is supported for queries"));
        }
        let plan = self.plan(statement).await?.with_param_values(ParamValues::from(params))?;
        let physical = self.physical_plan(statement, &plan).await?;
        let conf = self.spark_conf();
        let prints_logical = matches!(mode, ExplainMode::Extended | ExplainMode::Cost);
        let context = ExplainContext { conf, logical: prints_logical.then(|| self.logical_stages(&plan)).transpose()? };
        let text = if mode == ExplainMode::Analyze {
            let started = std::time::Instant::now();
            // Rows are counted as they stream past, never held.
            let mut stream = execute_stream(Arc::clone(&physical), self.ctx.task_ctx())?;
            let mut rows = 0;
            while let Some(batch) = stream.next().await {
                rows += batch?.num_rows();
            }
            let mut text = explain::render(&physical, ExplainMode::Formatted, &context);
            text.push_str(&explain::analyze::metrics_section(&physical, rows, started.elapsed()));
            text
        } else {
            explain::render(&physical, mode, &context)
        };
        let schema = Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(StringArray::from(vec![text])) as ArrayRef])?;
        Ok(rows_output(schema, vec![batch]))
    }

    /// Plans with our planner and runs a query.
    async fn run_query(&self, stmt: &Statement, plan: LogicalPlan) -> Result<Output, SqlError> {
        let physical = self.physical_plan(stmt, &plan).await?;
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        let stream = execute_stream(physical, self.ctx.task_ctx())?;
        Ok(Output::Rows { schema, stream })
    }

    /// The row shape of statements answered here rather than by DataFusion.
    fn describe_command(&self, statement: &BucketSqlStatement) -> Option<SchemaRef> {
        match statement {
            BucketSqlStatement::Sql(Statement::ShowTables { .. }) => Some(ddl::show_tables_schema()),
            // `SET key` without a value shows the key, as Spark does.
            BucketSqlStatement::ShowVariable { .. }
            | BucketSqlStatement::SetVariable { value: None, .. }
            | BucketSqlStatement::Sql(Statement::ShowVariable { .. }) => Some(variables_schema()),
            BucketSqlStatement::ShowPartitions { .. } => Some(describe::show_partitions_schema()),
            BucketSqlStatement::ShowBuckets { .. } => Some(table_statistics::show_buckets_schema()),
            BucketSqlStatement::DescribeColumn { .. } => Some(table_statistics::describe_column_schema()),
            BucketSqlStatement::Sql(Statement::ExplainTable { .. }) => Some(describe::describe_schema()),
            BucketSqlStatement::Sql(Statement::ShowCreate { .. }) => Some(describe::show_create_schema()),
            BucketSqlStatement::Sql(Statement::Explain { .. }) => {
                Some(Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)])))
            }
            _ => None,
        }
    }
}

/// The error of a statement cancelled from the web UI, as of one cancelled by a CancelRequest.
fn cancelled_by_user() -> SqlError {
    SqlError::query_canceled("canceling statement due to user request")
}

/// A statement's rows on their way to the client, counted into its query history entry,
/// which ends with them: at their end, at an error, or when the client stops reading.
struct RecordedRows {
    schema: SchemaRef,
    rows: Pin<Box<dyn Stream<Item = datafusion::error::Result<RecordBatch>> + Send>>,
    record: Arc<QueryRecord>,
    count: u64,
}

impl RecordedRows {
    fn new(
        schema: SchemaRef,
        rows: impl Stream<Item = datafusion::error::Result<RecordBatch>> + Send + 'static,
        record: Arc<QueryRecord>,
    ) -> Self {
        RecordedRows { schema, rows: Box::pin(rows), record, count: 0 }
    }
}

impl Stream for RecordedRows {
    type Item = datafusion::error::Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.rows.as_mut().poll_next(cx);
        match &polled {
            Poll::Ready(Some(Ok(batch))) => self.count += batch.num_rows() as u64,
            Poll::Ready(Some(Err(e))) => {
                self.record.end(QueryState::Failed, Some(self.count), Some(&SqlError::from(e)))
            }
            Poll::Ready(None) => self.record.end(QueryState::Finished, Some(self.count), None),
            Poll::Pending => {}
        }
        polled
    }
}

impl RecordBatchStream for RecordedRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }
}

impl Drop for RecordedRows {
    fn drop(&mut self) {
        self.record.end(QueryState::Abandoned, Some(self.count), None);
    }
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

/// `[schema.]name` → (schema, table), lower-cased as Spark's case-insensitive catalog does.
pub(crate) fn table_name(name: &ObjectName) -> Result<(String, String), SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| {
            p.as_ident().map(|i| i.value.to_lowercase()).ok_or_else(|| SqlError::syntax(format!("invalid name {name}")))
        })
        .collect::<Result<_, _>>()?;
    match parts.as_slice() {
        [table] => Ok((DEFAULT_SCHEMA.to_string(), table.clone())),
        [schema, table] => Ok((schema.clone(), table.clone())),
        [catalog, schema, table] if catalog == CATALOG_NAME => Ok((schema.clone(), table.clone())),
        _ => Err(SqlError::syntax(format!("invalid table name {name}"))),
    }
}

fn schema_of(name: &ObjectName) -> Result<String, SqlError> {
    match name.0.as_slice() {
        [part] => part
            .as_ident()
            .map(|i| i.value.to_lowercase())
            .ok_or_else(|| SqlError::syntax(format!("invalid schema name {name}"))),
        _ => Err(SqlError::syntax(format!("invalid schema name {name}"))),
    }
}

fn statement_kind(stmt: &Statement) -> String {
    let text = stmt.to_string();
    text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

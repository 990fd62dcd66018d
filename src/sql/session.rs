//! One connection's session: its settings, its DataFusion context, and statement dispatch.
//!
//! Statements the engine owns (DDL, writes, SET, SHOW) are handled here and in `ddl` /
//! `dml`; queries go to DataFusion through a context whose only catalog is the metastore.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::context::SessionContext;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{ExecutionPlan, collect, execute_stream};
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    DescribeAlias, HiveDescribeFormat, ObjectName, ShowCreateObject, Statement,
};
use futures::StreamExt;
use tokio::time::Instant;

use super::dialect::{BucketSqlStatement, explain_mode, parse_sql};
use crate::explain::{self, ExplainContext, ExplainMode};
use super::error::SqlError;
use super::spark_conf::{self, SparkConf};
use super::{copy, ddl, describe, dml, functions, interrupt, rewrite};
use crate::planner::infer_filters_from_constraints::InferFiltersFromConstraints;
use crate::planner::{self, hints::QueryHints};
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::catalog::provider::CATALOG_NAME;
use crate::engine::Engine;
use crate::server::pg_catalog;

/// What a statement returns to the client.
pub enum Output {
    Rows { schema: SchemaRef, stream: SendableRecordBatchStream },
    /// A command tag such as `CREATE TABLE` or `INSERT 0 3` (`rows` fills the count).
    Command { tag: &'static str, rows: Option<usize> },
    TransactionStart(&'static str),
    TransactionEnd(&'static str),
    /// A `COPY ... FROM STDIN` waiting for its data.
    CopyIn(copy::CopyIn),
    CopyOut(copy::CopyOut),
}

impl Output {
    fn command(tag: &'static str) -> Self {
        Output::Command { tag, rows: None }
    }
}

/// A statement parsed for the extended protocol, with what Describe reports about it.
#[derive(Clone)]
pub struct Prepared {
    pub statement: BucketSqlStatement,
    /// Types of `$1..$n` as Describe reports them: the client's where it declared one, else
    /// the statement's; `None` where nothing fixes one.
    pub parameter_types: Vec<Option<DataType>>,
    /// Types the statement itself gives `$1..$n` (a column compared with, the table column
    /// inserted into): bound values are converted to these, whatever type the client sent.
    pub planned_types: Vec<Option<DataType>>,
    /// Row shape, for statements that return rows.
    pub result_schema: Option<SchemaRef>,
}

/// Sorted runs below this size are sorted in place before the merge.
const SORT_IN_PLACE_BYTES: usize = 32 << 20;

pub struct Session {
    pub(crate) engine: Arc<Engine>,
    pub(crate) ctx: SessionContext,
    /// Shared with the `pg_catalog` functions and views that read settings.
    variables: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Session {
    pub fn new(engine: Arc<Engine>) -> Result<Self, SqlError> {
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG_NAME, DEFAULT_SCHEMA)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(false);
        let options = config.options_mut();
        // Spark reads `1.5` as a decimal, and its session time zone makes `now()` an instant.
        options.sql_parser.parse_float_as_decimal = true;
        options.execution.time_zone = Some("UTC".to_string());
        // The hash-join dynamic filter routes probe rows by DataFusion's own hash, which is
        // not how Spark-bucketed inputs are partitioned (wrong rows on bucketed joins).
        options.optimizer.enable_join_dynamic_filter_pushdown = false;
        // Spark infers `isnotnull(key)` filters for inner-join keys and pushes them to scans.
        options.optimizer.filter_null_join_keys = true;
        if let Some(bytes) = engine.sort_spill_reservation {
            options.execution.sort_spill_reservation_bytes = bytes;
        }
        // Sorting larger runs in place costs little on rows that arrive sorted (bucket files
        // are written sorted) and leaves the final merge fewer runs.
        options.execution.sort_in_place_threshold_bytes = SORT_IN_PLACE_BYTES;
        // DataFusion's physical rules are replaced by our planner (`crate::planner`).
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(Arc::clone(&engine.runtime))
            .with_default_features()
            .with_physical_optimizer_rules(Vec::new())
            .with_optimizer_rule(Arc::new(InferFiltersFromConstraints))
            .build();
        let mut ctx = SessionContext::new_with_state(state);
        ctx.register_catalog(CATALOG_NAME, engine.catalog.clone());
        functions::register(&mut ctx)?;
        let variables = Arc::new(Mutex::new(BTreeMap::new()));
        let settings = pg_catalog::Settings(Arc::clone(&variables));
        pg_catalog::register_functions(&mut ctx, Arc::clone(&engine.metastore), settings)?;
        Ok(Session { engine, ctx, variables })
    }

    /// Runs every statement of a simple-protocol query string, stopping at the first error
    /// (which comes last in the returned list).
    pub async fn execute_sql(&self, sql: &str) -> Vec<Result<Output, SqlError>> {
        let statements = match parse_sql(sql) {
            Ok(s) => s,
            Err(e) => return vec![Err(SqlError::from(e))],
        };
        let mut outputs = Vec::with_capacity(statements.len());
        for statement in statements {
            let result = self.execute(&statement, Vec::new()).await;
            let failed = result.is_err();
            outputs.push(result);
            if failed {
                break;
            }
        }
        outputs
    }

    /// Parses one statement and works out its parameter and result types (extended protocol).
    /// `declared` holds the types the client gave for `$1..$n`.
    pub async fn prepare(&self, sql: &str, declared: &[Option<DataType>]) -> Result<Option<Prepared>, SqlError> {
        let mut statements = parse_sql(sql)?;
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
        Ok(Some(Prepared { statement, parameter_types, planned_types, result_schema }))
    }

    /// Runs a prepared statement with bound parameter values. The statement is planned
    /// again here, so it reads the tables as they are now, not as they were at Parse.
    pub async fn execute_prepared(&self, prepared: &Prepared, params: Vec<ScalarValue>) -> Result<Output, SqlError> {
        let params = params
            .into_iter()
            .enumerate()
            .map(|(i, value)| {
                let planned = prepared.planned_types.get(i).cloned().flatten();
                match planned.or_else(|| prepared.parameter_types.get(i).cloned().flatten()) {
                    Some(dt) if value.data_type() != dt => value.cast_to(&dt).map_err(|e| {
                        SqlError::new("22P02", format!("invalid value for parameter ${}: {e}", i + 1))
                    }),
                    _ => Ok(value),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.execute(&prepared.statement, params).await
    }

    /// Runs one statement under the session's `statement_timeout`, which covers its rows too.
    async fn execute(&self, statement: &BucketSqlStatement, params: Vec<ScalarValue>) -> Result<Output, SqlError> {
        let deadline = self.statement_timeout().map(|timeout| Instant::now() + timeout);
        Ok(match interrupt::within(deadline, self.execute_untimed(statement, params)).await? {
            Output::Rows { schema, stream } => Output::Rows { schema, stream: interrupt::limit(stream, deadline) },
            other => other,
        })
    }

    async fn execute_untimed(&self, statement: &BucketSqlStatement, params: Vec<ScalarValue>) -> Result<Output, SqlError> {
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
        };
        Ok(match output {
            Output::Rows { schema, stream } => {
                // The guard lives as long as the stream: retired files stay until it is read.
                let stream = stream.map(move |batch| {
                    let _ = &guard;
                    batch
                });
                Output::Rows { schema: Arc::clone(&schema), stream: Box::pin(RecordBatchStreamAdapter::new(schema, stream)) }
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
            Statement::Insert(_) => {
                let plan = self.plan(stmt).await?.with_param_values(ParamValues::from(params))?;
                dml::insert(self, plan).await
            }
            Statement::ExplainTable { describe_alias: DescribeAlias::Describe | DescribeAlias::Desc, hive_format, table_name: name, .. } => {
                let (schema, table) = table_name(name)?;
                let extended = matches!(hive_format, Some(HiveDescribeFormat::Extended | HiveDescribeFormat::Formatted));
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
                let (schema, table) = table_name(name)?;
                dml::analyze(self, &schema, &table)
            }
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
            other => Err(SqlError::feature_not_supported(format!(
                "statement not supported: {}",
                statement_kind(other)
            ))),
        }
    }

    pub(crate) async fn plan(&self, stmt: &Statement) -> Result<LogicalPlan, SqlError> {
        self.install_spark_conf();
        let mut stmt = stmt.clone();
        pg_catalog::rewrite::rewrite(&mut stmt);
        rewrite::rewrite(&mut stmt);
        let state = self.ctx.state();
        Ok(state.statement_to_plan(DfStatement::Statement(Box::new(stmt))).await?)
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

    pub fn task_context(&self) -> Arc<datafusion::execution::TaskContext> {
        self.ctx.task_ctx()
    }

    /// EXPLAIN in Spark's formats, rendered from the plan that would run. EXPLAIN ANALYZE
    /// runs it and adds what each operator measured.
    async fn explain(&self, statement: &Statement, mode: ExplainMode, params: Vec<ScalarValue>) -> Result<Output, SqlError> {
        if !matches!(statement, Statement::Query(_)) {
            return Err(SqlError::feature_not_supported("EXPLAIN is supported for queries"));
        }
        let plan = self.plan(statement).await?.with_param_values(ParamValues::from(params))?;
        let physical = self.physical_plan(statement, &plan).await?;
        let conf = self.spark_conf();
        let context = ExplainContext {
            adaptive: conf.adaptive_enabled && mode != ExplainMode::Analyze,
            v2_bucketing_enabled: conf.v2_bucketing_enabled,
            logical: Some(plan.display_indent().to_string()),
        };
        let text = if mode == ExplainMode::Analyze {
            let started = std::time::Instant::now();
            let rows: usize = collect(Arc::clone(&physical), self.ctx.task_ctx()).await?.iter().map(|b| b.num_rows()).sum();
            let mut text = explain::render(&physical, ExplainMode::Formatted, &context);
            text.push_str(&explain::analyze::metrics_section(&physical, rows, started.elapsed()));
            text
        } else {
            explain::render(&physical, mode, &context)
        };
        let schema = Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)]));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(StringArray::from(vec![text])) as ArrayRef])?;
        Ok(rows_output(schema, vec![batch]))
    }

    /// Plans with our planner and runs a query.
    async fn run_query(&self, stmt: &Statement, plan: LogicalPlan) -> Result<Output, SqlError> {
        let physical = self.physical_plan(stmt, &plan).await?;
        let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
        let stream = execute_stream(physical, self.ctx.task_ctx())?;
        Ok(Output::Rows { schema, stream })
    }

    pub(crate) async fn physical_plan(&self, stmt: &Statement, plan: &LogicalPlan) -> Result<Arc<dyn ExecutionPlan>, SqlError> {
        let hints = QueryHints::resolve(stmt, plan);
        let state = self.ctx.state();
        let physical = planner::create_physical_plan(&state, plan, &hints).await?;
        tracing::debug!(plan = %datafusion::physical_plan::displayable(physical.as_ref()).indent(true), "physical plan");
        Ok(physical)
    }

    /// The session's Spark settings, where scans and the planner read them.
    fn install_spark_conf(&self) {
        let conf = self.spark_conf();
        self.ctx.state_ref().write().config_mut().set_extension(Arc::new(conf));
    }

    /// The row shape of statements answered here rather than by DataFusion.
    fn describe_command(&self, statement: &BucketSqlStatement) -> Option<SchemaRef> {
        match statement {
            BucketSqlStatement::Sql(Statement::ShowTables { .. }) => Some(ddl::show_tables_schema()),
            BucketSqlStatement::ShowVariable { .. } | BucketSqlStatement::Sql(Statement::ShowVariable { .. }) => {
                Some(variables_schema())
            }
            BucketSqlStatement::ShowPartitions { .. } => Some(describe::show_partitions_schema()),
            BucketSqlStatement::Sql(Statement::ExplainTable { .. }) => Some(describe::describe_schema()),
            BucketSqlStatement::Sql(Statement::ShowCreate { .. }) => Some(describe::show_create_schema()),
            BucketSqlStatement::Sql(Statement::Explain { .. }) => {
                Some(Arc::new(Schema::new(vec![Field::new("plan", DataType::Utf8, false)])))
            }
            _ => None,
        }
    }

    pub(crate) fn set_variable(&self, name: &str, value: Option<&str>) -> Result<Output, SqlError> {
        let name = name.to_lowercase();
        match value {
            Some(value) => {
                spark_conf::validate(&name, value)?;
                if name == "statement_timeout" {
                    interrupt::parse_statement_timeout(value)?;
                }
                self.lock_variables().insert(name, value.to_string());
                Ok(Output::command("SET"))
            }
            None => self.show_variable(Some(&name)),
        }
    }

    fn show_variable(&self, name: Option<&str>) -> Result<Output, SqlError> {
        let variables = self.lock_variables();
        let rows: Vec<(String, String)> = match name {
            Some(name) => {
                let key = name.to_lowercase();
                let value = variables
                    .get(&key)
                    .cloned()
                    .or_else(|| server_setting(&key).or_else(|| spark_conf::default_value(&key)).map(str::to_string))
                    .unwrap_or_else(|| "<undefined>".to_string());
                vec![(display_key(name), value)]
            }
            None => variables.iter().map(|(k, v)| (display_key(k), v.clone())).collect(),
        };
        let schema = variables_schema();
        let keys: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0.as_str())));
        let values: ArrayRef = Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1.as_str())));
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![keys, values])?;
        Ok(rows_output(schema, vec![batch]))
    }

    fn reset(&self, name: Option<&str>) -> Output {
        let mut variables = self.lock_variables();
        match name {
            Some(name) => {
                variables.remove(&name.to_lowercase());
            }
            None => variables.clear(),
        }
        Output::command("RESET")
    }

    /// The session's Spark settings over their defaults.
    pub(crate) fn spark_conf(&self) -> SparkConf {
        SparkConf::from_settings(&self.lock_variables())
    }

    /// A session setting, by its case-insensitive name.
    pub fn variable(&self, name: &str) -> Option<String> {
        self.lock_variables().get(&name.to_lowercase()).cloned()
    }

    /// The session's `statement_timeout` (checked when set); `None` when off.
    pub fn statement_timeout(&self) -> Option<Duration> {
        self.variable("statement_timeout").and_then(|value| interrupt::parse_statement_timeout(&value).ok().flatten())
    }

    fn lock_variables(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.variables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Settings PostgreSQL clients ask for with `SHOW`; the values match the startup parameters.
pub(crate) fn server_setting(name: &str) -> Option<&'static str> {
    Some(match name {
        "server_version" => "16.6",
        "server_version_num" => "160006",
        "search_path" => "\"default\"",
        "max_identifier_length" => "63",
        "max_index_keys" => "32",
        "server_encoding" | "client_encoding" => "UTF8",
        "datestyle" => "ISO, YMD",
        "timezone" => "Etc/UTC",
        "integer_datetimes" | "standard_conforming_strings" => "on",
        "transaction_isolation" | "default_transaction_isolation" => "read committed",
        "statement_timeout" => "0",
        _ => return None,
    })
}

/// Spark's spelling for its settings, the name as given otherwise.
fn display_key(name: &str) -> String {
    spark_conf::canonical_key(name).map_or_else(|| name.to_string(), str::to_string)
}

fn variables_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, false)]))
}

/// Statements DataFusion plans: queries, and INSERT (whose source we then write ourselves).
fn plans_through_datafusion(stmt: &Statement) -> bool {
    matches!(stmt, Statement::Query(_) | Statement::Insert(_))
}

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
        if types.len() < index {
            types.resize(index, None);
        }
        types[index - 1] = ty;
    }
    Ok(types)
}

/// A one-shot result from batches already in memory.
pub(crate) fn rows_output(schema: SchemaRef, batches: Vec<RecordBatch>) -> Output {
    let stream = futures::stream::iter(batches.into_iter().map(Ok));
    Output::Rows { schema: Arc::clone(&schema), stream: Box::pin(RecordBatchStreamAdapter::new(schema, stream)) }
}

/// `[schema.]name` → (schema, table), lower-cased as Spark's case-insensitive catalog does.
pub(crate) fn table_name(name: &ObjectName) -> Result<(String, String), SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(|i| i.value.to_lowercase()).ok_or_else(|| SqlError::syntax(format!("invalid name {name}"))))
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

/// A single-column boolean batch, e.g. Spark's `isTemporary`.
pub(crate) fn bool_column(values: impl IntoIterator<Item = bool>) -> ArrayRef {
    Arc::new(BooleanArray::from(values.into_iter().collect::<Vec<_>>()))
}

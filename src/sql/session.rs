//! One connection's session: its DataFusion context, whose only catalog is the metastore,
//! its settings, its backend in `pg_stat_activity`, and planning with our planner. Statements
//! run in `statement`, each dispatched to its command in `dispatch`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::context::SessionContext;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionConfig;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement;

use super::activity::Backend;
use super::decimal_operators::DecimalOperators;
use super::dialect::{BucketSqlStatement, parse_sql};
use super::engine::Engine;
use super::history::RunningStatement;
use super::{
    cast_name_collisions, functions, generators, grouping_functions, grouping_limits, in_list_duplicates, interrupt,
    outer_join_using, pg_catalog, rewrite, tuple_in_subquery,
};
use crate::catalog::metastore::DEFAULT_SCHEMA;
use crate::config::{self, EvalMode, Isolation, PrecisionLoss, SparkConf};
use crate::error::SqlError;
use crate::explain::LogicalStages;
use crate::planner::table_provider::{CATALOG_NAME, MetastoreCatalog};
use crate::planner::{self, hints::QueryHints};
use crate::storage::transaction::SessionCatalog;

/// PostgreSQL's limit on a result's columns: a RowDescription counts them in 16 bits.
const MAX_COLUMNS: usize = 1664;

pub struct Session {
    pub(crate) engine: Arc<Engine>,
    pub(crate) ctx: SessionContext,
    /// Shared with the `pg_catalog` functions and views that read settings.
    variables: Arc<Mutex<BTreeMap<String, String>>>,
    /// What `pg_stat_activity` shows of this connection.
    pub backend: Arc<Backend>,
    /// The running statement's entry in the query history, which its plan is given to.
    pub(crate) running: Arc<RunningStatement>,
    /// The tables as this session sees them, and its transaction block.
    pub(crate) tables: Arc<SessionCatalog>,
    /// The session's own Spark session on the Spark Connect server.
    spark_session_id: Uuid,
    spark_settings: Mutex<SparkSettings>,
    /// `spark.sql.decimalOperations.allowPrecisionLoss`, for the SQL planner's DECIMAL
    /// operators, which see no settings.
    allow_precision_loss: Arc<AtomicBool>,
}

/// A session that ran statements on Spark ends its Spark session there too, rather than
/// leave it to Spark's idle timeout.
impl Drop for Session {
    fn drop(&mut self) {
        let used_spark = !self.lock_spark_settings().sent.is_empty();
        let (Some(spark), Ok(runtime)) = (self.engine.spark.clone(), tokio::runtime::Handle::try_current()) else {
            return;
        };
        if used_spark {
            let id = self.spark_session_id.to_string();
            runtime.spawn(async move {
                if let Err(e) = spark.release_session(id).await {
                    tracing::debug!(error = %e, "could not release the Spark session");
                }
            });
        }
    }
}

/// What the session's Spark session is told of its settings.
#[derive(Default)]
struct SparkSettings {
    /// The keys of `spark.*` settings as the session spelled them: Spark's keys are
    /// case-sensitive, and the session's are kept in lower case.
    spellings: BTreeMap<String, String>,
    /// The keys last sent to the Spark session.
    sent: BTreeSet<String>,
}

impl Session {
    pub fn new(engine: Arc<Engine>, backend: Arc<Backend>) -> Result<Self, SqlError> {
        let mut config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG_NAME, DEFAULT_SCHEMA)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(false);
        let options = config.options_mut();
        // Spark reads `1.5` as a decimal, and its session time zone makes `now()` an instant.
        options.sql_parser.parse_float_as_decimal = true;
        options.execution.time_zone = Some("UTC".to_string());
        // Spark's NULL is the smallest value: first in ascending order, last in descending.
        options.sql_parser.default_null_ordering = "nulls_min".to_string();
        // The hash-join dynamic filter routes probe rows by DataFusion's own hash, which is
        // not how Spark-bucketed inputs are partitioned (wrong rows on bucketed joins).
        options.optimizer.enable_join_dynamic_filter_pushdown = false;
        // Each of Spark's scan tasks reads its own splits. A partition that took its sibling's
        // files would change what each map task aggregates, and so the stage statistics
        // adaptive execution decides by.
        options.execution.enable_file_stream_work_stealing = false;
        // Spark infers `isnotnull(key)` filters for inner-join keys and pushes them to scans.
        options.optimizer.filter_null_join_keys = true;
        if let Some(bytes) = engine.sort_spill_reservation {
            options.execution.sort_spill_reservation_bytes = bytes;
        }
        options.execution.sort_in_place_threshold_bytes = engine.sort_in_place_bytes;
        // DataFusion's physical rules are replaced by our planner (`crate::planner`).
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(Arc::clone(&engine.runtime))
            .with_default_features()
            .with_physical_optimizer_rules(Vec::new())
            .with_analyzer_rules(planner::analyzer_rules())
            .with_optimizer_rules(planner::logical_rules())
            .build();
        let mut ctx = SessionContext::new_with_state(state);
        let tables = Arc::new(SessionCatalog::new(Arc::clone(&engine.metastore), Arc::clone(&engine.janitor)));
        let catalog = MetastoreCatalog::new(Arc::clone(&tables), engine.system_schemas.clone());
        ctx.register_catalog(CATALOG_NAME, Arc::new(catalog));
        functions::register(&mut ctx)?;
        let allow_precision_loss = Arc::new(AtomicBool::new(true));
        let decimal_operators = DecimalOperators { allow_precision_loss: Arc::clone(&allow_precision_loss) };
        datafusion::execution::FunctionRegistry::register_expr_planner(&mut ctx, Arc::new(decimal_operators))?;
        let variables = Arc::new(Mutex::new(BTreeMap::new()));
        backend.share_settings(Arc::clone(&variables));
        let settings = pg_catalog::Settings(Arc::clone(&variables));
        pg_catalog::register_functions(
            &mut ctx,
            Arc::clone(&engine.metastore),
            settings,
            Arc::clone(&backend),
            Arc::clone(&engine.statement_stats),
        )?;
        ctx.state_ref().write().config_mut().set_extension(Arc::clone(&engine.backends));
        ctx.state_ref().write().config_mut().set_extension(Arc::clone(&engine.statement_stats));
        let running = Arc::new(RunningStatement::default());
        ctx.state_ref().write().config_mut().set_extension(Arc::clone(&running));
        let (spark_session_id, spark_settings) = (Uuid::new_v4(), Mutex::default());
        let session = Session {
            engine,
            ctx,
            variables,
            backend,
            running,
            tables,
            spark_session_id,
            spark_settings,
            allow_precision_loss,
        };
        session.install_spark_conf();
        Ok(session)
    }

    /// Plans a statement DataFusion plans (a query, an INSERT without a partition spec) into
    /// a logical plan, with our analyzer and optimizer rules.
    pub(crate) async fn plan(&self, stmt: &Statement) -> Result<LogicalPlan, SqlError> {
        let mode = self.install_spark_conf().eval_mode();
        let mut stmt = stmt.clone();
        let state = self.ctx.state();
        let plan = interrupt::off_workers(async move {
            grouping_limits::check(&stmt)?;
            in_list_duplicates::rewrite(&mut stmt);
            pg_catalog::rewrite::rewrite(&mut stmt);
            generators::rewrite(&mut stmt)?;
            rewrite::rewrite(&mut stmt, mode);
            cast_name_collisions::rewrite(&mut stmt);
            grouping_functions::rewrite(&mut stmt);
            tuple_in_subquery::rewrite(&mut stmt);
            outer_join_using::rewrite(&mut stmt);
            Ok(state.statement_to_plan(DfStatement::Statement(Box::new(stmt))).await?)
        })
        .await?;
        let width = plan.schema().fields().len();
        if width > MAX_COLUMNS {
            return Err(SqlError::new(
                "54011",
                format!("target lists can have at most {MAX_COLUMNS} entries, this one has {width}"),
            ));
        }
        Ok(plan)
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

    /// The columns `plan` (as [`Self::plan`] made it) returns once analyzed, with the types
    /// the rows will have: type coercion widens a set operation's branches to one type, which
    /// the unanalyzed plan still gives as the first branch's. A plan that cannot be analyzed
    /// yet (parameters of no known type) gives its own columns. Analyzing a large statement
    /// takes as long as planning it, so it runs off the workers too.
    pub(crate) async fn result_schema(&self, plan: LogicalPlan) -> Result<SchemaRef, SqlError> {
        let state = self.ctx.state();
        interrupt::off_workers(async move {
            let analyzed = state.analyzer().execute_and_check(plan.clone(), state.config_options(), |_, _| {});
            Ok(Arc::new(analyzed.as_ref().unwrap_or(&plan).schema().as_arrow().clone()))
        })
        .await
    }

    /// `plan` (as [`Self::plan`] made it) after DataFusion's analyzer and after its optimizer,
    /// the stages `SessionState::optimize` runs before a plan becomes physical, for EXPLAIN.
    pub(crate) fn logical_stages(&self, plan: &LogicalPlan) -> Result<LogicalStages, SqlError> {
        let state = self.ctx.state();
        let analyzed = state.analyzer().execute_and_check(plan.clone(), state.config_options(), |_, _| {})?;
        let optimized = state.optimizer().optimize(analyzed.clone(), &state, |_, _| {})?;
        Ok(LogicalStages {
            parsed: plan.display_indent().to_string(),
            analyzed: analyzed.display_indent().to_string(),
            optimized: optimized.display_indent().to_string(),
        })
    }

    pub fn task_context(&self) -> Arc<datafusion::execution::TaskContext> {
        self.ctx.task_ctx()
    }

    /// Plans a query with our planner into the plan that runs (adaptively, where Spark's
    /// `InsertAdaptiveSparkPlan` says so), which the query history is given.
    pub(crate) async fn physical_plan(
        &self,
        stmt: &Statement,
        plan: &LogicalPlan,
    ) -> Result<Arc<dyn ExecutionPlan>, SqlError> {
        let hints = QueryHints::resolve(stmt, plan);
        let state = self.ctx.state();
        let plan = plan.clone();
        let physical =
            interrupt::off_workers(async move { Ok(planner::create_physical_plan(&state, &plan, &hints).await?) })
                .await?;
        tracing::debug!(plan = %datafusion::physical_plan::displayable(physical.as_ref()).indent(true), "physical plan");
        self.running.planned(&physical, self.spark_conf());
        Ok(physical)
    }

    /// The session's Spark settings, where scans and the planner read them; returned for the
    /// statement about to be planned.
    pub(crate) fn install_spark_conf(&self) -> Arc<SparkConf> {
        let conf = self.spark_conf();
        let (mode, loss) = (conf.eval_mode(), conf.precision_loss());
        self.allow_precision_loss.store(conf.allow_precision_loss, Ordering::Relaxed);
        let installed = {
            let state = self.ctx.state_ref();
            let options = state.read().config().options().clone();
            (EvalMode::of(&options), PrecisionLoss::of(&options))
        };
        if installed != (mode, loss) {
            functions::register_expression_settings(&self.ctx, mode, loss);
        }
        let conf = Arc::new(conf);
        let state = self.ctx.state_ref();
        let mut state = state.write();
        state.config_mut().options_mut().extensions.insert(conf.expression_settings());
        state.config_mut().set_extension(Arc::clone(&conf));
        conf
    }

    /// Sets `name` (case-insensitive) to `value`, checked first where it is one of Spark's
    /// settings.
    pub fn set_variable(&self, name: &str, value: &str) -> Result<(), SqlError> {
        let spelled = name;
        let name = name.to_lowercase();
        config::validate(&name, value)?;
        if name.starts_with("spark.") {
            self.lock_spark_settings().spellings.insert(name.clone(), spelled.to_string());
        }
        self.lock_variables().insert(name, value.to_string());
        Ok(())
    }

    /// Forgets the session's value of `name`, or of every setting.
    pub(crate) fn reset_variables(&self, name: Option<&str>) {
        let mut variables = self.lock_variables();
        match name {
            Some(name) => {
                variables.remove(&name.to_lowercase());
            }
            None => variables.clear(),
        }
    }

    /// A session setting, by its case-insensitive name.
    pub fn variable(&self, name: &str) -> Option<String> {
        self.lock_variables().get(&name.to_lowercase()).cloned()
    }

    /// Every setting the session made, by name.
    pub(crate) fn variables(&self) -> BTreeMap<String, String> {
        self.lock_variables().clone()
    }

    /// A setting's value: the session's, else the server's (from `serve`'s flags), else the
    /// PostgreSQL parameter's or Spark's default.
    pub fn setting(&self, name: &str) -> Option<String> {
        // The open block's modes; outside one, the defaults the next block will have.
        match name.to_lowercase().as_str() {
            config::TRANSACTION_ISOLATION => return Some(self.transaction_modes().0.name().to_string()),
            config::TRANSACTION_READ_ONLY => {
                return Some(if self.transaction_modes().1 { "on" } else { "off" }.to_string());
            }
            _ => {}
        }
        self.variable(name)
            .or_else(|| self.engine.server_setting(name))
            .or_else(|| config::default_setting(&name.to_lowercase()).map(str::to_string))
    }

    /// The open transaction block's isolation level and read-only mode, else those the next
    /// block will have (`default_transaction_isolation`, `default_transaction_read_only`).
    pub(crate) fn transaction_modes(&self) -> (Isolation, bool) {
        self.tables.modes().unwrap_or_else(|| {
            let isolation = self
                .setting(config::DEFAULT_TRANSACTION_ISOLATION)
                .and_then(|value| Isolation::parse(&value))
                .unwrap_or(Isolation::ReadCommitted);
            let read_only = self
                .setting(config::DEFAULT_TRANSACTION_READ_ONLY)
                .is_some_and(|value| config::parse_on_off(config::DEFAULT_TRANSACTION_READ_ONLY, &value) == Ok(true));
            (isolation, read_only)
        })
    }

    /// How long the session may wait for its client inside a transaction block.
    pub fn idle_in_transaction_timeout(&self) -> Option<Duration> {
        self.setting(config::IDLE_IN_TRANSACTION_SESSION_TIMEOUT)
            .and_then(|value| config::parse_idle_in_transaction_timeout(&value).ok().flatten())
    }

    /// Statements that take at least this long are logged with their plans; `None` is off.
    pub fn log_min_duration(&self) -> Option<Duration> {
        self.setting(config::LOG_MIN_DURATION_STATEMENT)
            .and_then(|value| config::parse_log_min_duration(&value).ok().flatten())
    }

    /// The session's Spark settings over their defaults.
    pub(crate) fn spark_conf(&self) -> SparkConf {
        SparkConf::from_settings(&self.lock_variables())
    }

    /// The session's `statement_timeout` (checked when set); `None` when off.
    pub fn statement_timeout(&self) -> Option<Duration> {
        self.variable("statement_timeout").and_then(|value| config::parse_statement_timeout(&value).ok().flatten())
    }

    /// When a statement starting now must end by, under `statement_timeout`.
    pub(crate) fn statement_deadline(&self) -> Option<Instant> {
        self.statement_timeout().map(|timeout| Instant::now() + timeout)
    }

    /// The id of the session's Spark session on the Spark Connect server.
    pub(crate) fn spark_session_id(&self) -> Uuid {
        self.spark_session_id
    }

    /// The session's `spark.*` settings, each key as Spark spells it (or as the session did,
    /// for keys this server does not know).
    pub(crate) fn spark_settings(&self) -> Vec<(String, String)> {
        let spellings = self.lock_spark_settings().spellings.clone();
        self.variables()
            .into_iter()
            .filter(|(key, _)| key.starts_with("spark."))
            .map(|(key, value)| {
                let spelled = config::canonical_key(&key).map(str::to_string).or_else(|| spellings.get(&key).cloned());
                (spelled.unwrap_or(key), value)
            })
            .collect()
    }

    /// Records the keys just sent to the Spark session; returns those sent before and not
    /// now, which it must unset.
    pub(crate) fn spark_settings_sent(&self, keys: BTreeSet<String>) -> Vec<String> {
        let mut settings = self.lock_spark_settings();
        let gone = settings.sent.difference(&keys).cloned().collect();
        settings.sent = keys;
        gone
    }

    fn lock_spark_settings(&self) -> MutexGuard<'_, SparkSettings> {
        self.spark_settings.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_variables(&self) -> MutexGuard<'_, BTreeMap<String, String>> {
        self.variables.lock().unwrap_or_else(|p| p.into_inner())
    }
}

//! `EXPLAIN [EXTENDED | CODEGEN | COST | FORMATTED | ANALYZE] query`: Spark's formats, printed
//! from the plan that would run; ANALYZE runs it and adds what each operator measured.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::physical_plan::execute_stream;
use datafusion::sql::sqlparser::ast::Statement;
use futures::StreamExt;

use crate::error::SqlError;
use crate::explain::{self, ExplainContext, ExplainMode};
use crate::sql::output::{Output, plan_schema, rows_output};
use crate::sql::session::Session;

pub(crate) async fn explain(
    session: &Session,
    statement: &Statement,
    mode: ExplainMode,
    params: Vec<ScalarValue>,
    engine: Option<String>,
) -> Result<Output, SqlError> {
    if !matches!(statement, Statement::Query(_)) {
        return Err(SqlError::feature_not_supported("EXPLAIN is supported for queries"));
    }
    let plan = session.plan(statement).await?.with_param_values(ParamValues::from(params))?;
    let physical = session.physical_plan(statement, &plan).await?;
    let conf = session.spark_conf();
    let prints_logical = matches!(mode, ExplainMode::Extended | ExplainMode::Cost);
    let context = ExplainContext { conf, logical: prints_logical.then(|| session.logical_stages(&plan)).transpose()? };
    let mut text = if mode == ExplainMode::Analyze {
        let started = std::time::Instant::now();
        // Rows are counted as they stream past, never held.
        let mut stream = execute_stream(Arc::clone(&physical), session.task_context())?;
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
    text.push_str(engine.as_deref().unwrap_or_default());
    let batch = RecordBatch::try_new(plan_schema(), vec![Arc::new(StringArray::from(vec![text])) as ArrayRef])?;
    Ok(rows_output(plan_schema(), vec![batch]))
}

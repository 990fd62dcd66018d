//! A query: planned by DataFusion into a logical plan, by our planner into the physical plan
//! that runs, and streamed to the client as it runs.

use datafusion::common::{ParamValues, ScalarValue};
use datafusion::physical_plan::execute_stream;
use datafusion::sql::sqlparser::ast::Statement;

use crate::error::SqlError;
use crate::sql::output::Output;
use crate::sql::session::Session;

/// Plans `stmt` with `params` bound to its `$n` and starts it.
pub(crate) async fn run(session: &Session, stmt: &Statement, params: Vec<ScalarValue>) -> Result<Output, SqlError> {
    let plan = session.plan(stmt).await?.with_param_values(ParamValues::from(params))?;
    let physical = session.physical_plan(stmt, &plan).await?;
    // The analyzed plan's columns: an unanalyzed set operation still has its first branch's types.
    let schema = session.result_schema(plan).await?;
    let stream = execute_stream(physical, session.task_context())?;
    Ok(Output::Rows { schema, stream })
}

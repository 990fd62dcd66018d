//! `INSERT INTO` / `INSERT OVERWRITE`: DataFusion plans the source (column lists, casts to
//! the table's types, parameters); we run it, write it in the table's layout and commit.

use std::sync::Arc;

use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, WriteOp};

use datafusion::common::{ParamValues, ScalarValue};
use datafusion::sql::sqlparser::ast::{Insert, Statement};

use crate::catalog::change::{CatalogChange, TableRef};
use crate::error::SqlError;
use crate::planner::table_provider::ParquetTable;
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::sql::write::insert_mode::write_mode;
use crate::sql::write::stage::write_and_publish;
use crate::sql::write::static_partitions;

/// Plans an INSERT; one with a `PARTITION (…)` spec is first rewritten into one DataFusion
/// plans ([`static_partitions::rewrite`]).
pub(crate) async fn plan(session: &Session, stmt: &Statement) -> Result<LogicalPlan, SqlError> {
    match stmt {
        Statement::Insert(insert) if insert.partitioned.is_some() => {
            let mut insert = insert.clone();
            static_partitions::rewrite(session, &mut insert)?;
            session.plan(&Statement::Insert(insert)).await
        }
        other => session.plan(other).await,
    }
}

/// Runs `INSERT INTO | OVERWRITE` with `params` bound to its `$n`.
pub(crate) async fn insert(
    session: &Session,
    stmt: &Statement,
    insert: &Insert,
    params: Vec<ScalarValue>,
) -> Result<Output, SqlError> {
    let plan = plan(session, stmt).await?.with_param_values(ParamValues::from(params))?;
    let LogicalPlan::Dml(DmlStatement { target, op, input, .. }) = plan else {
        return Err(SqlError::internal("INSERT did not plan to a write"));
    };
    let table = datafusion::datasource::source_as_provider(&target)?;
    let table = table
        .downcast_ref::<ParquetTable>()
        .ok_or_else(|| SqlError::feature_not_supported("only tables can be written to"))?;
    if !matches!(op, WriteOp::Insert(InsertOp::Append | InsertOp::Overwrite)) {
        return Err(SqlError::feature_not_supported(format!("{op} is not supported")));
    }
    let meta = table.meta();
    let mode = write_mode(session, insert, meta).await?;
    let table = TableRef::of(meta);
    let written = write_and_publish(session, meta, Arc::unwrap_or_clone(input), |files| CatalogChange::Write {
        table,
        mode,
        files,
    })
    .await?;
    Ok(Output::Command { tag: "INSERT", rows: Some(written.rows) })
}

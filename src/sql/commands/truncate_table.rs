//! `TRUNCATE TABLE t [PARTITION (col = value, …)]`, as Spark's `TruncateTableCommand`: the
//! table's files, or those of the partitions the spec matches, leave it when the transaction
//! commits; the partitions stay registered and the statistics go. The spec may name any of the
//! partition columns, and a spec no partition matches truncates nothing. External tables are
//! refused, as Spark refuses them: their files are not the table's to delete.

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Truncate};

use crate::catalog::change::{CatalogChange, TableRef};
use crate::catalog::table::WriteMode;
use crate::error::SqlError;
use crate::planner::table_provider::CATALOG_NAME;
use crate::sql::names::{described_table, table_name};
use crate::sql::output::Output;
use crate::sql::session::Session;
use crate::sql::write::static_partitions::partition_segments;

pub async fn truncate(session: &Session, truncate: &Truncate) -> Result<Output, SqlError> {
    let [target] = truncate.table_names.as_slice() else {
        return Err(SqlError::syntax("TRUNCATE TABLE takes one table"));
    };
    let (schema, name) = table_name(&target.name)?;
    let meta = described_table(session, &schema, &name)?;
    let qualified = format!("`{CATALOG_NAME}`.`{schema}`.`{name}`");
    if meta.external {
        return Err(SqlError::feature_not_supported(format!(
            "[CANNOT_TRUNCATE_EXTERNAL_TABLE] Operation not allowed: TRUNCATE TABLE on external tables: {qualified}."
        )));
    }
    let segments = match &truncate.partitions {
        None => Vec::new(),
        Some(_) if meta.partition_columns.is_empty() => {
            return Err(SqlError::feature_not_supported(format!(
                "Operation not allowed: TRUNCATE TABLE ... PARTITION is not supported for tables that are not \
                 partitioned: {qualified}."
            )));
        }
        Some(spec) => {
            let spec = spec.iter().map(partition_value).collect::<Result<Vec<_>, _>>()?;
            if let Some((column, _)) = spec.iter().find(|(c, _)| !meta.partition_columns.contains(c)) {
                return Err(SqlError::new(
                    "428FT",
                    format!("[PARTITIONS_NOT_FOUND] The partition(s) `{column}` cannot be found in table {qualified}."),
                ));
            }
            partition_segments(session, &meta, &spec).await?
        }
    };
    let change =
        CatalogChange::Write { table: TableRef::of(&meta), mode: WriteMode::Truncate(segments), files: Vec::new() };
    session.tables.write(change, None)?;
    Ok(Output::Command { tag: "TRUNCATE TABLE", rows: None })
}

/// `col = value` of a PARTITION spec, the column as the table names it.
fn partition_value(expr: &Expr) -> Result<(String, Expr), SqlError> {
    match expr {
        Expr::BinaryOp { left, op: BinaryOperator::Eq, right } => match left.as_ref() {
            Expr::Identifier(column) => Ok((column.value.to_lowercase(), right.as_ref().clone())),
            _ => Err(SqlError::syntax(format!("a PARTITION spec names a partition column: {expr}"))),
        },
        _ => Err(SqlError::syntax(format!("a PARTITION spec is col = value: {expr}"))),
    }
}

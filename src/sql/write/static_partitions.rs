//! `INSERT INTO | OVERWRITE TABLE t PARTITION (d = 'x', h) …`: Spark's partition spec.
//!
//! Columns given a value are static: every row goes to that partition, and the query supplies
//! the other columns. Columns named without a value, and partition columns not named, are
//! dynamic: their values come from the query's last columns, as without a spec. DataFusion
//! does not plan a spec, so the statement is rewritten into one it plans: the static values
//! become trailing columns of the source.
//!
//! An INSERT OVERWRITE with static values replaces the partitions under them, even when the
//! query returns no rows (Spark's `InsertIntoHadoopFsRelationCommand`); in `dynamic`
//! `partitionOverwriteMode` with dynamic columns left, it replaces the partitions written.

use std::collections::HashMap;

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Insert, ObjectName, SetExpr, Statement, TableObject};

use crate::catalog::table::TableMeta;
use crate::error::SqlError;
use crate::sql::dialect::{BucketSqlStatement, parse_sql};
use crate::sql::names::{existing_table, table_name};
use crate::sql::session::Session;
use crate::storage::partition_path::partition_path;

/// A spec's static columns, in the table's partition order.
pub struct StaticPartitions {
    pub values: Vec<(String, Expr)>,
    /// Some partition columns take their values from the query.
    pub partial: bool,
}

impl StaticPartitions {
    /// Reads and checks `insert`'s spec against the table's partition columns.
    pub fn of(insert: &Insert, meta: &TableMeta) -> Result<Self, SqlError> {
        let table = format!("{}.{}", meta.schema, meta.name);
        let mut given: HashMap<String, Option<Expr>> = HashMap::new();
        for item in insert.partitioned.as_deref().unwrap_or_default() {
            let (name, value) = match item {
                Expr::BinaryOp { left, op: BinaryOperator::Eq, right } => match left.as_ref() {
                    Expr::Identifier(column) => (column.value.to_lowercase(), Some(right.as_ref().clone())),
                    _ => return Err(SqlError::syntax(format!("invalid partition spec item {item}"))),
                },
                Expr::Identifier(column) => (column.value.to_lowercase(), None),
                _ => return Err(SqlError::syntax(format!("invalid partition spec item {item}"))),
            };
            check_partition_column(meta, &name)?;
            if given.insert(name.clone(), value).is_some() {
                return Err(SqlError::duplicate_column(format!("partition column {name} specified more than once")));
            }
        }
        let mut values = Vec::new();
        let mut partial = false;
        for column in &meta.partition_columns {
            match given.remove(column).flatten() {
                Some(_) if partial => {
                    return Err(SqlError::new(
                        "42000",
                        format!(
                            "dynamic partition cannot be the parent of a static partition: {column} (table {table})"
                        ),
                    ));
                }
                Some(value) => values.push((column.clone(), value)),
                None => partial = true,
            }
        }
        Ok(StaticPartitions { values, partial })
    }

    /// The directory of the static columns' values (`d=x`, `a=1/b=2`), each cast to its
    /// column's type and rendered as the writer renders it.
    pub async fn directory(&self, session: &Session, meta: &TableMeta) -> Result<String, SqlError> {
        let segments = partition_segments(session, meta, &self.values).await?;
        Ok(segments.join("/"))
    }
}

/// Refuses a partition spec naming a column that does not partition the table.
pub fn check_partition_column(meta: &TableMeta, name: &str) -> Result<(), SqlError> {
    if meta.partition_columns.iter().any(|c| c == name) {
        return Ok(());
    }
    Err(SqlError::new(
        "42000",
        format!(
            "PARTITION clause cannot contain the non-partition column: {name} (table {}.{})",
            meta.schema, meta.name
        ),
    ))
}

/// The `column=value` directory name of each partition value, cast to its column's type and
/// rendered as the writer renders it.
pub async fn partition_segments(
    session: &Session,
    meta: &TableMeta,
    values: &[(String, Expr)],
) -> Result<Vec<String>, SqlError> {
    if values.is_empty() {
        return Ok(Vec::new());
    }
    let casts: Vec<String> = values
        .iter()
        .map(|(name, value)| {
            let ty = meta.columns.iter().find(|c| &c.name == name).expect("a partition column").ty.ddl_name();
            format!("CAST({value} AS {ty})")
        })
        .collect();
    let batches = session.ctx.sql(&format!("SELECT {}", casts.join(", "))).await?.collect().await?;
    let batch = batches.first().ok_or_else(|| SqlError::internal("partition values returned no row"))?;
    values
        .iter()
        .zip(batch.columns())
        .map(|((name, _), array)| partition_path(&[(name.as_str(), array.clone())]))
        .collect()
}

/// The table an INSERT writes to.
pub fn insert_target(session: &Session, insert: &Insert) -> Result<TableMeta, SqlError> {
    let TableObject::TableName(name) = &insert.table else {
        return Err(SqlError::feature_not_supported("INSERT INTO a table function is not supported"));
    };
    let (schema, table) = table_name(name)?;
    existing_table(session, &schema, &table)
}

/// `insert` without its spec: the target columns are the query's (those listed, or every
/// column that is not static) followed by the static ones, whose values end the source's rows.
pub fn rewrite(session: &Session, insert: &mut Insert) -> Result<(), SqlError> {
    let meta = insert_target(session, insert)?;
    let spec = StaticPartitions::of(insert, &meta)?;
    let Some(source) = insert.source.take() else {
        return Err(SqlError::syntax("INSERT … PARTITION needs a query or VALUES"));
    };
    let is_static = |name: &str| spec.values.iter().any(|(column, _)| column == name);
    let mut columns: Vec<ObjectName> = std::mem::take(&mut insert.columns);
    columns.extend(std::mem::take(&mut insert.after_columns).into_iter().map(ObjectName::from));
    if columns.is_empty() {
        columns = meta
            .columns
            .iter()
            .filter(|c| !is_static(&c.name))
            .map(|c| ObjectName::from(vec![c.name.as_str().into()]))
            .collect();
    }
    columns.extend(spec.values.iter().map(|(name, _)| ObjectName::from(vec![name.as_str().into()])));
    let query = if spec.values.is_empty() {
        source
    } else if let SetExpr::Values(_) = source.body.as_ref() {
        // DataFusion types the rows of an INSERT's VALUES by the table's columns, also
        // inside a subquery: the static values go at the end of each row.
        let mut source = source;
        if let SetExpr::Values(values) = source.body.as_mut() {
            for row in &mut values.rows {
                row.extend(spec.values.iter().map(|(_, value)| value.clone()));
            }
        }
        source
    } else {
        let values: Vec<String> = spec.values.iter().map(|(_, value)| value.to_string()).collect();
        let select = format!("SELECT *, {} FROM ({source}) AS static_partition_source", values.join(", "));
        match parse_sql(&select)?.pop() {
            Some(BucketSqlStatement::Sql(Statement::Query(query))) => query,
            _ => return Err(SqlError::internal(format!("the rewritten INSERT source is not a query: {select}"))),
        }
    };
    insert.source = Some(query);
    insert.columns = columns;
    insert.partitioned = None;
    Ok(())
}

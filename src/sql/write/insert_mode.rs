//! How an INSERT's files join its table, whichever engine wrote them.

use datafusion::sql::sqlparser::ast::Insert;

use super::static_partitions::StaticPartitions;
use crate::catalog::table::{TableMeta, WriteMode};
use crate::error::SqlError;
use crate::sql::session::Session;

/// How an INSERT's files join `meta`: appended, or replacing the whole table, the static
/// partitions it names (their directory, `d=x`, and only that), or under Spark's
/// `spark.sql.sources.partitionOverwriteMode = dynamic` the partitions it writes.
pub(crate) async fn write_mode(session: &Session, insert: &Insert, meta: &TableMeta) -> Result<WriteMode, SqlError> {
    if !insert.overwrite {
        return Ok(WriteMode::Append);
    }
    let dynamic = session.spark_conf().dynamic_partition_overwrite;
    if insert.partitioned.is_some() {
        let spec = StaticPartitions::of(insert, meta)?;
        // Static values replace their directory, unless dynamic mode leaves the partitions
        // after them to the rows.
        let dynamic_below = dynamic && spec.partial;
        if !spec.values.is_empty() && !dynamic_below {
            return Ok(WriteMode::OverwriteUnder(spec.directory(session, meta).await?));
        }
    }
    Ok(if dynamic && !meta.partition_columns.is_empty() {
        WriteMode::OverwritePartitions
    } else {
        WriteMode::Overwrite
    })
}

//! The metastore's tables in Spark's catalog: before a statement runs on Spark, each table it
//! reads is registered there as an external table at its location, with its columns,
//! PARTITIONED BY and CLUSTERED BY / SORTED BY / INTO n BUCKETS (SHOW CREATE TABLE's DDL), so
//! that Spark reads it bucketed as it would its own. A table whose files changed since is
//! refreshed (Spark's REFRESH TABLE, and MSCK REPAIR TABLE … SYNC PARTITIONS for the
//! partitions of a partitioned one); one dropped, or recreated here, is dropped there too.
//!
//! Spark lists the table's directory: it sees the files the metastore lists, and also, for
//! the moment between an overwrite's commit and the janitor's removal of the files it
//! replaced, those. A block's uncommitted writes are not in the directory at all, so a
//! statement that would need them is refused.

use std::sync::Arc;

use datafusion::arrow::array::AsArray;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use futures::StreamExt;

use super::routing::Relations;
use crate::error::SqlError;
use crate::exec::spark_connect::{Registration, SparkConnect};
use crate::sql::session::Session;
use crate::sql::table_ddl::{REGISTERED_ID, quote_identifier, registration_statement};

/// Brings Spark's registrations of `relations` up to date, in Spark session `spark_session`.
pub(crate) async fn sync(
    session: &Session,
    spark: &Arc<SparkConnect>,
    spark_session: &str,
    relations: &Relations,
) -> Result<(), SqlError> {
    let mut registered = spark.registrations().await;
    for (schema, name) in &relations.missing {
        let key = qualified(schema, name);
        if registered.remove(&key).is_some() {
            spark.run(spark_session, format!("DROP TABLE IF EXISTS {key}")).await?;
        }
    }
    for table in &relations.tables {
        if session.tables.changed_in_block(&table.schema, &table.name) {
            return Err(SqlError::feature_not_supported(format!(
                "this transaction has changed `{}`.`{}` without committing, and Spark reads only what has committed: \
                 COMMIT first, or SET bucketsql.engine = local",
                table.schema, table.name
            )));
        }
        // A managed table has no directory before its first write; Spark lists one.
        let directory = table.location.local_for("running on Spark")?;
        std::fs::create_dir_all(directory)
            .map_err(|e| SqlError::storage(&format!("could not create {}", directory.display()), &e))?;
        let key = qualified(&table.schema, &table.name);
        let now = Registration { table_id: table.id, ddl: registration_statement(table), files_version: table.version };
        // Forgotten until Spark has it all, so that a failure part way registers it afresh.
        let before = registered.remove(&key);
        if before.as_ref() != Some(&now) {
            // The same table with the same DDL only needs its files read again.
            let registered_as_now = before.is_some_and(|b| b.table_id == now.table_id && b.ddl == now.ddl);
            if !registered_as_now {
                let schema = quote_identifier(&table.schema);
                spark.run(spark_session, format!("CREATE NAMESPACE IF NOT EXISTS {schema}")).await?;
                if registered_here(spark, spark_session, &key).await? == Some(false) {
                    return Err(SqlError::duplicate_table(format!(
                        "Spark's catalog has a table {key} of its own, which bucketsql does not replace"
                    )));
                }
                spark.run(spark_session, format!("DROP TABLE IF EXISTS {key}")).await?;
                spark.run(spark_session, now.ddl.clone()).await?;
            }
            if !table.partition_columns.is_empty() {
                spark.run(spark_session, format!("MSCK REPAIR TABLE {key} SYNC PARTITIONS")).await?;
            }
            if registered_as_now {
                spark.run(spark_session, format!("REFRESH TABLE {key}")).await?;
            }
        }
        registered.insert(key, now);
    }
    Ok(())
}

/// Whether Spark's catalog holds table `key` as a registration of this server's (its
/// [`REGISTERED_ID`] property), `None` when it holds no such table. A table of Spark's own is
/// never dropped: dropping a managed table deletes its data.
async fn registered_here(spark: &Arc<SparkConnect>, spark_session: &str, key: &str) -> Result<Option<bool>, SqlError> {
    let listing = spark.execute(spark_session, format!("SHOW TBLPROPERTIES {key} ('{REGISTERED_ID}')")).await;
    let mut rows = match listing {
        Ok(rows) => rows,
        Err(e) if e.code == "42P01" => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut ours = false;
    while let Some(batch) = rows.batches.next().await {
        let batch = batch?;
        // Spark answers (key, value), the value a note of its own when the table lacks the key.
        if let Some(values) = batch.columns().get(1) {
            let values = cast(values, &DataType::Utf8)?;
            let values = values.as_string::<i32>();
            ours |= values.iter().flatten().any(|v| v.parse::<i64>().is_ok());
        }
    }
    Ok(Some(ours))
}

/// Forgets every registration, so that the next statement registers its tables afresh (Spark
/// restarted, and its catalog with it).
pub(crate) async fn forget_all(spark: &SparkConnect) {
    spark.registrations().await.clear();
}

fn qualified(schema: &str, name: &str) -> String {
    format!("{}.{}", quote_identifier(schema), quote_identifier(name))
}

//! Functions Spark users expect, registered on every session: Spark's scalar, aggregate and
//! window functions where they differ from DataFusion's (`datafusion-spark`), Spark's
//! Murmur3 `hash`, and Spark's `range` table function.

pub mod range;
pub mod spark_hash;

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;

pub fn register(ctx: &mut SessionContext) -> Result<()> {
    datafusion_spark::register_all(ctx)?;
    ctx.register_udf(spark_hash::spark_hash_udf());
    ctx.register_udtf("range", Arc::new(range::SparkRange));
    Ok(())
}

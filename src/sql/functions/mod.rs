//! Functions Spark users expect, registered on every session: Spark's scalar, aggregate and
//! window functions where they differ from DataFusion's (`datafusion-spark`), Spark's
//! Murmur3 `hash`, Spark's `range` table function, and string builders bounded by the
//! memory limit.

pub mod bounded_strings;
pub mod range;
pub mod spark_hash;

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;

pub fn register(ctx: &mut SessionContext) -> Result<()> {
    datafusion_spark::register_all(ctx)?;
    ctx.register_udf(spark_hash::spark_hash_udf());
    let pool = Arc::clone(&ctx.runtime_env().memory_pool);
    let state = ctx.state();
    for udf in bounded_strings::bounded(|name| state.scalar_functions().get(name).cloned(), &pool) {
        ctx.register_udf(udf);
    }
    ctx.register_udtf("range", Arc::new(range::SparkRange));
    Ok(())
}

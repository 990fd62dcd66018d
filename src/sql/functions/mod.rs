//! Functions Spark users expect, registered on every session: Spark's scalar, aggregate and
//! window functions where they differ from DataFusion's (`datafusion-spark`), Spark's
//! Murmur3 `hash`, Spark's `range` table function, Spark's `sqrt`, logarithms, `exp` and `pow`, `abs` failing on overflow,
//! `ceil` and `floor` of floats as checked BIGINTs, `typeof`, `months_between`,
//! `element_at`, `try_element_at`, `get` and subscripts counted as Spark counts them,
//! `percentile` and `percentile_approx`, `skewness`, `kurtosis`, the variance family, covariances and `corr`, `initcap`, `div` and
//! `try_add`/`try_subtract`/`try_multiply`, `sum` and `try_sum` with checked BIGINT and DECIMAL
//! totals, `avg` of DECIMALs as DECIMALs, `round` and `bround` with Spark's DECIMAL types, `pmod`
//! failing on a zero divisor, `locate`, `split`, `date_trunc` and `trunc` in microseconds, `date_format` and `from_unixtime` with Spark's datetime
//! patterns, string builders bounded by the memory limit, and the generators (`explode`,
//! `posexplode`, `inline`, `stack`) where a FROM names them.

mod abs;
mod avg;
pub mod bounded_strings;
mod ceil_floor;
mod central_moments;
mod covariance;
mod date_format;
mod date_trunc;
pub mod element_at;
mod few_group_totals;
mod frame_doubles;
pub mod datetime_pattern;
mod initcap;
mod integral_divide;
mod locate;
mod max_min;
mod months_between;
mod overridden;
mod percentile;
mod percentile_approx;
mod pmod;
pub mod range;
mod round;
mod scalar_arguments;
pub mod spark_hash;
mod split;
pub mod make_date;
pub mod sqrt;
mod strict_math;
mod sum;
mod type_of;

use std::sync::Arc;

use datafusion::error::Result;
use datafusion::prelude::SessionContext;

use crate::config::{EvalMode, PrecisionLoss};
use crate::planner::ansi_arithmetic::Arithmetic;
use crate::planner::generate::GeneratorRelations;

/// The functions whose answers follow `spark.sql.ansi.enabled` or whose types follow
/// `spark.sql.decimalOperations.allowPrecisionLoss`, chosen when a statement is planned
/// (aggregates read no settings when they run, and no function's type does): `sum`, `avg`,
/// `try_add`, `try_subtract` and `try_multiply`.
pub fn register_expression_settings(ctx: &SessionContext, mode: EvalMode, loss: PrecisionLoss) {
    ctx.register_udaf(sum::spark_sum(mode));
    ctx.register_udaf(avg::spark_avg(mode));
    for arithmetic in Arithmetic::ALL {
        ctx.register_udf(arithmetic.try_udf(loss));
    }
}

pub fn register(ctx: &mut SessionContext) -> Result<()> {
    datafusion_spark::register_all(ctx)?;
    ctx.register_udf(spark_hash::spark_hash_udf());
    ctx.register_udf(integral_divide::integral_divide_udf());
    ctx.register_udf(round::spark_round());
    ctx.register_udf(round::spark_bround());
    ctx.register_udf(locate::spark_locate());
    ctx.register_udf(split::spark_split());
    ctx.register_udf(type_of::spark_typeof());
    for access in element_at::spark_element_access() {
        ctx.register_udf(access);
    }
    ctx.register_udf(months_between::spark_months_between());
    ctx.register_udaf(percentile_approx::spark_percentile_approx());
    ctx.register_udaf(percentile::spark_percentile());
    for moment in central_moments::spark_central_moments() {
        ctx.register_udaf(moment);
    }
    for covariance in covariance::spark_covariances() {
        ctx.register_udaf(covariance);
    }
    ctx.register_udf(date_format::spark_date_format());
    for function in strict_math::spark_strict_math() {
        ctx.register_udf(function);
    }
    for truncate in date_trunc::spark_date_truncs() {
        ctx.register_udf(truncate);
    }
    ctx.register_udf(date_format::spark_from_unixtime());
    let pool = Arc::clone(&ctx.runtime_env().memory_pool);
    let state = ctx.state();
    let lookup = |name: &str| state.scalar_functions().get(name).cloned();
    for udf in bounded_strings::bounded(lookup, &pool) {
        ctx.register_udf(udf);
    }
    if let Some(pmod) = pmod::spark_pmod(lookup) {
        ctx.register_udf(pmod);
    }
    for rounding in ceil_floor::spark_ceil_and_floor(lookup).into_iter().flatten() {
        ctx.register_udf(rounding);
    }
    if let Some(abs) = abs::spark_abs(lookup) {
        ctx.register_udf(abs);
    }
    if let Some(sqrt) = sqrt::spark_sqrt(lookup) {
        ctx.register_udf(sqrt);
    }
    if let Some(make_date) = make_date::spark_make_date(lookup) {
        ctx.register_udf(make_date);
    }
    if let Some(initcap) = initcap::spark_initcap(lookup) {
        ctx.register_udf(initcap);
    }
    let aggregate = |name: &str| state.aggregate_functions().get(name).cloned();
    register_expression_settings(ctx, EvalMode::Ansi, PrecisionLoss::Allowed);
    ctx.register_udaf(sum::spark_try_sum());
    for extremum in ["max", "min"] {
        if let Some(extremum) = max_min::spark_extremum(aggregate(extremum)) {
            ctx.register_udaf(extremum);
        }
    }
    ctx.register_udtf("range", Arc::new(range::SparkRange));
    ctx.register_relation_planner(Arc::new(GeneratorRelations))?;
    Ok(())
}

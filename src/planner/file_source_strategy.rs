//! Spark's `FileSourceStrategy` for one table scan: splits the query's filters into
//! partition filters (which skip Hive partition directories) and data filters (pushed to the
//! Parquet reader), prunes buckets, and decides whether the scan reads by bucket.
//!
//! Bucket pruning follows Spark: only for a single bucket column and more than one bucket;
//! `=`, `<=>`, `IN` and `IS NULL` on the bucket column select the buckets of their values,
//! `AND` intersects, `OR` unites, anything else keeps every bucket. Partition filters are
//! exact (a directory either matches or is skipped), data filters stay in the plan above the
//! scan as Spark's `Filter` does.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{BinaryExpr, Expr, Like, Operator};
use datafusion::optimizer::simplify_expressions::THRESHOLD_INLINE_INLIST;

use super::view_prefilter::view_prefilter;
use crate::catalog::table::{BucketSpec, DataFile, TableMeta};
use crate::config::SparkConf;
use crate::exec::file_partition::FileSplitting;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec, ScanFilters, ScanRequest};
use crate::exec::parquet_reads::CountedReads;
use crate::storage::bucket_hash::bucket_ids;
use crate::storage::object_stores::scan_path;
use crate::storage::partition_path::partition_values;

/// True when every column `expr` reads is a partition column.
pub fn is_partition_filter(expr: &Expr, partition_columns: &[String]) -> bool {
    let columns = expr.column_refs();
    !columns.is_empty() && columns.iter().all(|c| partition_columns.contains(&c.name))
}

pub async fn plan_scan(
    state: &dyn Session,
    table: Arc<TableMeta>,
    table_schema: SchemaRef,
    projection: Option<&Vec<usize>>,
    filters: &[Expr],
) -> Result<FileSourceScanExec> {
    let conf = SparkConf::of(state.config())?;
    let projection: Vec<usize> = projection.cloned().unwrap_or_else(|| (0..table_schema.fields().len()).collect());
    let df_schema = DFSchema::try_from(Arc::clone(&table_schema))?;

    let (partition_filters, data_filters): (Vec<&Expr>, Vec<&Expr>) = filters
        .iter()
        .flat_map(|f| split_conjunction(f))
        .partition(|f| is_partition_filter(f, &table.partition_columns));

    let files = prune_partitions(state, &table, &table_schema, &partition_filters)?;

    let selected_buckets = match table.bucket_spec.as_ref() {
        Some(spec) if conf.bucketing_enabled => prune_buckets(spec, &table_schema, &data_filters)?,
        _ => None,
    };

    let status = match table.bucket_spec.as_ref() {
        None => BucketedStatus::NotBucketedTable,
        Some(_) if !conf.bucketing_enabled => BucketedStatus::DisabledByConfiguration,
        Some(spec)
            if spec.bucket_columns.iter().all(|c| projection.iter().any(|i| table_schema.field(*i).name() == c)) =>
        {
            BucketedStatus::Bucketed
        }
        Some(_) => BucketedStatus::BucketColumnsNotRead,
    };

    let (store, _) = scan_path(&table.location).map_err(|e| DataFusionError::External(Box::new(e)))?;
    let store = state.runtime_env().object_store(&store)?;
    let physical = |e: &Expr| state.create_physical_expr(e.clone(), &df_schema);
    // Spark's reader prunes row groups with the pushed filters only. DataFusion's pruning
    // would also unwrap a narrowing cast (`cast(d as int) = 4` read as `d = 4`) and skip row
    // groups holding 4.9.
    let pushable = data_filters.iter().filter(|e| source_filter(e).is_some()).map(|e| (*e).clone());
    let predicate = conjunction(pushable).map(|e| physical(&e)).transpose()?;
    let scan_filters = ScanFilters {
        pushed: data_filters.iter().filter_map(|e| source_filter(e)).collect(),
        partition: partition_filters.iter().map(|e| physical(e)).collect::<Result<_>>()?,
        data: data_filters.iter().map(|e| physical(e)).collect::<Result<_>>()?,
    };
    // With record-level filtering, the reader filters before decoding the rest.
    let prefilter = match conf.record_level_filter {
        true => None,
        false => {
            let is_pushed = |e: &Expr| source_filter(e).is_some();
            view_prefilter(state, &table_schema, &projection, (&data_filters, is_pushed), &table.partition_columns)?
        }
    };
    FileSourceScanExec::try_new(ScanRequest {
        table,
        table_schema,
        projection,
        files,
        selected_buckets,
        status,
        sorted_output: conf.legacy_bucketed_scan_output_ordering,
        filters: scan_filters,
        predicate,
        splitting: FileSplitting {
            max_partition_bytes: conf.max_partition_bytes,
            open_cost: conf.open_cost_in_bytes,
            // Spark's default parallelism: the cores of `local[*]`.
            min_partitions: conf.min_partition_num.unwrap_or(state.config().target_partitions()),
        },
        record_level_filter: conf.record_level_filter,
        prefilter,
        reads: Arc::new(CountedReads::new(store, state.runtime_env().cache_manager.get_file_metadata_cache())),
    })
    .await
}

/// Keeps the files of partitions whose values satisfy every partition filter.
fn prune_partitions(
    state: &dyn Session,
    table: &TableMeta,
    schema: &Schema,
    filters: &[&Expr],
) -> Result<Vec<DataFile>> {
    if filters.is_empty() {
        return Ok(table.files.clone());
    }
    let columns: Vec<(String, DataType)> = table
        .partition_columns
        .iter()
        .map(|c| Ok((c.clone(), schema.field_with_name(c)?.data_type().clone())))
        .collect::<Result<_>>()?;
    let partition_schema = Arc::new(Schema::new(
        table.partition_columns.iter().map(|c| schema.field_with_name(c).cloned()).collect::<Result<Vec<_>, _>>()?,
    ));
    let df_schema = DFSchema::try_from(Arc::clone(&partition_schema))?;
    let predicate = state
        .create_physical_expr(conjunction(filters.iter().map(|e| (*e).clone())).expect("non-empty"), &df_schema)?;
    let mut verdicts: BTreeMap<&str, bool> = BTreeMap::new();
    for file in &table.files {
        if verdicts.contains_key(file.partition.as_str()) {
            continue;
        }
        let values = partition_values(&file.partition, &columns).map_err(|e| DataFusionError::External(Box::new(e)))?;
        let arrays = values.iter().map(|v| v.to_array()).collect::<Result<Vec<ArrayRef>>>()?;
        let row = RecordBatch::try_new(Arc::clone(&partition_schema), arrays)?;
        let result = predicate.evaluate(&row)?.into_array(1)?;
        let keep = ScalarValue::try_from_array(&result, 0)? == ScalarValue::Boolean(Some(true));
        verdicts.insert(&file.partition, keep);
    }
    Ok(table.files.iter().filter(|f| verdicts[f.partition.as_str()]).cloned().collect())
}

/// The buckets the filters can match, `None` when that is every bucket.
fn prune_buckets(spec: &BucketSpec, schema: &Schema, filters: &[&Expr]) -> Result<Option<Vec<bool>>> {
    let [column] = spec.bucket_columns.as_slice() else {
        return Ok(None);
    };
    if spec.num_buckets <= 1 || filters.is_empty() {
        return Ok(None);
    }
    let data_type = schema.field_with_name(column)?.data_type().clone();
    let pruner = BucketPruner { column, data_type, buckets: spec.num_buckets };
    let mut selected = vec![true; spec.num_buckets as usize];
    for filter in filters {
        if let Some(matched) = pruner.buckets_of(filter)? {
            selected.iter_mut().zip(matched).for_each(|(s, m)| *s &= m);
        }
    }
    Ok(if selected.iter().all(|s| *s) { None } else { Some(selected) })
}

struct BucketPruner<'a> {
    column: &'a str,
    data_type: DataType,
    buckets: u32,
}

impl BucketPruner<'_> {
    fn is_column(&self, expr: &Expr) -> bool {
        matches!(expr, Expr::Column(c) if c.name == self.column)
    }

    fn literal<'e>(&self, expr: &'e Expr) -> Option<&'e ScalarValue> {
        match expr {
            Expr::Literal(value, _) => Some(value),
            _ => None,
        }
    }

    fn bucket_set(&self, values: &[&ScalarValue]) -> Result<Vec<bool>> {
        let typed = values.iter().map(|v| v.cast_to(&self.data_type)).collect::<Result<Vec<_>>>()?;
        let array = ScalarValue::iter_to_array(typed)?;
        let mut set = vec![false; self.buckets as usize];
        for id in bucket_ids(&[array], values.len(), self.buckets)? {
            set[id as usize] = true;
        }
        Ok(set)
    }

    /// The buckets a filter can match, `None` for "any bucket".
    fn buckets_of(&self, expr: &Expr) -> Result<Option<Vec<bool>>> {
        match expr {
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq | Operator::IsNotDistinctFrom, right }) => {
                let value = match (self.is_column(left), self.is_column(right)) {
                    (true, false) => self.literal(right),
                    (false, true) => self.literal(left),
                    _ => None,
                };
                value.map(|v| self.bucket_set(&[v])).transpose()
            }
            Expr::InList(InList { expr, list, negated: false }) if self.is_column(expr) => {
                let values: Option<Vec<&ScalarValue>> = list.iter().map(|e| self.literal(e)).collect();
                values.map(|v| self.bucket_set(&v)).transpose()
            }
            Expr::IsNull(inner) if self.is_column(inner) => {
                let null = ScalarValue::try_from(&self.data_type)?;
                self.bucket_set(&[&null]).map(Some)
            }
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::And, right }) => {
                Ok(match (self.buckets_of(left)?, self.buckets_of(right)?) {
                    (Some(l), Some(r)) => Some(l.iter().zip(r).map(|(a, b)| *a && b).collect()),
                    (one, other) => one.or(other),
                })
            }
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
                Ok(match (self.buckets_of(left)?, self.buckets_of(right)?) {
                    (Some(l), Some(r)) => Some(l.iter().zip(r).map(|(a, b)| *a || b).collect()),
                    _ => None,
                })
            }
            _ => Ok(None),
        }
    }
}

/// A filter as Spark prints the data source filter it pushes (`EqualTo(k,42)`), `None` when
/// Spark would not push it.
pub fn source_filter(expr: &Expr) -> Option<String> {
    let column = |e: &Expr| match e {
        Expr::Column(c) => Some(c.name.clone()),
        _ => None,
    };
    let value = |e: &Expr| match e {
        Expr::Literal(v, _) if !v.is_null() => Some(literal_text(v)),
        _ => None,
    };
    Some(match expr {
        Expr::IsNotNull(inner) => format!("IsNotNull({})", column(inner)?),
        Expr::IsNull(inner) => format!("IsNull({})", column(inner)?),
        Expr::Not(inner) => format!("Not({})", source_filter(inner)?),
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let name = match op {
                Operator::And => return Some(format!("And({},{})", source_filter(left)?, source_filter(right)?)),
                Operator::Or => {
                    if let Some(in_list) = short_in_list(expr) {
                        return Some(in_list);
                    }
                    return Some(format!("Or({},{})", source_filter(left)?, source_filter(right)?));
                }
                Operator::Eq => "EqualTo",
                Operator::IsNotDistinctFrom => "EqualNullSafe",
                Operator::Lt => "LessThan",
                Operator::LtEq => "LessThanOrEqual",
                Operator::Gt => "GreaterThan",
                Operator::GtEq => "GreaterThanOrEqual",
                _ => return None,
            };
            match (column(left), value(right), column(right), value(left)) {
                (Some(c), Some(v), _, _) => format!("{name}({c},{v})"),
                (_, _, Some(c), Some(v)) => format!("{}({c},{v})", mirrored(name)),
                _ => return None,
            }
        }
        Expr::InList(InList { expr, list, negated }) => {
            let values: Option<Vec<String>> = list.iter().map(value).collect();
            let pushed = format!("In({}, [{}])", column(expr)?, values?.join(","));
            if *negated { format!("Not({pushed})") } else { pushed }
        }
        Expr::Like(Like { negated: false, expr, pattern, case_insensitive: false, .. }) => {
            let pattern = value(pattern)?;
            let body = pattern.strip_suffix('%')?;
            if body.contains(['%', '_']) {
                return None;
            }
            format!("StringStartsWith({},{body})", column(expr)?)
        }
        _ => return None,
    })
}

/// DataFusion's simplifier writes an IN list of up to three values on a column as equalities
/// joined by OR (`THRESHOLD_INLINE_INLIST`); Spark keeps the list, and pushes `In`. Where we
/// differ: such a disjunction written out by hand prints as `In` too, where Spark prints `Or`.
fn short_in_list(expr: &Expr) -> Option<String> {
    fn equalities<'e>(expr: &'e Expr, out: &mut Vec<(&'e Expr, &'e Expr)>) -> bool {
        match expr {
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Or, right }) => {
                equalities(left, out) && equalities(right, out)
            }
            Expr::BinaryExpr(BinaryExpr { left, op: Operator::Eq, right }) => {
                out.push((left, right));
                true
            }
            _ => false,
        }
    }
    let mut pairs = Vec::new();
    if !equalities(expr, &mut pairs) || pairs.len() > THRESHOLD_INLINE_INLIST {
        return None;
    }
    let mut column = None;
    let mut values = Vec::with_capacity(pairs.len());
    for (left, right) in pairs {
        let (Expr::Column(c), Expr::Literal(value, _)) = (left, right) else { return None };
        if value.is_null() || column.is_some_and(|name| name != &c.name) {
            return None;
        }
        column = Some(&c.name);
        values.push(literal_text(value));
    }
    Some(format!("In({}, [{}])", column?, values.join(",")))
}

fn mirrored(name: &str) -> &str {
    match name {
        "LessThan" => "GreaterThan",
        "LessThanOrEqual" => "GreaterThanOrEqual",
        "GreaterThan" => "LessThan",
        "GreaterThanOrEqual" => "LessThanOrEqual",
        other => other,
    }
}

/// A literal as Spark prints it in filters: text without quotes, dates as `2026-01-02`,
/// timestamps as Java's `Timestamp` prints them in UTC (`2026-01-02 03:04:05.0`).
pub fn literal_text(value: &ScalarValue) -> String {
    match value {
        ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) | ScalarValue::Utf8View(Some(s)) => s.clone(),
        ScalarValue::TimestampMicrosecond(Some(micros), _) => {
            java_timestamp(*micros).unwrap_or_else(|| value.to_string())
        }
        other => other.to_string(),
    }
}

/// `java.sql.Timestamp.toString`: the fraction of a second without its trailing zeros, but
/// never fewer than one digit.
fn java_timestamp(micros: i64) -> Option<String> {
    let time = chrono::DateTime::from_timestamp_micros(micros)?;
    let fraction = format!("{:06}", time.timestamp_subsec_micros());
    let fraction = fraction.trim_end_matches('0');
    let fraction = if fraction.is_empty() { "0" } else { fraction };
    Some(format!("{}.{fraction}", time.format("%Y-%m-%d %H:%M:%S")))
}

#[cfg(test)]
mod tests {
    use datafusion::logical_expr::{binary_expr, col, lit};

    use super::*;
    use crate::storage::bucket_hash::{SPARK_HASH_SEED, hash_long, pmod};

    fn spec() -> BucketSpec {
        BucketSpec { num_buckets: 8, bucket_columns: vec!["k".into()], sort_columns: vec![] }
    }

    fn schema() -> Schema {
        let field = |name| datafusion::arrow::datatypes::Field::new(name, DataType::Int64, true);
        Schema::new(vec![field("k"), field("b")])
    }

    fn bucket_of(v: i64) -> usize {
        pmod(hash_long(v, SPARK_HASH_SEED), 8) as usize
    }

    fn selected(filter: Expr) -> Option<Vec<usize>> {
        let schema = schema();
        prune_buckets(&spec(), &schema, &[&filter])
            .unwrap()
            .map(|s| s.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i).collect())
    }

    #[test]
    fn equality_in_and_or_prune_like_spark() {
        assert_eq!(selected(col("k").eq(lit(42i64))), Some(vec![bucket_of(42)]));
        let mut two = vec![bucket_of(1), bucket_of(2)];
        two.sort();
        two.dedup();
        assert_eq!(selected(col("k").in_list(vec![lit(1i64), lit(2i64)], false)), Some(two.clone()));
        assert_eq!(selected(col("k").eq(lit(1i64)).or(col("k").eq(lit(2i64)))), Some(two));
        assert_eq!(selected(col("k").eq(lit(1i64)).and(col("k").gt(lit(0i64)))), Some(vec![bucket_of(1)]));
        assert_eq!(selected(col("k").gt(lit(0i64))), None);
        assert_eq!(selected(col("k").eq(lit(1i64)).or(col("k").gt(lit(0i64)))), None);
        assert_eq!(selected(col("k").is_null()), Some(vec![pmod(SPARK_HASH_SEED, 8) as usize]));
        // A literal of another integer type is hashed as the column's type.
        assert_eq!(selected(col("k").eq(lit(42i32))), Some(vec![bucket_of(42)]));
    }

    #[test]
    fn pushed_filters_read_as_sparks() {
        assert_eq!(source_filter(&col("k").is_not_null()).unwrap(), "IsNotNull(k)");
        assert_eq!(source_filter(&col("k").eq(lit(42i64))).unwrap(), "EqualTo(k,42)");
        assert_eq!(source_filter(&lit(3i64).lt(col("k"))).unwrap(), "GreaterThan(k,3)");
        assert_eq!(source_filter(&col("s").like(lit("ab%"))).unwrap(), "StringStartsWith(s,ab)");
        assert!(source_filter(&(col("k") + lit(1i64)).eq(lit(2i64))).is_none());
        // A short IN list, as DataFusion rewrites it, prints as Spark prints the list.
        let two = col("k").eq(lit(5i64)).or(col("k").eq(lit(6i64)));
        assert_eq!(source_filter(&two).unwrap(), "In(k, [5,6])");
        let mixed = col("k").eq(lit(5i64)).or(col("j").eq(lit(6i64)));
        assert_eq!(source_filter(&mixed).unwrap(), "Or(EqualTo(k,5),EqualTo(j,6))");
        let noon = ScalarValue::TimestampMicrosecond(Some(1_704_456_000_120_000), Some("UTC".into()));
        assert_eq!(source_filter(&col("t").eq(lit(noon))).unwrap(), "EqualTo(t,2024-01-05 12:00:00.12)");
        let midnight = ScalarValue::TimestampMicrosecond(Some(1_704_412_800_000_000), None);
        assert_eq!(literal_text(&midnight), "2024-01-05 00:00:00.0");
    }

    /// The buckets a case expects.
    enum Expect {
        /// No pruning: every bucket is read.
        All,
        /// The buckets Spark's Murmur3 hash puts these values of `k` in (`None` for NULL).
        Of(&'static [Option<i64>]),
        /// Not one bucket can match.
        Nothing,
    }

    struct Case {
        name: &'static str,
        filters: fn() -> Vec<Expr>,
        expected: Expect,
    }

    fn null() -> Expr {
        lit(ScalarValue::Int64(None))
    }

    /// Spark's `FileSourceStrategy.getExpressionBuckets` (and `BucketedReadSuite`'s pruning
    /// cases): `=`, `<=>`, `IN` and `IS NULL` on the one bucket column select the buckets of
    /// their values, `AND` intersects, `OR` unites, anything else reads every bucket; the data
    /// filters of a scan are ANDed.
    const CASES: &[Case] = &[
        Case { name: "k = 42", filters: || vec![col("k").eq(lit(42i64))], expected: Expect::Of(&[Some(42)]) },
        Case { name: "42 = k", filters: || vec![lit(42i64).eq(col("k"))], expected: Expect::Of(&[Some(42)]) },
        Case {
            name: "k <=> 42",
            filters: || vec![binary_expr(col("k"), Operator::IsNotDistinctFrom, lit(42i64))],
            expected: Expect::Of(&[Some(42)]),
        },
        Case {
            name: "k = 42 with an int literal, hashed as the column's bigint",
            filters: || vec![col("k").eq(lit(42i32))],
            expected: Expect::Of(&[Some(42)]),
        },
        Case {
            name: "k IN (1, 2, 3)",
            filters: || vec![col("k").in_list(vec![lit(1i64), lit(2i64), lit(3i64)], false)],
            expected: Expect::Of(&[Some(1), Some(2), Some(3)]),
        },
        Case {
            name: "k IN (1, NULL)",
            filters: || vec![col("k").in_list(vec![lit(1i64), null()], false)],
            expected: Expect::Of(&[Some(1), None]),
        },
        Case {
            name: "k NOT IN (1, 2)",
            filters: || vec![col("k").in_list(vec![lit(1i64), lit(2i64)], true)],
            expected: Expect::All,
        },
        Case { name: "k IS NULL", filters: || vec![col("k").is_null()], expected: Expect::Of(&[None]) },
        Case { name: "k IS NOT NULL", filters: || vec![col("k").is_not_null()], expected: Expect::All },
        Case { name: "k > 0", filters: || vec![col("k").gt(lit(0i64))], expected: Expect::All },
        Case { name: "NOT k = 1", filters: || vec![!col("k").eq(lit(1i64))], expected: Expect::All },
        Case { name: "b = 1, not the bucket column", filters: || vec![col("b").eq(lit(1i64))], expected: Expect::All },
        Case { name: "k = b, no literal", filters: || vec![col("k").eq(col("b"))], expected: Expect::All },
        Case {
            name: "k = 1 AND k > 0",
            filters: || vec![col("k").eq(lit(1i64)).and(col("k").gt(lit(0i64)))],
            expected: Expect::Of(&[Some(1)]),
        },
        Case {
            name: "k = 1 AND b = 2",
            filters: || vec![col("k").eq(lit(1i64)).and(col("b").eq(lit(2i64)))],
            expected: Expect::Of(&[Some(1)]),
        },
        Case {
            name: "k = 1 AND k IN (1, 2)",
            filters: || vec![col("k").eq(lit(1i64)).and(col("k").in_list(vec![lit(1i64), lit(2i64)], false))],
            expected: Expect::Of(&[Some(1)]),
        },
        Case {
            name: "k = 1 AND k = 3, in different buckets",
            filters: || vec![col("k").eq(lit(1i64)).and(col("k").eq(lit(3i64)))],
            expected: Expect::Nothing,
        },
        Case {
            name: "k = 1 OR k = 2",
            filters: || vec![col("k").eq(lit(1i64)).or(col("k").eq(lit(2i64)))],
            expected: Expect::Of(&[Some(1), Some(2)]),
        },
        Case {
            name: "k = 1 OR k IS NULL",
            filters: || vec![col("k").eq(lit(1i64)).or(col("k").is_null())],
            expected: Expect::Of(&[Some(1), None]),
        },
        Case {
            name: "k = 1 OR b = 2",
            filters: || vec![col("k").eq(lit(1i64)).or(col("b").eq(lit(2i64)))],
            expected: Expect::All,
        },
        Case {
            name: "two filters, k = 1 and k IN (1, 2)",
            filters: || vec![col("k").eq(lit(1i64)), col("k").in_list(vec![lit(1i64), lit(2i64)], false)],
            expected: Expect::Of(&[Some(1)]),
        },
        Case {
            name: "two filters, k IN (1, 2) and b > 0",
            filters: || vec![col("k").in_list(vec![lit(1i64), lit(2i64)], false), col("b").gt(lit(0i64))],
            expected: Expect::Of(&[Some(1), Some(2)]),
        },
    ];

    /// Spark hashes NULL to the seed.
    fn bucket_of_value(value: Option<i64>) -> usize {
        value.map_or(pmod(SPARK_HASH_SEED, 8) as usize, bucket_of)
    }

    #[test]
    fn predicates_select_the_buckets_spark_selects() {
        assert_ne!(bucket_of(1), bucket_of(3), "the AND case needs two values in different buckets");
        let schema = schema();
        for case in CASES {
            let filters = (case.filters)();
            let refs: Vec<&Expr> = filters.iter().collect();
            let pruned = prune_buckets(&spec(), &schema, &refs).unwrap();
            let selected =
                pruned.map(|s| s.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i).collect::<Vec<_>>());
            let expected = match case.expected {
                Expect::All => None,
                Expect::Nothing => Some(vec![]),
                Expect::Of(values) => {
                    let mut buckets: Vec<usize> = values.iter().map(|v| bucket_of_value(*v)).collect();
                    buckets.sort();
                    buckets.dedup();
                    Some(buckets)
                }
            };
            assert_eq!(selected, expected, "{}", case.name);
        }
    }

    /// The buckets a scan of `table` planned with `filters` under `settings` reads.
    fn planned_buckets(table: Arc<TableMeta>, filters: &[Expr], settings: &[(&str, &str)]) -> (BucketedStatus, usize) {
        use datafusion::prelude::{SessionConfig, SessionContext};
        let config = SessionConfig::new().with_extension(Arc::new(crate::planner::test_fixtures::conf(settings)));
        let state = SessionContext::new_with_config(config).state();
        let schema = crate::planner::table_provider::table_schema(&table).unwrap();
        let scan = futures::executor::block_on(plan_scan(&state, table, schema, None, filters)).unwrap();
        (scan.status(), scan.selected_bucket_count().unwrap())
    }

    #[test]
    fn buckets_are_pruned_only_where_spark_prunes_them() {
        use crate::planner::test_fixtures::table_of;
        const KB: &[(&str, &str)] = &[("k", "bigint"), ("b", "bigint")];
        let by_k = || table_of("t", KB, Some((8, &["k"])), 1, &[]);
        let equal = [col("k").eq(lit(42i64))];
        assert_eq!(planned_buckets(by_k(), &equal, &[]), (BucketedStatus::Bucketed, 1));
        // spark.sql.sources.bucketing.enabled=false: the table is read as if it had no buckets.
        let off = [("spark.sql.sources.bucketing.enabled", "false")];
        assert_eq!(planned_buckets(by_k(), &equal, &off), (BucketedStatus::DisabledByConfiguration, 8));
        // Only a table bucketed by one column is pruned.
        let by_k_b = table_of("t", KB, Some((8, &["k", "b"])), 1, &[]);
        assert_eq!(planned_buckets(by_k_b, &equal, &[]), (BucketedStatus::Bucketed, 8));
        // One bucket: nothing to prune.
        let one = table_of("t", KB, Some((1, &["k"])), 1, &[]);
        assert_eq!(planned_buckets(one, &equal, &[]), (BucketedStatus::Bucketed, 1));
    }

    /// A plain table's file read in splits: each split reads the row groups whose midpoint
    /// (the start of the row group's first column chunk plus half the row group's compressed
    /// size) lies in its byte range, as Spark's Parquet reader gives them. One split ends just
    /// past the start of the second row group, before its midpoint: that row group is the
    /// next split's.
    #[tokio::test]
    async fn a_split_reads_the_row_groups_whose_midpoint_lies_in_it() {
        use datafusion::arrow::array::{AsArray, Int64Array};
        use datafusion::arrow::datatypes::{Field, Int64Type};
        use datafusion::parquet::arrow::ArrowWriter;
        use datafusion::parquet::file::properties::WriterProperties;
        use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
        use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, collect_partitioned};
        use datafusion::prelude::{SessionConfig, SessionContext};

        use crate::catalog::location::Location;
        use crate::planner::test_fixtures::{conf, table_of};

        const GROUP_ROWS: i64 = 1000;
        let dir = tempfile::tempdir().unwrap();
        let mut table = (*table_of("t", &[("id", "bigint")], None, 1, &[])).clone();
        table.location = Location::Local(dir.path().to_path_buf());
        let path = dir.path().join(&table.files[0].path);
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
        let properties = WriterProperties::builder().set_max_row_group_row_count(Some(GROUP_ROWS as usize)).build();
        let mut writer = ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, Some(properties)).unwrap();
        let ids = Arc::new(Int64Array::from_iter_values(0..4 * GROUP_ROWS)) as ArrayRef;
        writer.write(&RecordBatch::try_from_iter([("id", ids)]).unwrap()).unwrap();
        writer.close().unwrap();
        table.files[0].byte_size = std::fs::metadata(&path).unwrap().len();

        let footer = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        let groups: Vec<(u64, u64)> = footer
            .metadata()
            .row_groups()
            .iter()
            .map(|group| (group.column(0).byte_range().0, group.compressed_size() as u64))
            .collect();
        assert_eq!(groups.len(), 4);
        let (second_start, second_size) = groups[1];
        let split = second_start + second_size / 4;
        let settings = [
            ("spark.sql.files.maxPartitionBytes", split.to_string()),
            ("spark.sql.files.openCostInBytes", "0".to_string()),
            ("spark.sql.files.minPartitionNum", "1".to_string()),
        ];
        let settings: Vec<(&str, &str)> = settings.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut config = SessionConfig::new().with_extension(Arc::new(conf(&settings)));
        // As our sessions run: each partition reads its own splits.
        config.options_mut().execution.enable_file_stream_work_stealing = false;
        let state = SessionContext::new_with_config(config).state();
        let table = Arc::new(table);
        let scan = plan_scan(
            &state,
            Arc::clone(&table),
            crate::planner::table_provider::table_schema(&table).unwrap(),
            None,
            &[],
        )
        .await
        .unwrap();

        // The ids each split reads, by Spark's rule: row group g holds ids 1000 g .. 1000 (g + 1).
        let splits = table.files[0].byte_size.div_ceil(split);
        let mut expected: Vec<Vec<i64>> = (0..splits)
            .map(|i| {
                let range = i * split..(i + 1) * split;
                let midpoint = |(start, size): &(u64, u64)| start + size / 2;
                let read = groups.iter().enumerate().filter(|(_, group)| range.contains(&midpoint(group)));
                read.flat_map(|(g, _)| g as i64 * GROUP_ROWS..(g as i64 + 1) * GROUP_ROWS).collect()
            })
            .collect();
        assert_eq!(expected[0], (0..GROUP_ROWS).collect::<Vec<_>>(), "the first split reads the first group alone");
        let plan: Arc<dyn ExecutionPlan> = Arc::new(scan);
        assert_eq!(plan.output_partitioning().partition_count() as u64, splits);
        let mut read: Vec<Vec<i64>> = collect_partitioned(plan, state.task_ctx())
            .await
            .unwrap()
            .iter()
            .map(|batches| {
                batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect()
            })
            .collect();
        // Each split's ids as ranges, for short messages.
        let ranges = |splits: &mut Vec<Vec<i64>>| {
            splits.sort();
            splits.iter().map(|ids| ids.first().map(|first| (*first, ids.len()))).collect::<Vec<_>>()
        };
        assert_eq!(ranges(&mut read), ranges(&mut expected));
        assert_eq!(read, expected);
    }
}

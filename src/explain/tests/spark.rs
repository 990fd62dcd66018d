//! Spark's own FORMATTED plans (`tests/data/spark-plans-4.3.0.txt`), read back as for a
//! statement that runs on Spark: the advice they give is the advice our plan of the same
//! shape gives, and the bucketing section explains Spark's exchanges and scans.

use super::*;

/// Spark's FORMATTED plan of the case titled `title`.
fn spark_case(title: &str) -> &'static str {
    let text = include_str!("../../../tests/data/spark-plans-4.3.0.txt");
    let case = text.split("\n==================== ").find(|c| c.starts_with(title)).expect("a case");
    let plan = &case[case.find("== Physical Plan ==").expect("a plan")..];
    plan.split("\n====").next().expect("a plan")
}

fn tables(tables: &[&Arc<TableMeta>]) -> Vec<TableMeta> {
    tables.iter().map(|t| t.as_ref().clone()).collect()
}

/// The advice of Spark's plan `text` of a query over `tables`, and of our plan `plan` of it.
fn both_advice(text: &str, tables: &[TableMeta], plan: &Plan, conf: &SparkConf) -> (Option<String>, Option<String>) {
    let root = plan::parse_formatted(text, tables).expect("Spark's plan read");
    (advice::spark_section(&root, tables, conf), advice::section(plan, &spark_plan(plan), conf))
}

fn plain(name: &str, columns: &[(&str, &str)]) -> Plan {
    not_null(Scan::new(table(name, columns, None, &[])).not_null("account_id").build(), "account_id")
}

#[test]
fn unbucketed_joins_are_advised_from_sparks_plan_as_from_ours() {
    let (tx_plain, acc_plain) = (table("tx_plain", TX, None, &[]), table("acc_plain", ACC, None, &[]));
    let (left, right) = (plain("tx_plain", TX), plain("acc_plain", ACC));
    let (left_key, right_key) = (column(&left, "account_id"), column(&right, "account_id"));
    let plan = sort_merge(shuffle(left, left_key, 200, None), shuffle(right, right_key, 200, None));
    for conf in [SparkConf::default(), conf(&[("spark.sql.autoBroadcastJoinThreshold", "-1")])] {
        let (spark, ours) = both_advice(spark_case("A3 "), &tables(&[&tx_plain, &acc_plain]), &plan, &conf);
        assert_eq!(spark, ours);
        let spark = spark.expect("advice");
        // Broadcasting the smaller side is the first advice; bucketing both the next.
        let expected = if conf.auto_broadcast_join_threshold < 0 {
            "JoinSelection: the `tx_plain` side is estimated at 4.0 KiB"
        } else {
            "Exchange (4) and Exchange (9) shuffle `tx_plain` and `acc_plain`"
        };
        assert!(spark.contains(expected), "{spark}");
    }
}

#[test]
fn a_one_sided_shuffle_is_advised_from_sparks_plan_as_from_ours() {
    let (tx, acc_plain) = (table("tx", TX, Some(8), &[]), table("acc_plain", ACC, None, &[]));
    let right = self::acc_plain();
    let key = column(&right, "account_id");
    let plan = sort_merge(self::tx(), shuffle(right, key, 8, None));
    let conf = conf(&[("spark.sql.autoBroadcastJoinThreshold", "-1")]);
    let (spark, ours) = both_advice(spark_case("A4 "), &tables(&[&tx, &acc_plain]), &plan, &conf);
    assert_eq!(spark, ours);
    let spark = spark.expect("advice");
    assert!(spark.contains("Exchange (8) shuffles `acc_plain`, which is not bucketed, into the 8 buckets of `tx`"));
}

#[test]
fn mismatched_bucket_counts_are_explained_from_sparks_plan() {
    let (tx, acc6) = (table("tx", TX, Some(8), &[]), table("acc6", ACC, Some(6), &[]));
    let scan = Scan::new(Arc::clone(&acc6)).status(BucketedStatus::DisabledByQueryPlanner).not_null("account_id");
    let right = not_null(scan.build(), "account_id");
    let key = column(&right, "account_id");
    let plan = sort_merge(self::tx(), shuffle(right, key, 8, None));
    let tables = tables(&[&tx, &acc6]);
    let conf = SparkConf::default();
    let (spark, ours) = both_advice(spark_case("A5 "), &tables, &plan, &conf);
    assert_eq!(spark, ours);
    assert!(spark.expect("advice").contains("`acc6` and `tx` are bucketed into 6 and 8 buckets, so Exchange (8)"));

    let root = plan::parse_formatted(spark_case("A5 "), &tables).expect("Spark's plan read");
    assert_eq!(
        bucketing::section(&root, false).expect("a section"),
        "\n== Extended Information (Bucketing) ==\n\
         Scan parquet spark_catalog.default.acc6 (5) is not bucketed: disabled by query planner \
         (Exchange (8) above it redistributes its rows anyway).\n\
         Exchange (8) shuffles its input by hashpartitioning(account_id#44L, 8) for SortMergeJoin Inner (10).\n"
    );
}

#[test]
fn a_join_on_another_key_is_advised_from_sparks_plan_as_from_ours() {
    let (tx, acc) = (table("tx", TX, Some(8), &[]), table("acc", ACC, Some(8), &[]));
    let left = not_null(
        Scan::new(Arc::clone(&tx)).status(BucketedStatus::DisabledByQueryPlanner).not_null("amount").build(),
        "amount",
    );
    let right = not_null(
        Scan::new(Arc::clone(&acc)).status(BucketedStatus::DisabledByQueryPlanner).not_null("account_id").build(),
        "account_id",
    );
    let (left_key, right_key) = (column(&left, "amount"), column(&right, "account_id"));
    let left = local_sort(shuffle(left, Arc::clone(&left_key), 200, None), Arc::clone(&left_key));
    let right = local_sort(shuffle(right, Arc::clone(&right_key), 200, None), Arc::clone(&right_key));
    let plan = join(JoinStrategy::SortMerge, None, left, right, (left_key, right_key));
    let (spark, ours) = both_advice(spark_case("A14 "), &tables(&[&tx, &acc]), &plan, &SparkConf::default());
    assert_eq!(spark, ours);
    let spark = spark.expect("advice");
    assert!(spark.contains("this join is on (amount) but `tx` is bucketed by (account_id)"), "{spark}");
}

//! Tests of the dialect as a whole: statement splitting, dispatch and display, the forms stock
//! sqlparser parses unchanged, and parity with [`GenericDialect`] for ordinary queries; with the
//! helpers the tests of each statement family share.

use datafusion::sql::sqlparser::ast::{DataType, Ident, Select, SetExpr, ShowStatementInClause, Value};

use super::*;

/// The one statement of `sql`.
pub(super) fn bucket_statement(sql: &str) -> BucketSqlStatement {
    let mut statements = parse_sql(sql).unwrap_or_else(|e| panic!("failed to parse {sql:?}: {e}"));
    assert_eq!(statements.len(), 1, "{sql}");
    statements.remove(0)
}

/// The parse error of `sql`.
pub(super) fn error(sql: &str) -> String {
    match parse_sql(sql) {
        Ok(statements) => panic!("expected an error for {sql:?}, got {statements:?}"),
        Err(e) => e.to_string(),
    }
}

pub(super) fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub(super) fn set(name: &str, value: Option<&str>) -> BucketSqlStatement {
    BucketSqlStatement::SetVariable { name: name.to_string(), value: value.map(str::to_string) }
}

pub(super) fn show(name: Option<&str>) -> BucketSqlStatement {
    BucketSqlStatement::ShowVariable { name: name.map(str::to_string) }
}

pub(super) fn reset(name: Option<&str>) -> BucketSqlStatement {
    BucketSqlStatement::Reset { name: name.map(str::to_string) }
}

fn select_of(statement: &Statement) -> &Select {
    let Statement::Query(query) = statement else {
        panic!("expected a query, got {statement:?}");
    };
    let SetExpr::Select(select) = query.body.as_ref() else {
        panic!("expected a SELECT, got {query:?}");
    };
    select
}

#[test]
fn insert_forms() {
    for (sql, overwrite, table, columns, source) in [
        ("INSERT OVERWRITE TABLE t SELECT * FROM s", true, "t", vec![], "SELECT * FROM s"),
        ("INSERT OVERWRITE t SELECT 1, 2", true, "t", vec![], "SELECT 1, 2"),
        ("INSERT OVERWRITE TABLE t (a, b) SELECT 1, 2", true, "t", vec!["a", "b"], "SELECT 1, 2"),
        ("INSERT INTO t VALUES (1, 'x'), (2, 'y')", false, "t", vec![], "VALUES (1, 'x'), (2, 'y')"),
        ("INSERT INTO TABLE s.t (a) VALUES (1)", false, "s.t", vec!["a"], "VALUES (1)"),
        ("INSERT INTO TABLE t SELECT a FROM u", false, "t", vec![], "SELECT a FROM u"),
    ] {
        let Statement::Insert(insert) = parse_one(sql) else {
            panic!("expected INSERT for {sql}");
        };
        assert_eq!(insert.overwrite, overwrite, "{sql}");
        assert_eq!(insert.table.to_string(), table, "{sql}");
        let insert_columns: Vec<String> = insert.columns.iter().map(|c| c.to_string()).collect();
        assert_eq!(insert_columns, columns, "{sql}");
        assert_eq!(insert.source.expect("source").to_string(), source, "{sql}");
    }
}

#[test]
fn show_forms() {
    let Statement::ShowTables { show_options, .. } = parse_one("SHOW TABLES") else {
        panic!("expected SHOW TABLES");
    };
    assert!(show_options.show_in.is_none());
    for (sql, clause) in
        [("SHOW TABLES IN s", ShowStatementInClause::IN), ("SHOW TABLES FROM s", ShowStatementInClause::FROM)]
    {
        let Statement::ShowTables { show_options, .. } = parse_one(sql) else {
            panic!("expected SHOW TABLES for {sql}");
        };
        let show_in = show_options.show_in.expect("IN");
        assert_eq!(show_in.clause, clause);
        assert_eq!(show_in.parent_name.expect("schema").to_string(), "s");
    }
    let Statement::ShowCreate { obj_type, obj_name } = parse_one("SHOW CREATE TABLE s.t") else {
        panic!("expected SHOW CREATE TABLE");
    };
    assert_eq!(obj_type, datafusion::sql::sqlparser::ast::ShowCreateObject::Table);
    assert_eq!(obj_name.to_string(), "s.t");
}

#[test]
fn dialect_parses_bare_reset() {
    assert_eq!(
        Parser::parse_sql(&BucketSqlDialect, "RESET").unwrap(),
        [Statement::Reset(ResetStatement { reset: Reset::ALL })]
    );
}

#[test]
fn display() {
    for (sql, text) in [
        ("SET k = 'v'", "SET k = v"),
        ("SET k", "SET k"),
        ("SET", "SHOW ALL"),
        ("SHOW x", "SHOW x"),
        ("RESET", "RESET"),
        ("RESET k", "RESET k"),
        ("SHOW PARTITIONS t", "SHOW PARTITIONS t"),
        (
            "SHOW PARTITIONS t PARTITION (d = '2024-01-01', h = 3)",
            "SHOW PARTITIONS t PARTITION (d = '2024-01-01', h = 3)",
        ),
        ("select 1", "SELECT 1"),
    ] {
        assert_eq!(bucket_statement(sql).to_string(), text, "{sql}");
    }
}

#[test]
fn several_statements() {
    let statements = parse_sql("SET; SET k; RESET;; SELECT 1; SHOW PARTITIONS t;").unwrap();
    assert_eq!(statements.len(), 5);
    assert_eq!(statements[0], show(None));
    assert_eq!(statements[1], set("k", None));
    assert_eq!(statements[2], reset(None));
    assert!(matches!(statements[3], BucketSqlStatement::Sql(Statement::Query(_))));
    assert!(matches!(statements[4], BucketSqlStatement::ShowPartitions { .. }));
    let statements =
        parse_sql("CREATE TABLE t (k INT) USING parquet CLUSTERED BY (k) INTO 2 BUCKETS; SELECT 1;").unwrap();
    assert_eq!(statements.len(), 2);
    assert!(matches!(
        &statements[0],
        BucketSqlStatement::Sql(Statement::CreateTable(ct)) if ct.clustered_by.is_some()
    ));
    assert!(parse_sql("").unwrap().is_empty());
    assert!(error("SELECT 1 SELECT 2").contains("Expected: end of statement"));
}

#[test]
fn optimize_and_transactions() {
    let Statement::OptimizeTable { name, .. } = parse_one("OPTIMIZE s.t") else {
        panic!("expected OPTIMIZE");
    };
    assert_eq!(name.to_string(), "s.t");
    assert!(matches!(parse_one("BEGIN"), Statement::StartTransaction { begin: true, .. }));
    assert!(matches!(parse_one("START TRANSACTION"), Statement::StartTransaction { begin: false, .. }));
    assert!(matches!(parse_one("COMMIT"), Statement::Commit { .. }));
    assert!(matches!(parse_one("ROLLBACK"), Statement::Rollback { .. }));
}

#[test]
fn literals_and_identifiers() {
    let stmt = parse_one("SELECT $1, x::text, E'a\\nb', \"Mixed Case\", `spark col` FROM \"S\".`t`");
    let select = select_of(&stmt);
    let items: Vec<&Expr> = select
        .projection
        .iter()
        .map(|item| match item {
            datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(expr) => expr,
            other => panic!("unexpected select item {other:?}"),
        })
        .collect();
    assert!(matches!(items[0], Expr::Value(v) if v.value == Value::Placeholder("$1".to_string())));
    assert!(matches!(items[1], Expr::Cast { data_type: DataType::Text, .. }));
    assert!(matches!(
        items[2],
        Expr::Value(v) if v.value == Value::EscapedStringLiteral("a\nb".to_string())
    ));
    assert_eq!(items[3], &Expr::Identifier(Ident::with_quote('"', "Mixed Case")));
    assert_eq!(items[4], &Expr::Identifier(Ident::with_quote('`', "spark col")));
    assert_eq!(select.from[0].relation.to_string(), "\"S\".`t`");
}

/// Ordinary PostgreSQL and Spark queries parse, and exactly as with `GenericDialect` (hint
/// comments included, which the planner reads from the AST).
#[test]
fn postgres_queries_parse_as_with_generic_dialect() {
    for sql in [
        "SELECT a.id, b.name FROM a INNER JOIN b ON a.id = b.id LEFT JOIN c USING (id) \
         WHERE a.x > 1 AND b.y IS NOT NULL ORDER BY 1 DESC NULLS LAST LIMIT 10 OFFSET 5",
        "WITH t AS (SELECT 1 AS k), u AS (SELECT k FROM t) SELECT * FROM u",
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) \
         SELECT sum(n) FROM r",
        "SELECT k, row_number() OVER (PARTITION BY k ORDER BY v DESC) AS rn, \
         sum(v) OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
        "SELECT * FROM t WHERE id = $1 AND name = $2",
        "SELECT x::text, CAST(y AS BIGINT), z::timestamp FROM t",
        "SELECT * FROM generate_series(1, 10) AS g(i)",
        "SELECT E'a\\nb', 'it''s', \"Quoted Col\" FROM \"Some Table\"",
        "SELECT `a b` FROM `db`.`t`",
        "SELECT count(*) FILTER (WHERE x > 0), string_agg(s, ',') FROM t GROUP BY ALL",
        "SELECT CASE WHEN a THEN 1 ELSE 2 END, coalesce(b, 0), a BETWEEN 1 AND 2 FROM t",
        "SELECT * FROM t WHERE k IN (SELECT k FROM u) AND EXISTS (SELECT 1 FROM v)",
        "SELECT date_trunc('day', ts), interval '1 day', now() - ts FROM t",
        "SELECT a FROM t UNION SELECT b FROM u EXCEPT SELECT c FROM v",
        "SELECT array_agg(x ORDER BY y) FROM t HAVING count(*) > 1",
        "SELECT /*+ BROADCAST(c) */ * FROM o JOIN c USING (customer_id)",
        "SELECT /*+ BROADCAST(a), merge(b, `c`) shuffle_hash(\"d\") COALESCE(3) */ * \
         FROM a JOIN b ON a.k = b.k",
        "SELECT /*+ REPARTITION(4, t.c, f(x, y)), NOARGS, EMPTY() */ * FROM t",
        "SELECT /*+ BROADCAST(a) */ /*+ MERGE(b) */ * FROM a, b",
        "SELECT /*+ BROADCAST(a) ?? MERGE(b) */ * FROM a",
        "SELECT /*+ BROADCAST(a */ * FROM a",
        "SELECT /* BROADCAST(a) */ * FROM a",
        "SELECT --+ BROADCAST(a)\n * FROM a",
        "INSERT INTO t SELECT /*+ BROADCAST(s) */ * FROM s JOIN u USING (k)",
        "SELECT t.* FROM t WHERE s LIKE 'a%' OR s ILIKE 'b%' OR s ~ 'c'",
        "SELECT current_setting('server_version'), version()",
        "SELECT n.nspname FROM pg_catalog.pg_namespace n WHERE n.oid = 't'::regclass",
        "INSERT INTO t (a, b) VALUES ($1, $2)",
        "UPDATE t SET a = 1 WHERE b = 2",
        "DELETE FROM t WHERE a = 1",
        "DROP TABLE IF EXISTS s.t",
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "BEGIN; SELECT 1; COMMIT",
        "EXPLAIN SELECT 1",
        "EXPLAIN ANALYZE VERBOSE SELECT * FROM t",
        "DESCRIBE t",
        "CREATE TABLE p (a INT PRIMARY KEY, b VARCHAR(10) NOT NULL DEFAULT 'x')",
        "CREATE TABLE h (a INT) PARTITIONED BY (d STRING) CLUSTERED BY (a) INTO 4 BUCKETS \
         STORED AS PARQUET",
    ] {
        let ours: Vec<Statement> = parse_sql(sql)
            .unwrap_or_else(|e| panic!("failed to parse {sql:?}: {e}"))
            .into_iter()
            .map(|s| match s {
                BucketSqlStatement::Sql(s) => s,
                other => panic!("unexpected {other:?} for {sql}"),
            })
            .collect();
        let generic = Parser::parse_sql(&GenericDialect, sql).unwrap();
        assert_eq!(ours, generic, "{sql}");
    }
}

#[test]
fn garbage_is_rejected() {
    for sql in ["FOO BAR", "SELECT FROM WHERE (", "CREATE TABLE", "CREATE TABLE t (", "EXPLAIN"] {
        error(sql);
    }
    assert!(error("CREATE TABLE t (a INT) USING").contains("Expected: identifier"));
}

#[test]
fn is_distinct_from_binds_tighter_than_and() {
    let BucketSqlStatement::Sql(statement) =
        bucket_statement("SELECT a FROM t WHERE a IS NOT DISTINCT FROM b AND c <> d")
    else {
        panic!("expected a query");
    };
    let Some(Expr::BinaryOp { left, op, .. }) = &select_of(&statement).selection else {
        panic!("expected AND at the top: {statement}");
    };
    assert_eq!(op.to_string(), "AND");
    assert!(matches!(left.as_ref(), Expr::IsNotDistinctFrom(..)), "{left}");
    let BucketSqlStatement::Sql(statement) = bucket_statement("SELECT a IS DISTINCT FROM b + 1 OR c FROM t") else {
        panic!("expected a query");
    };
    assert_eq!(statement.to_string(), "SELECT a IS DISTINCT FROM b + 1 OR c FROM t");
    let datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(Expr::BinaryOp { left, .. }) =
        &select_of(&statement).projection[0]
    else {
        panic!("expected OR at the top: {statement}");
    };
    assert!(matches!(left.as_ref(), Expr::IsDistinctFrom(..)), "{left}");
}

#[test]
fn typed_literals_are_casts() {
    for (sql, expected) in [
        (
            "SELECT 3Y, 7s, 10L, 10l",
            "SELECT TRY_CAST(3 AS TINYINT), TRY_CAST(7 AS SMALLINT), TRY_CAST(10 AS BIGINT), TRY_CAST(10 AS BIGINT)",
        ),
        (
            "SELECT 2.5D, .5d, 1e2D, 1.5F",
            "SELECT CAST('2.5' AS DOUBLE), CAST('0.5' AS DOUBLE), CAST('100.0' AS DOUBLE), CAST('1.5' AS FLOAT)",
        ),
        (
            "SELECT 1.50BD, 0.001bd, 1e2BD, 1.5e-3BD, 00012BD",
            "SELECT CAST(1.50 AS DECIMAL(3,2)), CAST(0.001 AS DECIMAL(3,3)), CAST(100 AS DECIMAL(3,0)), \
             CAST(0.0015 AS DECIMAL(4,4)), CAST(12 AS DECIMAL(2,0))",
        ),
        // A sign that is not a subtraction belongs to the literal, so the type's minimum is in range.
        (
            "SELECT -128Y, - 128Y, 2 * -128Y, 1 - -128Y",
            "SELECT TRY_CAST(-128 AS TINYINT), TRY_CAST(-128 AS TINYINT), 2 * TRY_CAST(-128 AS TINYINT), \
             1 - TRY_CAST(-128 AS TINYINT)",
        ),
        (
            "SELECT x - 1Y FROM t WHERE -1L < x",
            "SELECT x - TRY_CAST(1 AS TINYINT) FROM t WHERE TRY_CAST(-1 AS BIGINT) < x",
        ),
        // Apart, or quoted, the letter is an alias.
        ("SELECT 10 L, 10 \"Y\"", "SELECT 10 AS L, 10 AS \"Y\""),
        ("SELECT 10\"Y\"", "SELECT 10 AS \"Y\""),
    ] {
        assert_eq!(parse_one(sql).to_string(), expected, "{sql}");
    }
}

#[test]
fn typed_literals_out_of_range_are_refused_with_22003() {
    for sql in ["SELECT 128Y", "SELECT -129Y", "SELECT 1 -128Y", "SELECT 32768S", "SELECT 9223372036854775808L"] {
        let e = crate::error::SqlError::from(parse_sql(sql).unwrap_err());
        assert_eq!(e.code, "22003", "{sql}: {e}");
        assert!(e.message.contains("is outside the valid range"), "{sql}: {e}");
    }
    for sql in
        ["SELECT 3.4e39F", "SELECT 1e400D", "SELECT -1e400D", "SELECT 12345678901234567890123456789012345678901BD"]
    {
        assert_eq!(crate::error::SqlError::from(parse_sql(sql).unwrap_err()).code, "22003", "{sql}");
    }
    // Spark's grammar has no fractional integer literals: a syntax error there too.
    assert!(error("SELECT 1.5L").contains("invalid numeric literal 1.5L"));
    assert!(error("SELECT 1.5Y").contains("invalid numeric literal 1.5Y"));
}

#[test]
fn div_is_integral_division_as_tight_as_multiplication() {
    let select = |sql| select_of(&parse_one(sql)).projection[0].to_string();
    assert_eq!(select("SELECT 7 div 2"), "7 DIV 2");
    let Statement::Query(query) = parse_one("SELECT 1 + 7 DIV 2 * 3") else { panic!() };
    let SetExpr::Select(select_1) = query.body.as_ref() else { panic!() };
    let datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(Expr::BinaryOp { op, right, .. }) =
        &select_1.projection[0]
    else {
        panic!("{select_1}")
    };
    assert_eq!(*op, BinaryOperator::Plus);
    let Expr::BinaryOp { left, op: BinaryOperator::Multiply, .. } = right.as_ref() else { panic!("{right}") };
    assert!(matches!(left.as_ref(), Expr::BinaryOp { op: BinaryOperator::MyIntegerDivide, .. }), "{left}");
    assert_eq!(select("SELECT 10 div 3 AS div"), "10 DIV 3 AS div");
}

#[test]
fn minus_is_except() {
    for (sql, expected) in [
        ("SELECT a FROM t MINUS SELECT a FROM u", "SELECT a FROM t EXCEPT SELECT a FROM u"),
        ("SELECT a FROM t minus ALL SELECT a FROM u", "SELECT a FROM t EXCEPT ALL SELECT a FROM u"),
        (
            "SELECT 1 UNION SELECT * FROM (SELECT 2 MINUS DISTINCT SELECT 3) AS s",
            "SELECT 1 UNION SELECT * FROM (SELECT 2 EXCEPT DISTINCT SELECT 3) AS s",
        ),
        ("SELECT 1 AS minus", "SELECT 1 AS minus"),
    ] {
        assert_eq!(parse_one(sql).to_string(), expected, "{sql}");
    }
}

//! Statements about what a table holds rather than its rows, which sqlparser does not parse
//! (or parses lossily): our `SHOW BUCKETS t [PARTITION (..)]`, Spark's `ANALYZE TABLE t
//! COMPUTE STATISTICS [NOSCAN | FOR COLUMNS c, .. | FOR ALL COLUMNS]`, `ALTER TABLE t
//! SET|UNSET TBLPROPERTIES (..)` and `DESCRIBE [TABLE] [EXTENDED|FORMATTED] t column`.

use datafusion::sql::sqlparser::ast::{Expr, SqlOption, Value};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::create_table::parse_property_list;
use super::show_partitions::parse_partition_spec;
use super::statement::{AnalyzedColumns, BucketSqlStatement};
use super::tokens::{dotted_name, is_statement_end};

/// `SHOW BUCKETS` (already consumed) `table [PARTITION (col = value, ...)]`.
pub(super) fn parse_show_buckets(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    let table = parser.parse_object_name(false)?;
    let partition_spec = parse_partition_spec(parser)?;
    Ok(BucketSqlStatement::ShowBuckets { table, partition_spec })
}

/// `ANALYZE TABLE` (already consumed) `table [PARTITION (..)] COMPUTE STATISTICS [NOSCAN |
/// FOR COLUMNS c, .. | FOR ALL COLUMNS]`.
pub(super) fn parse_analyze_table(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    let table = parser.parse_object_name(false)?;
    let partition_spec = parse_partition_spec(parser)?;
    parser.expect_keywords(&[Keyword::COMPUTE, Keyword::STATISTICS])?;
    let columns = if parser.parse_keyword(Keyword::NOSCAN) {
        AnalyzedColumns::NoScan
    } else if parser.parse_keywords(&[Keyword::FOR, Keyword::ALL, Keyword::COLUMNS]) {
        AnalyzedColumns::All
    } else if parser.parse_keywords(&[Keyword::FOR, Keyword::COLUMNS]) {
        AnalyzedColumns::Listed(parser.parse_comma_separated(Parser::parse_identifier)?)
    } else {
        AnalyzedColumns::Table
    };
    Ok(BucketSqlStatement::AnalyzeTable { table, partition_spec, columns })
}

/// `ALTER TABLE table SET TBLPROPERTIES (..)` or `.. UNSET TBLPROPERTIES [IF EXISTS] ('k', ..)`,
/// or `None` (nothing consumed) for any other `ALTER`.
pub(super) fn parse_table_properties(parser: &mut Parser) -> Result<Option<BucketSqlStatement>, ParserError> {
    parser.maybe_parse(|parser| {
        parser.expect_keywords(&[Keyword::ALTER, Keyword::TABLE])?;
        let table = parser.parse_object_name(false)?;
        if parser.parse_keywords(&[Keyword::SET, Keyword::TBLPROPERTIES]) {
            let properties = parse_property_list(parser)?;
            return Ok(BucketSqlStatement::SetTableProperties { table, properties });
        }
        parser.expect_keywords(&[Keyword::UNSET, Keyword::TBLPROPERTIES])?;
        let if_exists = parser.parse_keywords(&[Keyword::IF, Keyword::EXISTS]);
        parser.expect_token(&Token::LParen)?;
        let keys = parser.parse_comma_separated(|p| {
            let token = p.next_token();
            match token.token {
                Token::SingleQuotedString(key) => Ok(key),
                Token::Word(_) => {
                    p.prev_token();
                    Ok(dotted_name(&p.parse_object_name(false)?))
                }
                _ => p.expected("a property key", token),
            }
        })?;
        parser.expect_token(&Token::RParen)?;
        Ok(BucketSqlStatement::UnsetTableProperties { table, keys, if_exists })
    })
}

/// `DESCRIBE|DESC [TABLE] [EXTENDED|FORMATTED] table column`, or `None` (nothing consumed)
/// when no column follows the table name.
pub(super) fn parse_describe_column(parser: &mut Parser) -> Result<Option<BucketSqlStatement>, ParserError> {
    parser.maybe_parse(|parser| {
        parser.expect_one_of_keywords(&[Keyword::DESCRIBE, Keyword::DESC])?;
        let table_keyword = parser.parse_keyword(Keyword::TABLE);
        let extended = parser.parse_one_of_keywords(&[Keyword::EXTENDED, Keyword::FORMATTED]).is_some();
        // `DESCRIBE SELECT ..`, `DESCRIBE FUNCTION f`, `DESCRIBE DATABASE d` are other statements.
        let next = parser.peek_token();
        if !table_keyword && matches!(&next.token, Token::Word(w) if OTHER_DESCRIBES.contains(&w.keyword)) {
            return parser.expected("a table name", next);
        }
        let table = parser.parse_object_name(false)?;
        let column = parser.parse_identifier()?;
        if !is_statement_end(parser.peek_token_ref()) {
            return parser.expected_ref("end of statement", parser.peek_token_ref());
        }
        Ok(BucketSqlStatement::DescribeColumn { table, column, extended })
    })
}

/// Words after `DESCRIBE` that start other statements than a table's description.
const OTHER_DESCRIBES: &[Keyword] = &[
    Keyword::SELECT,
    Keyword::WITH,
    Keyword::VALUES,
    Keyword::QUERY,
    Keyword::FUNCTION,
    Keyword::DATABASE,
    Keyword::SCHEMA,
    Keyword::CATALOG,
];

/// Property keys and values as written, quotes removed (`'k' = 'v'`, `k.x = 2`).
pub fn property_pairs(properties: &[SqlOption]) -> Result<Vec<(String, String)>, String> {
    properties
        .iter()
        .map(|option| match option {
            SqlOption::KeyValue { key, value } => {
                let value = match value {
                    Expr::Value(v) => match &v.value {
                        Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) => s.clone(),
                        other => other.to_string(),
                    },
                    other => other.to_string(),
                };
                Ok((key.value.clone(), value))
            }
            other => Err(format!("table property {other} is not of the form key = value")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

    use super::*;
    use crate::sql::dialect::parse_sql;
    use crate::sql::dialect::tests::{bucket_statement, error, pairs};

    #[test]
    fn show_buckets_forms() {
        let BucketSqlStatement::ShowBuckets { table, partition_spec } =
            bucket_statement("show buckets s.t PARTITION (d = '2024-01-01')")
        else {
            panic!("expected SHOW BUCKETS");
        };
        assert_eq!(table.to_string(), "s.t");
        assert_eq!(partition_spec.len(), 1);
        assert_eq!(bucket_statement("SHOW BUCKETS t").to_string(), "SHOW BUCKETS t");
        assert!(error("SHOW BUCKETS").contains("Expected: identifier"));
    }

    #[test]
    fn analyze_table_forms() {
        let columns = |sql: &str| match bucket_statement(sql) {
            BucketSqlStatement::AnalyzeTable { columns, .. } => columns,
            other => panic!("expected ANALYZE TABLE for {sql}, got {other:?}"),
        };
        assert_eq!(columns("ANALYZE TABLE t COMPUTE STATISTICS"), AnalyzedColumns::Table);
        assert_eq!(columns("analyze table t compute statistics noscan"), AnalyzedColumns::NoScan);
        assert_eq!(columns("ANALYZE TABLE s.t COMPUTE STATISTICS FOR ALL COLUMNS"), AnalyzedColumns::All);
        assert_eq!(
            columns("ANALYZE TABLE t COMPUTE STATISTICS FOR COLUMNS a, `b`"),
            AnalyzedColumns::Listed(vec![Ident::new("a"), Ident::with_quote('`', "b")])
        );
        assert_eq!(
            bucket_statement("ANALYZE TABLE t COMPUTE STATISTICS FOR COLUMNS a, b").to_string(),
            "ANALYZE TABLE t COMPUTE STATISTICS FOR COLUMNS a, b"
        );
        assert!(error("ANALYZE TABLE t").contains("Expected: COMPUTE"), "{}", error("ANALYZE TABLE t"));
        assert!(error("ANALYZE TABLE t COMPUTE STATISTICS FOR COLUMNS").contains("identifier"));
    }

    #[test]
    fn table_property_forms() {
        let BucketSqlStatement::SetTableProperties { table, properties } = bucket_statement(
            "ALTER TABLE t SET TBLPROPERTIES ('spark.sql.statistics.totalSize' = '1099511627776', k.x 2)",
        ) else {
            panic!("expected SET TBLPROPERTIES");
        };
        assert_eq!(table.to_string(), "t");
        assert_eq!(
            property_pairs(&properties).unwrap(),
            pairs(&[("spark.sql.statistics.totalSize", "1099511627776"), ("k.x", "2")])
        );
        assert_eq!(
            bucket_statement("ALTER TABLE s.t UNSET TBLPROPERTIES IF EXISTS ('a.b', c.d)"),
            BucketSqlStatement::UnsetTableProperties {
                table: ObjectName::from(vec![Ident::new("s"), Ident::new("t")]),
                keys: vec!["a.b".into(), "c.d".into()],
                if_exists: true,
            }
        );
        assert_eq!(
            bucket_statement("ALTER TABLE t UNSET TBLPROPERTIES ('a')").to_string(),
            "ALTER TABLE t UNSET TBLPROPERTIES ('a')"
        );
        // Other ALTER TABLE forms still reach the default parser.
        assert!(matches!(bucket_statement("ALTER TABLE t RENAME TO u"), BucketSqlStatement::Sql(_)));
    }

    #[test]
    fn describe_column_forms() {
        for (sql, extended) in [
            ("DESCRIBE t c", false),
            ("DESC TABLE t c", false),
            ("DESCRIBE EXTENDED t c", true),
            ("DESC TABLE FORMATTED t c", true),
        ] {
            assert_eq!(
                bucket_statement(sql),
                BucketSqlStatement::DescribeColumn {
                    table: ObjectName::from(vec![Ident::new("t")]),
                    column: Ident::new("c"),
                    extended,
                },
                "{sql}"
            );
        }
        // Without a column, DESCRIBE is the table's; other DESCRIBE statements stay theirs.
        assert!(matches!(bucket_statement("DESCRIBE EXTENDED t"), BucketSqlStatement::Sql(_)));
        for other in ["DESCRIBE SELECT x", "DESCRIBE FUNCTION abs", "DESC DATABASE d"] {
            assert!(!matches!(parse_sql(other).as_deref(), Ok([BucketSqlStatement::DescribeColumn { .. }])), "{other}");
        }
    }
}

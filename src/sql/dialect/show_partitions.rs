//! Spark's `SHOW PARTITIONS t [PARTITION (col = value, ...)]`, which sqlparser does not parse:
//! becomes [`BucketSqlStatement::ShowPartitions`].

use datafusion::sql::sqlparser::ast::{Expr, Ident};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::statement::BucketSqlStatement;

/// `SHOW PARTITIONS` (already consumed) `table [PARTITION (col = value, ...)]`.
pub(super) fn parse_show_partitions(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    let table = parser.parse_object_name(false)?;
    let partition_spec = parse_partition_spec(parser)?;
    Ok(BucketSqlStatement::ShowPartitions { table, partition_spec })
}

/// An optional `PARTITION (col = value, ...)`; empty when absent.
pub(super) fn parse_partition_spec(parser: &mut Parser) -> Result<Vec<(Ident, Expr)>, ParserError> {
    if !parser.parse_keyword(Keyword::PARTITION) {
        return Ok(Vec::new());
    }
    parser.expect_token(&Token::LParen)?;
    let spec = parser.parse_comma_separated(|p| {
        let column = p.parse_identifier()?;
        p.expect_token(&Token::Eq)?;
        Ok((column, p.parse_expr()?))
    })?;
    parser.expect_token(&Token::RParen)?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

    use super::*;
    use crate::sql::dialect::tests::{bucket_statement, error, pairs};

    #[test]
    fn show_partitions_forms() {
        assert_eq!(
            bucket_statement("SHOW PARTITIONS s.t"),
            BucketSqlStatement::ShowPartitions {
                table: ObjectName::from(vec![Ident::new("s"), Ident::new("t")]),
                partition_spec: vec![],
            }
        );
        let partitions = bucket_statement("show partitions t PARTITION (d = '2024-01-01', h = 3)");
        let BucketSqlStatement::ShowPartitions { table, partition_spec } = &partitions else {
            panic!("expected SHOW PARTITIONS, got {partitions:?}");
        };
        assert_eq!(table.to_string(), "t");
        let spec: Vec<(String, String)> =
            partition_spec.iter().map(|(c, v)| (c.value.clone(), v.to_string())).collect();
        assert_eq!(spec, pairs(&[("d", "'2024-01-01'"), ("h", "3")]));
        assert!(error("SHOW PARTITIONS").contains("Expected: identifier"));
    }
}

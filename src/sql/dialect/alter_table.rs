//! Spark's `ALTER TABLE t ADD COLUMNS (c type [COMMENT '..'], ...)`, also written `ADD COLUMN`
//! and without the parentheses, which sqlparser reads as PostgreSQL's one-column form, and
//! `ALTER TABLE t SET LOCATION 'path'`, which it does not parse.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::statement::BucketSqlStatement;

/// `ALTER TABLE table ADD COLUMN[S] [(] column, ... [)]`, or `None` (nothing consumed) for any
/// other `ALTER`.
pub(super) fn parse_add_columns(parser: &mut Parser) -> Result<Option<BucketSqlStatement>, ParserError> {
    parser.maybe_parse(|parser| {
        parser.expect_keywords(&[Keyword::ALTER, Keyword::TABLE])?;
        let table = parser.parse_object_name(false)?;
        parser.expect_keyword(Keyword::ADD)?;
        parser.expect_one_of_keywords(&[Keyword::COLUMNS, Keyword::COLUMN])?;
        let parenthesized = parser.consume_token(&Token::LParen);
        let columns = parser.parse_comma_separated(Parser::parse_column_def)?;
        if parenthesized {
            parser.expect_token(&Token::RParen)?;
        }
        Ok(BucketSqlStatement::AddColumns { table, columns })
    })
}

/// `ALTER TABLE table SET LOCATION 'path'`, or `None` (nothing consumed) for any other `ALTER`.
pub(super) fn parse_set_location(parser: &mut Parser) -> Result<Option<BucketSqlStatement>, ParserError> {
    parser.maybe_parse(|parser| {
        parser.expect_keywords(&[Keyword::ALTER, Keyword::TABLE])?;
        let table = parser.parse_object_name(false)?;
        parser.expect_keywords(&[Keyword::SET, Keyword::LOCATION])?;
        let location = parser.parse_literal_string()?;
        Ok(BucketSqlStatement::SetLocation { table, location })
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::bucket_statement;
    use super::*;

    #[test]
    fn columns_are_added_in_each_spelling() {
        for sql in ["ALTER TABLE t ADD COLUMNS (c BIGINT COMMENT 'new', d DOUBLE)", "ALTER TABLE t ADD COLUMN c BIGINT"]
        {
            let BucketSqlStatement::AddColumns { table, columns } = bucket_statement(sql) else {
                panic!("{sql} adds columns")
            };
            assert_eq!(table.to_string(), "t");
            assert_eq!(columns[0].name.value, "c");
        }
        assert!(matches!(bucket_statement("ALTER TABLE t RENAME TO u"), BucketSqlStatement::Sql(_)));
    }

    #[test]
    fn a_location_is_set() {
        let BucketSqlStatement::SetLocation { table, location } =
            bucket_statement("ALTER TABLE s.t SET LOCATION '/d/t'")
        else {
            panic!("sets a location")
        };
        assert_eq!((table.to_string().as_str(), location.as_str()), ("s.t", "/d/t"));
        assert_eq!(
            bucket_statement("ALTER TABLE t SET LOCATION '/d/t'").to_string(),
            "ALTER TABLE t SET LOCATION '/d/t'"
        );
    }
}

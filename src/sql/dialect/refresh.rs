//! Spark's statements that re-read a table's directory: `REFRESH TABLE t`, which sqlparser does
//! not parse (becomes [`BucketSqlStatement::RefreshTable`]), and `ALTER TABLE t RECOVER
//! PARTITIONS`, Spark's other spelling of `MSCK REPAIR TABLE t` (becomes the [`Statement::Msck`]
//! sqlparser gives `MSCK REPAIR TABLE t ADD PARTITIONS`).

use datafusion::sql::sqlparser::ast::{AddDropSync, Msck, Statement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::statement::BucketSqlStatement;

/// `REFRESH TABLE` (already consumed) `table`.
pub(super) fn parse_refresh_table(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    Ok(BucketSqlStatement::RefreshTable { table: parser.parse_object_name(false)? })
}

/// `ALTER TABLE table RECOVER PARTITIONS`, or `None` (nothing consumed) for any other `ALTER`.
pub(super) fn parse_recover_partitions(parser: &mut Parser) -> Result<Option<Statement>, ParserError> {
    parser.maybe_parse(|parser| {
        parser.expect_keywords(&[Keyword::ALTER, Keyword::TABLE])?;
        let table_name = parser.parse_object_name(false)?;
        let token = parser.next_token();
        if !matches!(&token.token, Token::Word(word) if word.value.eq_ignore_ascii_case("RECOVER")) {
            return parser.expected("RECOVER", token);
        }
        parser.expect_keyword_is(Keyword::PARTITIONS)?;
        Ok(Statement::Msck(Msck { table_name, repair: true, partition_action: Some(AddDropSync::ADD) }))
    })
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

    use super::*;
    use crate::sql::dialect::tests::{bucket_statement, error};

    fn msck(table: &str, partition_action: Option<AddDropSync>) -> BucketSqlStatement {
        BucketSqlStatement::Sql(Statement::Msck(Msck {
            table_name: ObjectName::from(vec![Ident::new(table)]),
            repair: true,
            partition_action,
        }))
    }

    #[test]
    fn refresh_table_names_a_table() {
        assert_eq!(
            bucket_statement("REFRESH TABLE s.t"),
            BucketSqlStatement::RefreshTable { table: ObjectName::from(vec![Ident::new("s"), Ident::new("t")]) }
        );
        assert_eq!(bucket_statement("refresh table t").to_string(), "REFRESH TABLE t");
        assert!(error("REFRESH TABLE").contains("Expected: identifier"), "{}", error("REFRESH TABLE"));
    }

    #[test]
    fn msck_forms_parse_with_stock_sqlparser() {
        assert_eq!(bucket_statement("MSCK REPAIR TABLE t"), msck("t", None));
        for (written, action) in [("ADD", AddDropSync::ADD), ("DROP", AddDropSync::DROP), ("SYNC", AddDropSync::SYNC)] {
            assert_eq!(bucket_statement(&format!("MSCK REPAIR TABLE t {written} PARTITIONS")), msck("t", Some(action)));
        }
    }

    #[test]
    fn recover_partitions_is_msck_repair_add() {
        assert_eq!(bucket_statement("ALTER TABLE t RECOVER PARTITIONS"), msck("t", Some(AddDropSync::ADD)));
        assert_eq!(
            bucket_statement("alter table t recover partitions").to_string(),
            "MSCK REPAIR TABLE t ADD PARTITIONS"
        );
        // Other ALTER TABLE forms still reach the default parser.
        assert!(matches!(
            bucket_statement("ALTER TABLE t RENAME TO u"),
            BucketSqlStatement::Sql(Statement::AlterTable { .. })
        ));
        assert!(error("ALTER TABLE t RECOVER").contains("Expected"), "{}", error("ALTER TABLE t RECOVER"));
    }
}

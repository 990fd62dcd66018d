//! Spark's `DESCRIBE|DESC TABLE [EXTENDED|FORMATTED] t`, parsed into the
//! [`Statement::ExplainTable`] the default parser builds for the forms without `TABLE`.

use datafusion::sql::sqlparser::ast::{DescribeAlias, HiveDescribeFormat, Statement};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};

/// `DESCRIBE|DESC TABLE [EXTENDED|FORMATTED] name`; the forms without `TABLE` are left to the
/// default parser, which handles them the same way.
pub(super) fn parse_describe_table(parser: &mut Parser) -> Result<Statement, ParserError> {
    let describe_alias = match parser.expect_one_of_keywords(&[Keyword::DESCRIBE, Keyword::DESC])? {
        Keyword::DESC => DescribeAlias::Desc,
        _ => DescribeAlias::Describe,
    };
    parser.expect_keyword(Keyword::TABLE)?;
    let hive_format = match parser.parse_one_of_keywords(&[Keyword::EXTENDED, Keyword::FORMATTED]) {
        Some(Keyword::EXTENDED) => Some(HiveDescribeFormat::Extended),
        Some(Keyword::FORMATTED) => Some(HiveDescribeFormat::Formatted),
        _ => None,
    };
    let table_name = parser.parse_object_name(false)?;
    Ok(Statement::ExplainTable { describe_alias, hive_format, has_table_keyword: true, table_name })
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{Ident, ObjectName};

    use super::*;
    use crate::sql::dialect::parse_one;

    #[test]
    fn describe_forms() {
        for (sql, alias, format, table_keyword) in [
            ("DESCRIBE t", DescribeAlias::Describe, None, false),
            ("DESC t", DescribeAlias::Desc, None, false),
            ("DESCRIBE TABLE t", DescribeAlias::Describe, None, true),
            ("DESCRIBE EXTENDED t", DescribeAlias::Describe, Some(HiveDescribeFormat::Extended), false),
            ("DESCRIBE TABLE EXTENDED t", DescribeAlias::Describe, Some(HiveDescribeFormat::Extended), true),
            ("DESC TABLE FORMATTED t", DescribeAlias::Desc, Some(HiveDescribeFormat::Formatted), true),
            ("DESC FORMATTED t", DescribeAlias::Desc, Some(HiveDescribeFormat::Formatted), false),
        ] {
            assert_eq!(
                parse_one(sql),
                Statement::ExplainTable {
                    describe_alias: alias,
                    hive_format: format,
                    has_table_keyword: table_keyword,
                    table_name: ObjectName::from(vec![Ident::new("t")]),
                },
                "{sql}"
            );
        }
        let Statement::ExplainTable { table_name, .. } = parse_one("DESCRIBE TABLE EXTENDED s.t") else {
            panic!("expected DESCRIBE");
        };
        assert_eq!(table_name.to_string(), "s.t");
    }
}

//! Session settings: Spark's `SET`, `SET key`, `SET key = value` (the value is the raw text, as in
//! Spark), PostgreSQL's `SET key TO value`, `SET TIME ZONE`, `SHOW name`, `SHOW ALL`, and `RESET`,
//! as [`BucketSqlStatement`]s with the dotted configuration name.

use datafusion::sql::sqlparser::ast::{Expr, Ident, Reset, Statement, Value, ValueWithSpan};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use super::statement::BucketSqlStatement;
use super::tokens::{dotted_name, is_statement_end};

/// `SET`, `SET name` and `SET name (=|TO) value`; an error makes the caller fall back to the
/// default parser (for `SET TIME ZONE ..`, `SET ROLE ..`, `SET (a, b) = ..`, ...).
pub(super) fn parse_set_variable(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    parser.expect_keyword(Keyword::SET)?;
    if is_statement_end(parser.peek_token_ref()) {
        return Ok(BucketSqlStatement::ShowVariable { name: None });
    }
    let name = dotted_name(&parser.parse_object_name(false)?);
    if is_statement_end(parser.peek_token_ref()) {
        return Ok(BucketSqlStatement::SetVariable { name, value: None });
    }
    if !(parser.consume_token(&Token::Eq) || parser.parse_keyword(Keyword::TO)) {
        return parser.expected_ref("= or TO", parser.peek_token_ref());
    }
    let mut tokens = Vec::new();
    while !is_statement_end(&parser.peek_nth_token_no_skip(0)) {
        if let Some(token) = parser.next_token_no_skip() {
            tokens.push(token.token.clone());
        }
    }
    let value =
        match tokens.iter().filter(|token| !matches!(token, Token::Whitespace(_))).collect::<Vec<_>>().as_slice() {
            [] => return parser.expected_ref("a value", parser.peek_token_ref()),
            [Token::SingleQuotedString(text)] => text.clone(),
            _ => tokens.iter().map(Token::to_string).collect::<String>().trim().to_string(),
        };
    Ok(BucketSqlStatement::SetVariable { name, value: Some(value) })
}

/// `SET TIME ZONE value` sets `timezone`; a single-quoted value is unquoted.
pub(super) fn set_time_zone(value: Expr) -> BucketSqlStatement {
    BucketSqlStatement::SetVariable {
        name: "timezone".to_string(),
        value: Some(match value {
            Expr::Value(ValueWithSpan { value: Value::SingleQuotedString(text), .. }) => text,
            other => other.to_string(),
        }),
    }
}

/// `RESET ALL` (also a bare `RESET`) or `RESET name`.
pub(super) fn reset_variable(reset: Reset) -> BucketSqlStatement {
    BucketSqlStatement::Reset {
        name: match reset {
            Reset::ALL => None,
            Reset::ConfigurationParameter(name) => Some(dotted_name(&name)),
        },
    }
}

/// PostgreSQL's `SHOW name`, `SHOW ALL` and `SHOW TRANSACTION ISOLATION LEVEL`. sqlparser keeps
/// only the words of other `SHOW` statements (`SHOW a.b` and `SHOW a b` look alike), so those stay
/// [`Statement::ShowVariable`].
pub(super) fn show_variable(variable: Vec<Ident>) -> BucketSqlStatement {
    let words: Vec<String> = variable
        .iter()
        .map(|ident| match ident.quote_style {
            None => ident.value.to_ascii_uppercase(),
            Some(_) => ident.value.clone(),
        })
        .collect();
    let name = match words.as_slice() {
        [all] if all == "ALL" && variable[0].quote_style.is_none() => None,
        [_] => Some(variable[0].value.clone()),
        [a, b, c] if a == "TRANSACTION" && b == "ISOLATION" && c == "LEVEL" => {
            Some("transaction_isolation".to_string())
        }
        _ => return BucketSqlStatement::Sql(Statement::ShowVariable { variable }),
    };
    BucketSqlStatement::ShowVariable { name }
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::Set;

    use super::*;
    use crate::sql::dialect::parse_one;
    use crate::sql::dialect::tests::{bucket_statement, error, reset, set, show};

    #[test]
    fn set_show_and_reset_forms() {
        for (sql, expected) in [
            ("SET spark.sql.shuffle.partitions=8", set("spark.sql.shuffle.partitions", Some("8"))),
            ("SET spark.sql.autoBroadcastJoinThreshold = -1", set("spark.sql.autoBroadcastJoinThreshold", Some("-1"))),
            ("SET spark.sql.autoBroadcastJoinThreshold=-1;", set("spark.sql.autoBroadcastJoinThreshold", Some("-1"))),
            ("set spark.sql.files.maxPartitionBytes = 128MB", set("spark.sql.files.maxPartitionBytes", Some("128MB"))),
            (
                "SET spark.sql.sources.bucketing.enabled = false",
                set("spark.sql.sources.bucketing.enabled", Some("false")),
            ),
            ("SET k = 'it''s'", set("k", Some("it's"))),
            ("SET \"Mixed\".`key` = x", set("Mixed.key", Some("x"))),
            ("SET extra_float_digits TO 3", set("extra_float_digits", Some("3"))),
            ("SET search_path = public, pg_catalog", set("search_path", Some("public, pg_catalog"))),
            ("SET a = 1, b = 2", set("a", Some("1, b = 2"))),
            ("SET TIME ZONE 'UTC'", set("timezone", Some("UTC"))),
            ("SET TIME ZONE LOCAL", set("timezone", Some("LOCAL"))),
            ("SET TIMEZONE TO 'Europe/Paris'", set("TIMEZONE", Some("Europe/Paris"))),
            ("SET spark.sql.shuffle.partitions", set("spark.sql.shuffle.partitions", None)),
            ("SET", show(None)),
            ("SHOW ALL", show(None)),
            ("SHOW search_path", show(Some("search_path"))),
            ("SHOW \"TimeZone\"", show(Some("TimeZone"))),
            ("show transaction isolation level", show(Some("transaction_isolation"))),
            ("RESET spark.sql.shuffle.partitions", reset(Some("spark.sql.shuffle.partitions"))),
            ("RESET", reset(None)),
            ("RESET ALL", reset(None)),
        ] {
            assert_eq!(bucket_statement(sql), expected, "{sql}");
        }
        assert!(matches!(
            parse_one("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"),
            Statement::Set(Set::SetTransaction { .. })
        ));
        assert!(matches!(parse_one("SHOW TBLPROPERTIES t"), Statement::ShowVariable { .. }));
        assert!(error("SET k =").contains("Expected"));
        assert!(error("SET k v").contains("Expected"));
    }
}

//! `EXPLAIN`: Spark's `EXPLAIN EXTENDED|FORMATTED|COST|CODEGEN stmt`, stored as one argument-less
//! [`UtilityOption`] named after the mode, and [`explain_mode`], which reads the mode of any
//! `EXPLAIN` statement (Spark's, or sqlparser's `ANALYZE`/`VERBOSE` forms).

use datafusion::sql::sqlparser::ast::{DescribeAlias, Expr, Ident, Statement, UtilityOption, Value};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::Token;

use crate::explain::ExplainMode;

/// Reads the mode of an `EXPLAIN` statement (`None` for anything else, including
/// `DESCRIBE query`).
///
/// Spark's modes are stored as a single argument-less [`UtilityOption`] named `EXTENDED`,
/// `FORMATTED`, `COST` or `CODEGEN`; `ANALYZE` and `VERBOSE` use sqlparser's own flags. The
/// PostgreSQL forms `EXPLAIN (ANALYZE)` and `EXPLAIN (VERBOSE)` are recognised too. Spark has no
/// `VERBOSE`; it maps to [`ExplainMode::Extended`], the mode that shows the most plans.
pub fn explain_mode(stmt: &Statement) -> Option<ExplainMode> {
    let Statement::Explain { describe_alias: DescribeAlias::Explain, analyze, verbose, options, .. } = stmt else {
        return None;
    };
    let enabled = |name: &str| {
        options.iter().flatten().any(|option| {
            option.name.value.eq_ignore_ascii_case(name)
                && match &option.arg {
                    None => true,
                    Some(Expr::Value(value)) => value.value == Value::Boolean(true),
                    Some(_) => false,
                }
        })
    };
    let mode = if *analyze || enabled("ANALYZE") {
        ExplainMode::Analyze
    } else if enabled("FORMATTED") {
        ExplainMode::Formatted
    } else if enabled("CODEGEN") {
        ExplainMode::Codegen
    } else if enabled("COST") {
        ExplainMode::Cost
    } else if *verbose || enabled("EXTENDED") || enabled("VERBOSE") {
        ExplainMode::Extended
    } else {
        ExplainMode::Simple
    };
    Some(mode)
}

/// The Spark mode word after `EXPLAIN`, if any (`CODEGEN` is not a sqlparser keyword, so words
/// are compared by text).
pub(super) fn spark_explain_mode(parser: &Parser) -> Option<&'static str> {
    match &parser.peek_nth_token_ref(1).token {
        Token::Word(word) if word.quote_style.is_none() => ["EXTENDED", "FORMATTED", "COST", "CODEGEN", "LOGICAL"]
            .into_iter()
            .find(|mode| word.value.eq_ignore_ascii_case(mode)),
        _ => None,
    }
}

pub(super) fn parse_spark_explain(parser: &mut Parser, mode: &str) -> Result<Statement, ParserError> {
    parser.expect_keyword(Keyword::EXPLAIN)?;
    let mode_token = parser.next_token();
    if mode == "LOGICAL" {
        return Err(ParserError::ParserError(format!(
            "Operation not allowed: EXPLAIN LOGICAL{}",
            mode_token.span.start
        )));
    }
    let statement = parser.parse_statement()?;
    if matches!(statement, Statement::Explain { .. } | Statement::ExplainTable { .. }) {
        return Err(ParserError::ParserError("Explain must be root of the plan".to_string()));
    }
    Ok(Statement::Explain {
        describe_alias: DescribeAlias::Explain,
        analyze: false,
        verbose: false,
        query_plan: false,
        estimate: false,
        statement: Box::new(statement),
        format: None,
        options: Some(vec![UtilityOption { name: Ident::new(mode), arg: None }]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dialect::parse_one;
    use crate::sql::dialect::tests::error;

    #[test]
    fn explain_modes() {
        for (sql, mode) in [
            ("EXPLAIN SELECT 1", ExplainMode::Simple),
            ("EXPLAIN EXTENDED SELECT 1", ExplainMode::Extended),
            ("EXPLAIN FORMATTED SELECT 1", ExplainMode::Formatted),
            ("explain formatted SELECT 1", ExplainMode::Formatted),
            ("EXPLAIN COST SELECT 1", ExplainMode::Cost),
            ("EXPLAIN CODEGEN SELECT 1", ExplainMode::Codegen),
            ("EXPLAIN codegen SELECT 1", ExplainMode::Codegen),
            ("EXPLAIN ANALYZE SELECT 1", ExplainMode::Analyze),
            ("EXPLAIN VERBOSE SELECT 1", ExplainMode::Extended),
            ("EXPLAIN (ANALYZE) SELECT 1", ExplainMode::Analyze),
            ("EXPLAIN (ANALYZE true, VERBOSE) SELECT 1", ExplainMode::Analyze),
            ("EXPLAIN (ANALYZE false) SELECT 1", ExplainMode::Simple),
            ("EXPLAIN (VERBOSE) SELECT 1", ExplainMode::Extended),
        ] {
            let stmt = parse_one(sql);
            assert_eq!(explain_mode(&stmt), Some(mode), "{sql}");
            let Statement::Explain { statement, .. } = &stmt else {
                panic!("expected EXPLAIN for {sql}");
            };
            assert_eq!(statement.to_string(), "SELECT 1", "{sql}");
        }
        assert_eq!(explain_mode(&parse_one("SELECT 1")), None);
        assert_eq!(explain_mode(&parse_one("DESCRIBE SELECT 1")), None);
    }

    #[test]
    fn explain_mode_encoding() {
        let stmt = parse_one("EXPLAIN FORMATTED SELECT * FROM a JOIN b ON a.k = b.k WHERE a.x > 1");
        let Statement::Explain { describe_alias, analyze, verbose, options, statement, .. } = &stmt else {
            panic!("expected EXPLAIN, got {stmt:?}");
        };
        assert!(matches!(describe_alias, DescribeAlias::Explain));
        assert!(!analyze && !verbose);
        assert_eq!(options.as_deref(), Some(&[UtilityOption { name: Ident::new("FORMATTED"), arg: None }][..]));
        assert!(matches!(statement.as_ref(), Statement::Query(_)));

        let stmt =
            parse_one("EXPLAIN EXTENDED CREATE TABLE t USING parquet CLUSTERED BY (k) INTO 2 BUCKETS AS SELECT 1 AS k");
        assert_eq!(explain_mode(&stmt), Some(ExplainMode::Extended));
        let Statement::Explain { statement, .. } = &stmt else {
            panic!("expected EXPLAIN");
        };
        assert!(matches!(statement.as_ref(), Statement::CreateTable(ct) if ct.clustered_by.is_some()));

        let stmt = parse_one("EXPLAIN COST INSERT INTO t SELECT 1");
        assert_eq!(explain_mode(&stmt), Some(ExplainMode::Cost));
    }

    #[test]
    fn explain_errors() {
        let message = error("EXPLAIN LOGICAL SELECT 1");
        assert!(message.contains("Operation not allowed: EXPLAIN LOGICAL"), "{message}");
        let message = error("EXPLAIN EXTENDED EXPLAIN SELECT 1");
        assert!(message.contains("Explain must be root of the plan"), "{message}");
        let message = error("EXPLAIN FORMATTED SELEC 1");
        assert!(message.contains("SELEC"), "{message}");
    }
}

//! Small reading helpers the statement parsers share.

use datafusion::sql::sqlparser::ast::ObjectName;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

/// The parts of a name joined with dots, without identifier quotes: configuration keys such as
/// `spark.sql.shuffle.partitions` and Spark providers or property keys are single dotted names.
pub(super) fn dotted_name(name: &ObjectName) -> String {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|part| match part.as_ident() {
            Some(ident) => ident.value.clone(),
            None => part.to_string(),
        })
        .collect();
    parts.join(".")
}

pub(super) fn is_statement_end(token: &TokenWithSpan) -> bool {
    matches!(token.token, Token::EOF | Token::SemiColon)
}

pub(super) fn next_is_keyword(parser: &Parser, n: usize, keyword: Keyword) -> bool {
    matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == keyword)
}

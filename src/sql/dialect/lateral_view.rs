//! `LATERAL VIEW gen(…) v` without column aliases, followed by `ORDER BY`, `LIMIT`, a set
//! operation or a join: sqlparser would read that keyword as the view's first column alias (it
//! stops only at WHERE, GROUP, CLUSTER, HAVING and LATERAL). Such a view gets the placeholder
//! alias [`DEFAULT_COLUMNS`] before parsing, which the generators' rewrite reads as none.

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace, Word};

/// The column alias that stands for "Spark's default names".
pub const DEFAULT_COLUMNS: &str = "__spark_default_columns";

/// Keywords that may follow a query's FROM clause and are not aliases.
const AFTER_FROM: [Keyword; 20] = [
    Keyword::ORDER,
    Keyword::LIMIT,
    Keyword::OFFSET,
    Keyword::FETCH,
    Keyword::UNION,
    Keyword::EXCEPT,
    Keyword::INTERSECT,
    Keyword::MINUS,
    Keyword::WINDOW,
    Keyword::SORT,
    Keyword::DISTRIBUTE,
    Keyword::QUALIFY,
    Keyword::JOIN,
    Keyword::INNER,
    Keyword::LEFT,
    Keyword::RIGHT,
    Keyword::FULL,
    Keyword::CROSS,
    Keyword::NATURAL,
    Keyword::FOR,
];

/// `tokens` with the placeholder alias after each unaliased lateral view that needs it.
pub(super) fn mark_unaliased_lateral_views(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> =
        (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let is_keyword = |at: usize, keyword: Keyword| {
        significant.get(at).is_some_and(|&i| matches!(&tokens[i].token, Token::Word(w) if w.keyword == keyword))
    };
    let mut insert_after = Vec::new();
    for at in 0..significant.len() {
        if !(is_keyword(at, Keyword::LATERAL) && is_keyword(at + 1, Keyword::VIEW)) {
            continue;
        }
        let mut next = at + 2 + usize::from(is_keyword(at + 2, Keyword::OUTER));
        // The generator's name and its parenthesised arguments.
        next += 1;
        let mut depth = 0usize;
        while let Some(&i) = significant.get(next) {
            next += 1;
            match tokens[i].token {
                Token::LParen => depth += 1,
                Token::RParen if depth <= 1 => break,
                Token::RParen => depth -= 1,
                _ => {}
            }
        }
        let view_name = significant.get(next);
        if view_name.is_some_and(|&i| matches!(tokens[i].token, Token::Word(_)))
            && AFTER_FROM.iter().any(|&keyword| is_keyword(next + 1, keyword))
        {
            insert_after.push(significant[next]);
        }
    }
    let mut out = Vec::with_capacity(tokens.len() + 4 * insert_after.len());
    for (i, token) in tokens.into_iter().enumerate() {
        let span = token.span;
        out.push(token);
        if insert_after.contains(&i) {
            let space = || TokenWithSpan::new(Token::Whitespace(Whitespace::Space), span);
            out.extend([space(), TokenWithSpan::new(Token::make_keyword("AS"), span), space()]);
            out.push(TokenWithSpan::new(
                Token::Word(Word { value: DEFAULT_COLUMNS.into(), quote_style: None, keyword: Keyword::NoKeyword }),
                span,
            ));
            out.push(space());
        }
    }
    out
}

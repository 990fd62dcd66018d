//! Spark's typed numeric literals: `3Y` TINYINT, `7S` SMALLINT, `10L` BIGINT, `2.5F` FLOAT,
//! `2.5D` DOUBLE and `1.5BD` DECIMAL, the suffix in either case. sqlparser reads `3Y` as the
//! number `3` aliased `Y` (and `10L` as a plain number), so each becomes the tokens of
//! `CAST(value AS type)` before parsing (`TRY_CAST` for the integers). A minus sign in front that is not a subtraction is
//! part of the literal, as in Spark's grammar, so `-128Y` is in range. A value outside its
//! type's range is refused as Spark refuses it (`INVALID_NUMERIC_LITERAL_RANGE`, 22003), not
//! wrapped; `BD` keeps the digits as written: `1.50BD` is DECIMAL(3,2).

use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::ParserError;
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::error::numeric_literal_out_of_range;

/// DECIMAL's largest precision, Spark's and DataFusion's `Decimal128`.
const MAX_DECIMAL_PRECISION: usize = 38;

/// `tokens` with every typed literal replaced by its cast.
pub(super) fn cast_typed_literals(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>, ParserError> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    let mut rest = tokens.into_iter().peekable();
    while let Some(token) = rest.next() {
        let Token::Number(digits, long) = &token.token else {
            out.push(token);
            continue;
        };
        let suffix = match rest.peek() {
            _ if *long => "L".to_string(),
            Some(TokenWithSpan { token: Token::Word(word), span })
                if word.quote_style.is_none() && span.start == token.span.end =>
            {
                word.value.to_ascii_uppercase()
            }
            _ => String::new(),
        };
        if !["Y", "S", "L", "F", "D", "BD"].contains(&suffix.as_str()) {
            out.push(token);
            continue;
        }
        if !*long {
            rest.next();
        }
        let negative = take_unary_minus(&mut out);
        let cast = cast_tokens(digits, &suffix, negative)?;
        out.extend(cast.into_iter().map(|t| TokenWithSpan::new(t, token.span)));
    }
    Ok(out)
}

/// Removes a minus sign that ends `tokens` (before blanks) when it negates what follows
/// rather than subtracting it, and says whether there was one.
fn take_unary_minus(tokens: &mut Vec<TokenWithSpan>) -> bool {
    let mut significant = tokens.iter().enumerate().rev().filter(|(_, t)| !matches!(t.token, Token::Whitespace(_)));
    let Some((minus, TokenWithSpan { token: Token::Minus, .. })) = significant.next() else {
        return false;
    };
    let unary = match significant.next().map(|(_, t)| &t.token) {
        None => true,
        Some(Token::Word(word)) => word.quote_style.is_none() && EXPRESSION_STARTS.contains(&word.keyword),
        Some(token) => !ends_operand(token),
    };
    if unary {
        tokens.truncate(minus);
    }
    unary
}

/// Keywords after which an expression starts, so that a minus sign after them is a sign.
const EXPRESSION_STARTS: [Keyword; 20] = [
    Keyword::SELECT,
    Keyword::WHERE,
    Keyword::HAVING,
    Keyword::ON,
    Keyword::BY,
    Keyword::AND,
    Keyword::OR,
    Keyword::NOT,
    Keyword::CASE,
    Keyword::WHEN,
    Keyword::THEN,
    Keyword::ELSE,
    Keyword::BETWEEN,
    Keyword::LIKE,
    Keyword::ILIKE,
    Keyword::DIV,
    Keyword::DISTINCT,
    Keyword::ALL,
    Keyword::LIMIT,
    Keyword::OFFSET,
];

/// Whether `token` can end an operand, making a minus sign after it a subtraction.
fn ends_operand(token: &Token) -> bool {
    matches!(
        token,
        Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::Placeholder(_)
            | Token::RParen
            | Token::RBracket
    )
}

/// The tokens of `CAST(value AS type)` for the literal `digits` with `suffix`.
fn cast_tokens(digits: &str, suffix: &str, negative: bool) -> Result<Vec<Token>, ParserError> {
    let written = if negative { format!("-{digits}") } else { digits.to_string() };
    let integral = !digits.contains(['.', 'e', 'E']);
    let integer = |type_name: &str, min: i128, max: i128| match written.parse::<i128>() {
        Ok(value) if (min..=max).contains(&value) => Ok(signed(negative, digits.to_string())),
        _ => Err(out_of_range(&written, type_name, min.to_string(), max.to_string())),
    };
    let (value, data_type) = match suffix {
        "Y" | "S" | "L" if !integral => {
            return Err(ParserError::ParserError(format!("invalid numeric literal {digits}{suffix}")));
        }
        "Y" => (integer("tinyint", i8::MIN.into(), i8::MAX.into())?, words(&["TINYINT"])),
        "S" => (integer("smallint", i16::MIN.into(), i16::MAX.into())?, words(&["SMALLINT"])),
        "L" => (integer("bigint", i64::MIN.into(), i64::MAX.into())?, words(&["BIGINT"])),
        // As text, as DataFusion would first read the number as a DECIMAL and refuse `1e300`.
        "F" => match written.parse::<f32>() {
            Ok(value) if value.is_finite() => {
                (vec![Token::SingleQuotedString(format!("{value:?}"))], words(&["FLOAT"]))
            }
            _ => return Err(out_of_range(&written, "float", format!("{:e}", f32::MIN), format!("{:e}", f32::MAX))),
        },
        "D" => match written.parse::<f64>() {
            Ok(value) if value.is_finite() => {
                (vec![Token::SingleQuotedString(format!("{value:?}"))], words(&["DOUBLE"]))
            }
            _ => return Err(out_of_range(&written, "double", format!("{:e}", f64::MIN), format!("{:e}", f64::MAX))),
        },
        _ => decimal(digits, negative)?,
    };
    // An integer's cast is a TRY_CAST, the same for a value in range, so that the planner can
    // tell a typed literal from a user's CAST: Spark gives a literal beside a DECIMAL the
    // narrowest DECIMAL holding it, and a CAST its type's.
    let mut tokens = words(&[if ["Y", "S", "L"].contains(&suffix) { "TRY_CAST" } else { "CAST" }]);
    tokens.push(Token::LParen);
    tokens.extend(value);
    tokens.extend(words(&["AS"]));
    tokens.extend(data_type);
    tokens.push(Token::RParen);
    Ok(tokens)
}

fn words(keywords: &[&str]) -> Vec<Token> {
    keywords.iter().map(|k| Token::make_keyword(k)).collect()
}

/// A number token, after a minus sign if `negative`: DataFusion reads `-n` as one literal.
fn signed(negative: bool, digits: String) -> Vec<Token> {
    let number = Token::Number(digits, false);
    if negative { vec![Token::Minus, number] } else { vec![number] }
}

fn out_of_range(literal: &str, type_name: &str, min: String, max: String) -> ParserError {
    numeric_literal_out_of_range(format!(
        "numeric literal {literal} is outside the valid range for {type_name} with minimum value of {min} and maximum \
         value of {max}"
    ))
}

/// A `BD` literal as Java's `BigDecimal` reads it: the digits as written set the scale (an
/// exponent shifts it), and the type is DECIMAL(max(precision, scale), scale), a negative
/// scale widened to 0 (`1e2BD` is DECIMAL(3,0)).
fn decimal(digits: &str, negative: bool) -> Result<(Vec<Token>, Vec<Token>), ParserError> {
    let (mantissa, exponent) = match digits.find(['e', 'E']) {
        Some(at) => {
            (&digits[..at], digits[at + 1..].parse::<i64>().map_err(|e| ParserError::ParserError(e.to_string()))?)
        }
        None => (digits, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut unscaled = format!("{whole}{fraction}").trim_start_matches('0').to_string();
    let mut scale = fraction.len() as i64 - exponent;
    if scale < 0 {
        unscaled.extend(std::iter::repeat_n('0', scale.unsigned_abs() as usize));
        scale = 0;
    }
    let scale = scale as usize;
    let precision = unscaled.len().max(1).max(scale);
    if precision > MAX_DECIMAL_PRECISION {
        return Err(numeric_literal_out_of_range(format!(
            "decimal precision {precision} exceeds max precision {MAX_DECIMAL_PRECISION}"
        )));
    }
    let padded = format!("{unscaled:0>width$}", width = scale + 1);
    let (int_part, frac_part) = padded.split_at(padded.len() - scale);
    let text = if scale == 0 { int_part.to_string() } else { format!("{int_part}.{frac_part}") };
    let mut data_type = words(&["DECIMAL"]);
    data_type.extend([
        Token::LParen,
        Token::Number(precision.to_string(), false),
        Token::Comma,
        Token::Number(scale.to_string(), false),
        Token::RParen,
    ]);
    Ok((signed(negative, text), data_type))
}

//! The SQL dialect of bucketsql: PostgreSQL-style queries plus the Spark SQL statements that
//! define and inspect bucketed tables.
//!
//! Parsing goes through [`parse_sql`], which returns [`BucketSqlStatement`]s. Almost everything
//! becomes a plain sqlparser [`Statement`]; the Spark-specific encodings are:
//!
//! | SQL | AST |
//! | --- | --- |
//! | `CREATE [EXTERNAL] TABLE .. USING/PARTITIONED BY/CLUSTERED BY/..` | [`Statement::CreateTable`], see [`BucketSqlDialect`] |
//! | `EXPLAIN EXTENDED/FORMATTED/COST/CODEGEN stmt` | [`Statement::Explain`] with one [`UtilityOption`] named after the mode; read it with [`explain_mode`] |
//! | `EXPLAIN [ANALYZE] [VERBOSE] stmt` | [`Statement::Explain`] with sqlparser's `analyze`/`verbose` flags; also read with [`explain_mode`] |
//! | `DESCRIBE/DESC [TABLE] [EXTENDED/FORMATTED] t` | [`Statement::ExplainTable`] with `hive_format` |
//! | `SET key = value`, `SET key TO value`, `SET TIME ZONE value` | [`BucketSqlStatement::SetVariable`] with `value: Some(..)` |
//! | `SET key` | [`BucketSqlStatement::SetVariable`] with `value: None` (Spark: show the value) |
//! | `SET`, `SHOW ALL`, `SHOW name`, `SHOW TRANSACTION ISOLATION LEVEL` | [`BucketSqlStatement::ShowVariable`] |
//! | `RESET`, `RESET ALL`, `RESET key` | [`BucketSqlStatement::Reset`] |
//! | `SHOW PARTITIONS t [PARTITION (..)]` | [`BucketSqlStatement::ShowPartitions`] |
//! | `REFRESH TABLE t` | [`BucketSqlStatement::RefreshTable`] |
//! | `SHOW BUCKETS t [PARTITION (..)]` (ours) | [`BucketSqlStatement::ShowBuckets`] |
//! | `ANALYZE TABLE t COMPUTE STATISTICS [NOSCAN \| FOR COLUMNS .. \| FOR ALL COLUMNS]` | [`BucketSqlStatement::AnalyzeTable`] |
//! | `ALTER TABLE t SET/UNSET TBLPROPERTIES (..)` | [`BucketSqlStatement::SetTableProperties`], [`BucketSqlStatement::UnsetTableProperties`] |
//! | `DESCRIBE [TABLE] [EXTENDED] t column` | [`BucketSqlStatement::DescribeColumn`] |
//! | `ALTER TABLE t ADD COLUMN[S] (..)` | [`BucketSqlStatement::AddColumns`] |
//! | `ALTER TABLE t SET LOCATION '..'` | [`BucketSqlStatement::SetLocation`] |
//! | `MSCK REPAIR TABLE t [ADD/DROP/SYNC PARTITIONS]` (stock sqlparser) | [`Statement::Msck`] |
//! | `ALTER TABLE t RECOVER PARTITIONS` | [`Statement::Msck`] as for `MSCK REPAIR TABLE t ADD PARTITIONS` |
//!
//! Other forms that stock sqlparser already parses (`INSERT OVERWRITE`, `SHOW TABLES`,
//! `SHOW CREATE TABLE`, PostgreSQL's `ANALYZE t`, `OPTIMIZE`, transactions, PostgreSQL's other `SET`
//! statements, ...) keep the AST of the default parser.
//!
//! [`UtilityOption`]: datafusion::sql::sqlparser::ast::UtilityOption

mod alter_table;
mod create_table;
mod depth;
mod describe;
mod explain;
mod lateral_view;
mod minus;
mod refresh;
mod show_partitions;
mod statement;
mod table_statistics;
#[cfg(test)]
mod tests;
mod tokens;
mod typed_literals;
mod variables;

use std::any::TypeId;

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr, Reset, ResetStatement, Set, Statement};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

use alter_table::{parse_add_columns, parse_set_location};
use create_table::{is_create_table, parse_create_table};
use describe::parse_describe_table;
pub use explain::explain_mode;
use explain::{parse_spark_explain, spark_explain_mode};
pub use lateral_view::DEFAULT_COLUMNS;
use lateral_view::mark_unaliased_lateral_views;
use minus::minus_as_except;
use refresh::{parse_recover_partitions, parse_refresh_table};
use show_partitions::parse_show_partitions;
pub use statement::{AnalyzedColumns, BucketSqlStatement};
pub use table_statistics::property_pairs;
use table_statistics::{parse_analyze_table, parse_describe_column, parse_show_buckets, parse_table_properties};
use tokens::{is_statement_end, next_is_keyword};
use typed_literals::cast_typed_literals;
use variables::{parse_set_variable, reset_variable, set_time_zone, show_variable};

/// sqlparser dialect for bucketsql.
///
/// It behaves exactly like [`GenericDialect`] (which is what DataFusion parses with, and which
/// accepts PostgreSQL queries: `$1`, `::`, `E''` strings, `/*+ hints */`) with these additions:
///
/// * `CREATE [EXTERNAL] TABLE` is parsed with Spark's grammar: after the optional column list,
///   `USING`, `PARTITIONED BY`, `CLUSTERED BY .. [SORTED BY ..] INTO n BUCKETS`, `STORED AS`,
///   `LOCATION`, `COMMENT`, `TBLPROPERTIES` and `OPTIONS` may come in any order, each at most once,
///   followed by an optional `[AS] query`. Statements using clauses outside that grammar (for
///   example PostgreSQL's `PARTITION BY RANGE`, or `LIKE`) fall back to the default parser.
/// * `EXPLAIN EXTENDED|FORMATTED|COST|CODEGEN`, `DESCRIBE TABLE [EXTENDED|FORMATTED] t` and
///   `ALTER TABLE t RECOVER PARTITIONS` parse (see the module documentation for their AST), and a
///   bare `RESET` becomes
///   [`Statement::Reset`] with [`Reset::ALL`].
/// * `LONG` is a column type (`BIGINT`), as in Spark, and so is `MAP<K, V>`.
/// * Spark's typed literals (`3Y`, `7S`, `10L`, `2.5F`, `2.5D`, `1.5BD`) are casts of the
///   number, `TRY_CAST`s for the integers (see [`typed_literals`]), `a div b` is [`BinaryOperator::MyIntegerDivide`] and
///   `MINUS` is `EXCEPT`.
///
/// The resulting `CREATE TABLE` AST:
/// * `columns`: the column list (empty when omitted, e.g. for CTAS);
/// * `hive_distribution`: [`HiveDistributionStyle::PARTITIONED`] with the partition columns;
///   `data_type` is [`DataType::Unspecified`](datafusion::sql::sqlparser::ast::DataType::Unspecified)
///   for Spark's names-only form and the declared type for the Hive form `(col type, ..)`;
/// * `clustered_by`: bucket columns, `sorted_by` with the direction as written
///   (`options.asc == Some(false)` for `DESC`) and `num_buckets` as [`Value::Number`] (not
///   validated);
/// * `hive_formats`: `storage` is [`HiveIOFormat::Using`] for `USING provider` (dotted provider
///   names are kept as one identifier) or [`HiveIOFormat::FileFormat`] for `STORED AS`;
///   `location` holds `LOCATION`; `serde_properties` holds `OPTIONS (..)`, which Spark keeps as
///   storage properties, separate from table properties;
/// * `table_options`: [`CreateTableOptions::TableProperties`] for `TBLPROPERTIES (..)`;
/// * `comment`: [`CommentDef::WithoutEq`]; `query`: the CTAS query; `external`, `if_not_exists`.
///
/// Property lists accept Spark's `key [=] value` entries where the key is an identifier, a dotted
/// identifier or a string; each becomes a [`SqlOption::KeyValue`] whose key `value` is the
/// unquoted key text.
///
/// [`HiveDistributionStyle::PARTITIONED`]: datafusion::sql::sqlparser::ast::HiveDistributionStyle::PARTITIONED
/// [`Value::Number`]: datafusion::sql::sqlparser::ast::Value::Number
/// [`HiveIOFormat::Using`]: datafusion::sql::sqlparser::ast::HiveIOFormat::Using
/// [`HiveIOFormat::FileFormat`]: datafusion::sql::sqlparser::ast::HiveIOFormat::FileFormat
/// [`CreateTableOptions::TableProperties`]: datafusion::sql::sqlparser::ast::CreateTableOptions::TableProperties
/// [`CommentDef::WithoutEq`]: datafusion::sql::sqlparser::ast::CommentDef::WithoutEq
/// [`SqlOption::KeyValue`]: datafusion::sql::sqlparser::ast::SqlOption::KeyValue
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BucketSqlDialect;

/// Forwards boolean feature switches to [`GenericDialect`], so that queries parse exactly as they
/// do in DataFusion's default dialect.
macro_rules! generic_features {
    ($($feature:ident),* $(,)?) => {
        $(
            fn $feature(&self) -> bool {
                GenericDialect.$feature()
            }
        )*
    };
}

impl Dialect for BucketSqlDialect {
    /// Reports the identity of [`GenericDialect`]: sqlparser gates some syntax on the dialect
    /// type rather than on feature switches (`CLUSTERED BY .. INTO n BUCKETS` and other
    /// Hive/Generic-only paths), and those must stay enabled.
    fn dialect(&self) -> TypeId {
        TypeId::of::<GenericDialect>()
    }

    fn is_delimited_identifier_start(&self, ch: char) -> bool {
        GenericDialect.is_delimited_identifier_start(ch)
    }

    fn is_identifier_start(&self, ch: char) -> bool {
        GenericDialect.is_identifier_start(ch)
    }

    fn is_identifier_part(&self, ch: char) -> bool {
        GenericDialect.is_identifier_part(ch)
    }

    fn supports_long_type_as_bigint(&self) -> bool {
        true
    }

    /// Spark's `MAP<STRING, BIGINT>` column type.
    fn supports_map_literal_with_angle_brackets(&self) -> bool {
        true
    }

    generic_features! {
        supports_unicode_string_literal,
        supports_partition_by_after_order_by,
        supports_array_join_syntax,
        supports_group_by_expr,
        supports_group_by_with_modifier,
        supports_left_associative_joins_without_parens,
        supports_connect_by,
        supports_match_recognize,
        supports_pipe_operator,
        supports_start_transaction_modifier,
        supports_window_function_null_treatment_arg,
        supports_dictionary_syntax,
        supports_window_clause_named_window_reference,
        supports_parenthesized_set_variables,
        supports_select_wildcard_except,
        support_map_literal_syntax,
        allow_extract_custom,
        allow_extract_single_quotes,
        supports_extract_comma_syntax,
        supports_create_view_comment_syntax,
        supports_parens_around_table_factor,
        supports_values_as_table_factor,
        supports_create_index_with_clause,
        supports_explain_with_utility_options,
        supports_limit_comma,
        supports_update_order_by,
        supports_from_first_select,
        supports_projection_trailing_commas,
        supports_asc_desc_in_column_definition,
        supports_try_convert,
        supports_bitwise_shift_operators,
        supports_comment_on,
        supports_load_extension,
        supports_named_fn_args_with_assignment_operator,
        supports_struct_literal,
        supports_empty_projections,
        supports_nested_comments,
        supports_multiline_comment_hints,
        supports_user_host_grantee,
        supports_string_escape_constant,
        supports_array_typedef_with_brackets,
        supports_match_against,
        supports_set_names,
        supports_comma_separated_set_assignments,
        supports_filter_during_aggregation,
        supports_select_wildcard_exclude,
        supports_data_type_signed_suffix,
        supports_interval_options,
        supports_quote_delimited_string,
        supports_select_wildcard_replace,
        supports_select_wildcard_ilike,
        supports_select_wildcard_rename,
        supports_optimize_table,
        supports_install,
        supports_detach,
        supports_prewhere,
        supports_with_fill,
        supports_limit_by,
        supports_interpolate,
        supports_settings,
        supports_select_format,
        supports_comment_optimizer_hint,
        supports_constraint_keyword_without_name,
        supports_key_column_option,
        supports_comma_separated_trim,
        supports_cte_without_as,
        supports_select_item_multi_column_alias,
        supports_xml_expressions,
    }

    /// Spark's `a div b` is [`BinaryOperator::MyIntegerDivide`], as high in precedence as `*`.
    /// `a IS [NOT] DISTINCT FROM b AND c` compares `a` with `b`, as in PostgreSQL and Spark:
    /// the right-hand side binds as tightly as `IS`, where sqlparser reads the rest of the
    /// expression (`b AND c`) into it. An operator whose left operand already nests too deep
    /// is refused (see [`depth`]).
    fn parse_infix(&self, parser: &mut Parser, expr: &Expr, precedence: u8) -> Option<Result<Expr, ParserError>> {
        if let Err(too_deep) = depth::check_operand(expr) {
            return Some(Err(too_deep));
        }
        let [is, first, second, third] = parser.peek_tokens::<4>();
        let keyword = |token: &Token, expected: Keyword| matches!(token, Token::Word(w) if w.keyword == expected);
        if keyword(&is, Keyword::DIV) {
            parser.next_token();
            let left = Box::new(expr.clone());
            return Some(parser.parse_subexpr(precedence).map(|right| Expr::BinaryOp {
                left,
                op: BinaryOperator::MyIntegerDivide,
                right: Box::new(right),
            }));
        }
        if !keyword(&is, Keyword::IS) {
            return None;
        }
        let negated = keyword(&first, Keyword::NOT);
        let (distinct, from) = if negated { (&second, &third) } else { (&first, &second) };
        if !keyword(distinct, Keyword::DISTINCT) || !keyword(from, Keyword::FROM) {
            return None;
        }
        for _ in 0..if negated { 4 } else { 3 } {
            parser.next_token();
        }
        let left = Box::new(expr.clone());
        Some(parser.parse_subexpr(precedence).map(|right| {
            if negated {
                Expr::IsNotDistinctFrom(left, Box::new(right))
            } else {
                Expr::IsDistinctFrom(left, Box::new(right))
            }
        }))
    }

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        let keyword = match &parser.peek_token_ref().token {
            Token::Word(word) => word.keyword,
            _ => return None,
        };
        match keyword {
            Keyword::CREATE if is_create_table(parser) => Some(parse_create_table(parser)),
            Keyword::EXPLAIN => spark_explain_mode(parser).map(|mode| parse_spark_explain(parser, mode)),
            Keyword::DESCRIBE | Keyword::DESC if next_is_keyword(parser, 1, Keyword::TABLE) => {
                Some(parse_describe_table(parser))
            }
            Keyword::ALTER if next_is_keyword(parser, 1, Keyword::TABLE) => {
                parse_recover_partitions(parser).transpose()
            }
            Keyword::RESET if is_statement_end(parser.peek_nth_token_ref(1)) => {
                parser.next_token();
                Some(Ok(Statement::Reset(ResetStatement { reset: Reset::ALL })))
            }
            _ => None,
        }
    }
}

/// Parses one or more `;`-separated statements with [`BucketSqlDialect`], refusing those that
/// nest too deep ([`depth`]).
pub fn parse_sql(sql: &str) -> Result<Vec<BucketSqlStatement>, ParserError> {
    let dialect = BucketSqlDialect;
    let tokens = Tokenizer::new(&dialect, sql).with_unescape(true).tokenize_with_location()?;
    let tokens = mark_unaliased_lateral_views(cast_typed_literals(tokens)?);
    depth::check_set_operations(&tokens)?;
    let mut parser = Parser::new(&dialect).with_tokens_with_locations(tokens);
    let mut statements = Vec::new();
    let mut expecting_delimiter = false;
    loop {
        while parser.consume_token(&Token::SemiColon) {
            expecting_delimiter = false;
        }
        if parser.peek_token_ref().token == Token::EOF {
            return Ok(statements);
        }
        if expecting_delimiter {
            return parser.expected_ref("end of statement", parser.peek_token_ref());
        }
        let statement = parse_statement(&mut parser)?;
        depth::check_statement(&statement)?;
        statements.push(statement);
        expecting_delimiter = true;
    }
}

/// Parses one statement: the forms that need [`BucketSqlStatement`] here, everything else with
/// the parser (and so with [`BucketSqlDialect::parse_statement`]).
fn parse_statement(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    if parser.peek_keyword(Keyword::SET)
        && let Some(set) = parser.maybe_parse(parse_set_variable)?
    {
        return Ok(set);
    }
    if parser.parse_keywords(&[Keyword::SHOW, Keyword::PARTITIONS]) {
        return parse_show_partitions(parser);
    }
    if parser.parse_keywords(&[Keyword::REFRESH, Keyword::TABLE]) {
        return parse_refresh_table(parser);
    }
    if parser.parse_keywords(&[Keyword::SHOW, Keyword::BUCKETS]) {
        return parse_show_buckets(parser);
    }
    if parser.parse_keywords(&[Keyword::ANALYZE, Keyword::TABLE]) {
        return parse_analyze_table(parser);
    }
    if parser.peek_keyword(Keyword::ALTER)
        && next_is_keyword(parser, 1, Keyword::TABLE)
        && let Some(properties) = parse_table_properties(parser)?
    {
        return Ok(properties);
    }
    if parser.peek_keyword(Keyword::ALTER)
        && next_is_keyword(parser, 1, Keyword::TABLE)
        && let Some(add_columns) = parse_add_columns(parser)?
    {
        return Ok(add_columns);
    }
    if parser.peek_keyword(Keyword::ALTER)
        && next_is_keyword(parser, 1, Keyword::TABLE)
        && let Some(set_location) = parse_set_location(parser)?
    {
        return Ok(set_location);
    }
    if (parser.peek_keyword(Keyword::DESCRIBE) || parser.peek_keyword(Keyword::DESC))
        && let Some(describe) = parse_describe_column(parser)?
    {
        return Ok(describe);
    }
    Ok(match parser.parse_statement()? {
        Statement::Set(Set::SetTimeZone { value, .. }) => set_time_zone(value),
        Statement::Reset(ResetStatement { reset }) => reset_variable(reset),
        Statement::ShowVariable { variable } => show_variable(variable),
        mut statement => {
            minus_as_except(&mut statement);
            BucketSqlStatement::Sql(statement)
        }
    })
}

/// The one plain SQL statement of `sql`, for tests of AST rewrites.
#[cfg(test)]
pub fn parse_one(sql: &str) -> Statement {
    match tests::bucket_statement(sql) {
        BucketSqlStatement::Sql(statement) => statement,
        other => panic!("expected a sqlparser statement for {sql:?}, got {other:?}"),
    }
}

/// The one plain SQL statement of `sql` as `rewrite` leaves it, as text, for tests of AST
/// rewrites.
#[cfg(test)]
pub fn rewritten_by(sql: &str, rewrite: impl FnOnce(&mut Statement)) -> String {
    let mut statement = parse_one(sql);
    rewrite(&mut statement);
    statement.to_string()
}

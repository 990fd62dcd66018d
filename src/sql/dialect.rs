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
//!
//! Other forms that stock sqlparser already parses (`INSERT OVERWRITE`, `SHOW TABLES`,
//! `SHOW CREATE TABLE`, `ANALYZE TABLE`, `OPTIMIZE`, transactions, PostgreSQL's other `SET`
//! statements, ...) keep the AST of the default parser.

use std::any::TypeId;
use std::fmt;

use datafusion::sql::sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder;
use datafusion::sql::sqlparser::ast::{
    ClusteredBy, ColumnDef, CommentDef, CreateTable, CreateTableOptions, DescribeAlias, Expr,
    FileFormat, HiveDescribeFormat, HiveDistributionStyle, HiveFormat, HiveIOFormat, Ident,
    ObjectName, OptimizerHintStyle, Query, Reset, ResetStatement, Select, Set, SqlOption,
    Statement, UtilityOption, Value, ValueWithSpan,
};
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

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
/// * `EXPLAIN EXTENDED|FORMATTED|COST|CODEGEN` and `DESCRIBE TABLE [EXTENDED|FORMATTED] t` parse
///   (see the module documentation for their AST), and a bare `RESET` becomes
///   [`Statement::Reset`] with [`Reset::ALL`].
/// * `LONG` is a column type (`BIGINT`), as in Spark.
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

    fn parse_statement(&self, parser: &mut Parser) -> Option<Result<Statement, ParserError>> {
        let keyword = match &parser.peek_token_ref().token {
            Token::Word(word) => word.keyword,
            _ => return None,
        };
        match keyword {
            Keyword::CREATE if is_create_table(parser) => Some(parse_create_table(parser)),
            Keyword::EXPLAIN => {
                spark_explain_mode(parser).map(|mode| parse_spark_explain(parser, mode))
            }
            Keyword::DESCRIBE | Keyword::DESC if next_is_keyword(parser, 1, Keyword::TABLE) => {
                Some(parse_describe_table(parser))
            }
            Keyword::RESET if is_statement_end(parser.peek_nth_token_ref(1)) => {
                parser.next_token();
                Some(Ok(Statement::Reset(ResetStatement { reset: Reset::ALL })))
            }
            _ => None,
        }
    }
}

/// A parsed bucketsql statement: a sqlparser [`Statement`], or a session-configuration or Spark
/// command whose sqlparser AST would be missing or lossy.
///
/// Configuration names are the dotted key as written (identifier quotes removed, case kept).
#[derive(Debug, Clone, PartialEq)]
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every statement is `Sql`, and sqlparser hands out `Statement` by value"
)]
pub enum BucketSqlStatement {
    /// Any other statement.
    Sql(Statement),
    /// `SET name = value` / `SET name TO value`, or Spark's `SET name` (`value: None`), which
    /// shows the current value. As in Spark, the value is the raw text up to the end of the
    /// statement, trimmed (`SET spark.sql.files.maxPartitionBytes=128MB` gives `128MB`,
    /// `SET a = 1, b = 2` gives `1, b = 2`); a value that is a single quoted string is unquoted.
    /// `SET TIME ZONE value` sets `timezone`.
    SetVariable { name: String, value: Option<String> },
    /// Lists every setting (`name: None`: Spark's bare `SET`, PostgreSQL's `SHOW ALL`) or shows
    /// one (PostgreSQL's `SHOW name`; `SHOW TRANSACTION ISOLATION LEVEL` is
    /// `transaction_isolation`).
    ShowVariable { name: Option<String> },
    /// `RESET name`, or `RESET` / `RESET ALL` (`name: None`).
    Reset { name: Option<String> },
    /// `SHOW PARTITIONS table [PARTITION (col = value, ...)]`.
    ShowPartitions {
        /// The table whose partitions are listed.
        table: ObjectName,
        /// The optional, possibly partial, partition spec restricting the listing.
        partition_spec: Vec<(Ident, Expr)>,
    },
}

impl fmt::Display for BucketSqlStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketSqlStatement::Sql(statement) => write!(f, "{statement}"),
            BucketSqlStatement::SetVariable { name, value: None } => write!(f, "SET {name}"),
            BucketSqlStatement::SetVariable {
                name,
                value: Some(value),
            } => write!(f, "SET {name} = {value}"),
            BucketSqlStatement::ShowVariable { name: None } => write!(f, "SHOW ALL"),
            BucketSqlStatement::ShowVariable { name: Some(name) } => write!(f, "SHOW {name}"),
            BucketSqlStatement::Reset { name: None } => write!(f, "RESET"),
            BucketSqlStatement::Reset { name: Some(name) } => write!(f, "RESET {name}"),
            BucketSqlStatement::ShowPartitions {
                table,
                partition_spec,
            } => {
                write!(f, "SHOW PARTITIONS {table}")?;
                if !partition_spec.is_empty() {
                    let spec: Vec<String> = partition_spec
                        .iter()
                        .map(|(column, value)| format!("{column} = {value}"))
                        .collect();
                    write!(f, " PARTITION ({})", spec.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

/// Parses one or more `;`-separated statements with [`BucketSqlDialect`].
pub fn parse_sql(sql: &str) -> Result<Vec<BucketSqlStatement>, ParserError> {
    let dialect = BucketSqlDialect;
    let mut parser = Parser::new(&dialect).try_with_sql(sql)?;
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
        statements.push(parse_statement(&mut parser)?);
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
    Ok(match parser.parse_statement()? {
        Statement::Set(Set::SetTimeZone { value, .. }) => BucketSqlStatement::SetVariable {
            name: "timezone".to_string(),
            value: Some(match value {
                Expr::Value(ValueWithSpan {
                    value: Value::SingleQuotedString(text),
                    ..
                }) => text,
                other => other.to_string(),
            }),
        },
        Statement::Reset(ResetStatement { reset }) => BucketSqlStatement::Reset {
            name: match reset {
                Reset::ALL => None,
                Reset::ConfigurationParameter(name) => Some(dotted_name(&name)),
            },
        },
        Statement::ShowVariable { variable } => show_variable(variable),
        statement => BucketSqlStatement::Sql(statement),
    })
}

/// `SET`, `SET name` and `SET name (=|TO) value`; an error makes the caller fall back to the
/// default parser (for `SET TIME ZONE ..`, `SET ROLE ..`, `SET (a, b) = ..`, ...).
fn parse_set_variable(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
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
    let value = match tokens
        .iter()
        .filter(|token| !matches!(token, Token::Whitespace(_)))
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => return parser.expected_ref("a value", parser.peek_token_ref()),
        [Token::SingleQuotedString(text)] => text.clone(),
        _ => tokens
            .iter()
            .map(Token::to_string)
            .collect::<String>()
            .trim()
            .to_string(),
    };
    Ok(BucketSqlStatement::SetVariable {
        name,
        value: Some(value),
    })
}

/// PostgreSQL's `SHOW name`, `SHOW ALL` and `SHOW TRANSACTION ISOLATION LEVEL`. sqlparser keeps
/// only the words of other `SHOW` statements (`SHOW a.b` and `SHOW a b` look alike), so those stay
/// [`Statement::ShowVariable`].
fn show_variable(variable: Vec<Ident>) -> BucketSqlStatement {
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

/// The parts of a name joined with dots, without identifier quotes: configuration keys such as
/// `spark.sql.shuffle.partitions` and Spark providers or property keys are single dotted names.
fn dotted_name(name: &ObjectName) -> String {
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

/// `SHOW PARTITIONS` (already consumed) `table [PARTITION (col = value, ...)]`.
fn parse_show_partitions(parser: &mut Parser) -> Result<BucketSqlStatement, ParserError> {
    let table = parser.parse_object_name(false)?;
    let mut partition_spec = Vec::new();
    if parser.parse_keyword(Keyword::PARTITION) {
        parser.expect_token(&Token::LParen)?;
        partition_spec = parser.parse_comma_separated(|p| {
            let column = p.parse_identifier()?;
            p.expect_token(&Token::Eq)?;
            Ok((column, p.parse_expr()?))
        })?;
        parser.expect_token(&Token::RParen)?;
    }
    Ok(BucketSqlStatement::ShowPartitions {
        table,
        partition_spec,
    })
}

fn is_statement_end(token: &TokenWithSpan) -> bool {
    matches!(token.token, Token::EOF | Token::SemiColon)
}

fn next_is_keyword(parser: &Parser, n: usize, keyword: Keyword) -> bool {
    matches!(&parser.peek_nth_token_ref(n).token, Token::Word(w) if w.keyword == keyword)
}

/// `CREATE TABLE` or `CREATE EXTERNAL TABLE` (not `OR REPLACE`, `TEMPORARY`, views, ...).
fn is_create_table(parser: &Parser) -> bool {
    let table_at = if next_is_keyword(parser, 1, Keyword::EXTERNAL) {
        2
    } else {
        1
    };
    next_is_keyword(parser, table_at, Keyword::TABLE)
}

fn parse_create_table(parser: &mut Parser) -> Result<Statement, ParserError> {
    parser.expect_keyword(Keyword::CREATE)?;
    let mut unknown_clause = false;
    match parser.try_parse(|p| parse_spark_create_table(p, &mut unknown_clause)) {
        Ok(create) => Ok(Statement::CreateTable(create)),
        Err(spark_error) if unknown_clause => parser
            .try_parse(|p| {
                let statement = p.parse_create()?;
                if is_statement_end(p.peek_token_ref()) {
                    Ok(statement)
                } else {
                    p.expected_ref("end of statement", p.peek_token_ref())
                }
            })
            .map_err(|_| spark_error),
        Err(error) => Err(error),
    }
}

/// The clauses of Spark's `CREATE TABLE`, each allowed at most once.
#[derive(Default)]
struct CreateTableClauses {
    provider: Option<Ident>,
    partitioned_by: Option<Vec<ColumnDef>>,
    clustered_by: Option<ClusteredBy>,
    stored_as: Option<FileFormat>,
    location: Option<String>,
    comment: Option<String>,
    table_properties: Option<Vec<SqlOption>>,
    options: Option<Vec<SqlOption>>,
    query: Option<Box<Query>>,
}

/// Rejects a second occurrence of a `CREATE TABLE` clause, as Spark does.
fn check_unique<T>(slot: &Option<T>, clause: &str, at: &TokenWithSpan) -> Result<(), ParserError> {
    match slot {
        Some(_) => Err(ParserError::ParserError(format!(
            "Found duplicate clauses: {clause}{}",
            at.span.start
        ))),
        None => Ok(()),
    }
}

/// Parses `[EXTERNAL] TABLE ...` after `CREATE`. Sets `unknown_clause` when the statement has a
/// clause outside Spark's grammar, so that the caller can retry with the default parser.
fn parse_spark_create_table(
    parser: &mut Parser,
    unknown_clause: &mut bool,
) -> Result<CreateTable, ParserError> {
    let external = parser.parse_keyword(Keyword::EXTERNAL);
    parser.expect_keyword(Keyword::TABLE)?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    let (columns, constraints) = parser.parse_columns()?;

    let mut c = CreateTableClauses::default();
    loop {
        let token = parser.peek_token();
        if is_statement_end(&token) {
            break;
        }
        let keyword = match &token.token {
            Token::Word(word) => word.keyword,
            _ => Keyword::NoKeyword,
        };
        match keyword {
            Keyword::USING => {
                check_unique(&c.provider, "USING", &token)?;
                parser.next_token();
                c.provider = Some(parse_dotted_name(parser)?);
            }
            Keyword::PARTITIONED => {
                check_unique(&c.partitioned_by, "PARTITIONED BY", &token)?;
                match parser.parse_hive_distribution()? {
                    HiveDistributionStyle::PARTITIONED { columns } => {
                        c.partitioned_by = Some(columns)
                    }
                    _ => return expected_by(parser),
                }
            }
            Keyword::CLUSTERED => {
                check_unique(&c.clustered_by, "CLUSTERED BY", &token)?;
                c.clustered_by = parser.parse_optional_clustered_by()?;
                if c.clustered_by.is_none() {
                    return expected_by(parser);
                }
            }
            Keyword::STORED => {
                check_unique(&c.stored_as, "STORED AS", &token)?;
                parser.next_token();
                parser.expect_keyword(Keyword::AS)?;
                c.stored_as = Some(parser.parse_file_format()?);
            }
            Keyword::LOCATION => {
                check_unique(&c.location, "LOCATION", &token)?;
                parser.next_token();
                c.location = Some(parser.parse_literal_string()?);
            }
            Keyword::COMMENT => {
                check_unique(&c.comment, "COMMENT", &token)?;
                parser.next_token();
                c.comment = Some(parser.parse_literal_string()?);
            }
            Keyword::TBLPROPERTIES => {
                check_unique(&c.table_properties, "TBLPROPERTIES", &token)?;
                parser.next_token();
                c.table_properties = Some(parse_property_list(parser)?);
            }
            Keyword::OPTIONS => {
                check_unique(&c.options, "OPTIONS", &token)?;
                parser.next_token();
                c.options = Some(parse_property_list(parser)?);
            }
            Keyword::AS => {
                parser.next_token();
                c.query = Some(parser.parse_query()?);
                break;
            }
            Keyword::SELECT | Keyword::VALUES => {
                c.query = Some(parser.parse_query()?);
                break;
            }
            Keyword::WITH if parser.peek_nth_token_ref(1).token != Token::LParen => {
                c.query = Some(parser.parse_query()?);
                break;
            }
            _ => {
                *unknown_clause = true;
                return parser.expected(
                    "USING, PARTITIONED BY, CLUSTERED BY, STORED AS, LOCATION, COMMENT, \
                     TBLPROPERTIES, OPTIONS, AS query or end of statement",
                    token,
                );
            }
        }
    }

    let storage = match (c.provider, c.stored_as) {
        (Some(_), Some(format)) => {
            return Err(ParserError::ParserError(format!(
                "Operation not allowed: CREATE TABLE ... USING ... STORED AS {format}"
            )));
        }
        (Some(format), None) => Some(HiveIOFormat::Using { format }),
        (None, Some(format)) => Some(HiveIOFormat::FileFormat { format }),
        (None, None) => None,
    };
    let hive_formats = (storage.is_some() || c.location.is_some() || c.options.is_some())
        .then_some(HiveFormat {
            row_format: None,
            serde_properties: c.options,
            storage,
            location: c.location,
        });
    let hive_distribution = match c.partitioned_by {
        Some(columns) => HiveDistributionStyle::PARTITIONED { columns },
        None => HiveDistributionStyle::NONE,
    };
    let table_options = match c.table_properties {
        Some(properties) => CreateTableOptions::TableProperties(properties),
        None => CreateTableOptions::None,
    };
    Ok(CreateTableBuilder::new(name)
        .external(external)
        .if_not_exists(if_not_exists)
        .columns(columns)
        .constraints(constraints)
        .hive_distribution(hive_distribution)
        .clustered_by(c.clustered_by)
        .hive_formats(hive_formats)
        .table_options(table_options)
        .comment_after_column_def(c.comment.map(CommentDef::WithoutEq))
        .query(c.query)
        .build())
}

/// Reports a `PARTITIONED` or `CLUSTERED` that is not followed by `BY`.
fn expected_by<T>(parser: &mut Parser) -> Result<T, ParserError> {
    parser.next_token();
    parser.expected_ref("BY", parser.peek_token_ref())
}

/// A possibly dotted name as one identifier, e.g. the provider `org.apache.spark.sql.parquet` or
/// the property key `parquet.compression`.
fn parse_dotted_name(parser: &mut Parser) -> Result<Ident, ParserError> {
    let name = parser.parse_object_name(false)?;
    if let [part] = name.0.as_slice()
        && let Some(ident) = part.as_ident()
    {
        return Ok(ident.clone());
    }
    Ok(Ident::new(dotted_name(&name)))
}

/// Spark's property list: `( key [=] value, ... )` with identifier, dotted or string keys.
fn parse_property_list(parser: &mut Parser) -> Result<Vec<SqlOption>, ParserError> {
    parser.expect_token(&Token::LParen)?;
    let properties = parser.parse_comma_separated(|p| {
        let key = parse_property_key(p)?;
        let _ = p.consume_token(&Token::Eq);
        let value = p.parse_expr()?;
        Ok(SqlOption::KeyValue { key, value })
    })?;
    parser.expect_token(&Token::RParen)?;
    Ok(properties)
}

fn parse_property_key(parser: &mut Parser) -> Result<Ident, ParserError> {
    if let Token::SingleQuotedString(key) = &parser.peek_token_ref().token {
        let key = Ident::with_quote('\'', key.clone());
        parser.next_token();
        return Ok(key);
    }
    parse_dotted_name(parser)
}

/// The mode of an `EXPLAIN` statement, as in Spark's `EXPLAIN [mode] statement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainMode {
    /// `EXPLAIN stmt`: the physical plan.
    Simple,
    /// `EXPLAIN EXTENDED` (also `EXPLAIN VERBOSE`): parsed, analyzed, optimized and physical plans.
    Extended,
    /// `EXPLAIN FORMATTED`: plan outline followed by per-operator details.
    Formatted,
    /// `EXPLAIN COST`: optimized logical plan with statistics.
    Cost,
    /// `EXPLAIN CODEGEN`: generated code.
    Codegen,
    /// `EXPLAIN ANALYZE`: execute and report runtime metrics.
    Analyze,
}

/// Reads the mode of an `EXPLAIN` statement (`None` for anything else, including
/// `DESCRIBE query`).
///
/// Spark's modes are stored as a single argument-less [`UtilityOption`] named `EXTENDED`,
/// `FORMATTED`, `COST` or `CODEGEN`; `ANALYZE` and `VERBOSE` use sqlparser's own flags. The
/// PostgreSQL forms `EXPLAIN (ANALYZE)` and `EXPLAIN (VERBOSE)` are recognised too. Spark has no
/// `VERBOSE`; it maps to [`ExplainMode::Extended`], the mode that shows the most plans.
pub fn explain_mode(stmt: &Statement) -> Option<ExplainMode> {
    let Statement::Explain {
        describe_alias: DescribeAlias::Explain,
        analyze,
        verbose,
        options,
        ..
    } = stmt
    else {
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
fn spark_explain_mode(parser: &Parser) -> Option<&'static str> {
    match &parser.peek_nth_token_ref(1).token {
        Token::Word(word) if word.quote_style.is_none() => {
            ["EXTENDED", "FORMATTED", "COST", "CODEGEN", "LOGICAL"]
                .into_iter()
                .find(|mode| word.value.eq_ignore_ascii_case(mode))
        }
        _ => None,
    }
}

fn parse_spark_explain(parser: &mut Parser, mode: &str) -> Result<Statement, ParserError> {
    parser.expect_keyword(Keyword::EXPLAIN)?;
    let mode_token = parser.next_token();
    if mode == "LOGICAL" {
        return Err(ParserError::ParserError(format!(
            "Operation not allowed: EXPLAIN LOGICAL{}",
            mode_token.span.start
        )));
    }
    let statement = parser.parse_statement()?;
    if matches!(
        statement,
        Statement::Explain { .. } | Statement::ExplainTable { .. }
    ) {
        return Err(ParserError::ParserError(
            "Explain must be root of the plan".to_string(),
        ));
    }
    Ok(Statement::Explain {
        describe_alias: DescribeAlias::Explain,
        analyze: false,
        verbose: false,
        query_plan: false,
        estimate: false,
        statement: Box::new(statement),
        format: None,
        options: Some(vec![UtilityOption {
            name: Ident::new(mode),
            arg: None,
        }]),
    })
}

/// `DESCRIBE|DESC TABLE [EXTENDED|FORMATTED] name`; the forms without `TABLE` are left to the
/// default parser, which handles them the same way.
fn parse_describe_table(parser: &mut Parser) -> Result<Statement, ParserError> {
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
    Ok(Statement::ExplainTable {
        describe_alias,
        hive_format,
        has_table_keyword: true,
        table_name,
    })
}

/// A Spark optimizer hint such as `BROADCAST(t)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The hint name, upper-cased (Spark matches hint names case-insensitively).
    pub name: String,
    /// The arguments as written, trimmed; a backquoted or double-quoted identifier is unquoted.
    pub args: Vec<String>,
}

/// The Spark hints of a `SELECT`: the `/*+ ... */` comment right after `SELECT`, which may hold
/// several hints separated by commas or spaces, e.g. `/*+ BROADCAST(a), MERGE(b, c) */`.
///
/// Only `/*+` comments count, as in Spark (`--+` and prefixed `/*abc+` comments are ignored). The
/// scan of a comment stops at text that is not hint syntax.
pub fn extract_hints(select: &Select) -> Vec<Hint> {
    select
        .optimizer_hints
        .iter()
        .filter(|hint| hint.prefix.is_empty() && hint.style == OptimizerHintStyle::MultiLine)
        .flat_map(|hint| parse_hint_text(&hint.text))
        .collect()
}

fn parse_hint_text(text: &str) -> Vec<Hint> {
    let mut hints = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        let name_len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if name_len == 0 {
            return hints;
        }
        let name = rest[..name_len].to_ascii_uppercase();
        rest = rest[name_len..].trim_start();
        let mut args = Vec::new();
        if let Some(after_paren) = rest.strip_prefix('(') {
            let Some((parsed, remaining)) = parse_hint_args(after_paren) else {
                return hints;
            };
            args = parsed;
            rest = remaining;
        }
        hints.push(Hint { name, args });
    }
}

/// Splits `a, f(b, c), 'x,y')...` at top-level commas up to the closing parenthesis; returns the
/// arguments and the text after `)`, or `None` if the parenthesis is never closed.
fn parse_hint_args(text: &str) -> Option<(Vec<String>, &str)> {
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth > 0 => depth -= 1,
            (None, ',') if depth == 0 => {
                args.push(unquote_hint_arg(&text[start..i]));
                start = i + 1;
            }
            (None, ')') => {
                let last = text[start..i].trim();
                if !(args.is_empty() && last.is_empty()) {
                    args.push(unquote_hint_arg(last));
                }
                return Some((args, &text[i + 1..]));
            }
            (None, _) => {}
        }
    }
    None
}

fn unquote_hint_arg(arg: &str) -> String {
    let arg = arg.trim();
    for quote in ['`', '"'] {
        if arg.len() >= 2 && arg.starts_with(quote) && arg.ends_with(quote) {
            let doubled = format!("{quote}{quote}");
            return arg[1..arg.len() - 1].replace(&doubled, &quote.to_string());
        }
    }
    arg.to_string()
}

/// The one plain SQL statement of `sql`, for tests of AST rewrites.
#[cfg(test)]
pub fn parse_one(sql: &str) -> Statement {
    match parse_sql(sql).expect("parses").pop() {
        Some(BucketSqlStatement::Sql(statement)) => statement,
        other => panic!("not one SQL statement: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::{
        ColumnOption, DataType, ExactNumberInfo, OrderByExpr, SetExpr, ShowStatementInClause,
        TimezoneInfo,
    };

    fn parse_one(sql: &str) -> BucketSqlStatement {
        let mut statements =
            parse_sql(sql).unwrap_or_else(|e| panic!("failed to parse {sql:?}: {e}"));
        assert_eq!(statements.len(), 1, "{sql}");
        statements.remove(0)
    }

    fn sql_statement(sql: &str) -> Statement {
        match parse_one(sql) {
            BucketSqlStatement::Sql(statement) => statement,
            other => panic!("expected a sqlparser statement for {sql:?}, got {other:?}"),
        }
    }

    fn create(sql: &str) -> CreateTable {
        match sql_statement(sql) {
            Statement::CreateTable(create) => create,
            other => panic!("expected CREATE TABLE for {sql:?}, got {other:?}"),
        }
    }

    fn error(sql: &str) -> String {
        match parse_sql(sql) {
            Ok(statements) => panic!("expected an error for {sql:?}, got {statements:?}"),
            Err(e) => e.to_string(),
        }
    }

    fn select_of(statement: &Statement) -> &Select {
        let Statement::Query(query) = statement else {
            panic!("expected a query, got {statement:?}");
        };
        let SetExpr::Select(select) = query.body.as_ref() else {
            panic!("expected a SELECT, got {query:?}");
        };
        select
    }

    fn names(columns: &[ColumnDef]) -> Vec<&str> {
        columns.iter().map(|c| c.name.value.as_str()).collect()
    }

    fn partition_columns(create: &CreateTable) -> &[ColumnDef] {
        match &create.hive_distribution {
            HiveDistributionStyle::PARTITIONED { columns } => columns,
            other => panic!("expected PARTITIONED BY, got {other:?}"),
        }
    }

    fn bucket_columns(create: &CreateTable) -> Vec<&str> {
        let clustered = create.clustered_by.as_ref().expect("CLUSTERED BY");
        clustered.columns.iter().map(|c| c.value.as_str()).collect()
    }

    fn num_buckets(create: &CreateTable) -> String {
        match &create
            .clustered_by
            .as_ref()
            .expect("CLUSTERED BY")
            .num_buckets
        {
            Value::Number(n, _) => n.clone(),
            other => panic!("expected a number of buckets, got {other:?}"),
        }
    }

    /// (column, asc) pairs of `SORTED BY`.
    fn sort_columns(create: &CreateTable) -> Vec<(String, Option<bool>)> {
        let clustered = create.clustered_by.as_ref().expect("CLUSTERED BY");
        let sorted: &[OrderByExpr] = clustered.sorted_by.as_deref().unwrap_or_default();
        sorted
            .iter()
            .map(|o| (o.expr.to_string(), o.options.asc))
            .collect()
    }

    fn storage(create: &CreateTable) -> Option<&HiveIOFormat> {
        create.hive_formats.as_ref()?.storage.as_ref()
    }

    fn provider(create: &CreateTable) -> &str {
        match storage(create) {
            Some(HiveIOFormat::Using { format }) => &format.value,
            other => panic!("expected USING, got {other:?}"),
        }
    }

    fn location(create: &CreateTable) -> Option<&str> {
        create.hive_formats.as_ref()?.location.as_deref()
    }

    fn key_values(options: &[SqlOption]) -> Vec<(String, String)> {
        options
            .iter()
            .map(|option| match option {
                SqlOption::KeyValue { key, value } => (key.value.clone(), value.to_string()),
                other => panic!("expected key = value, got {other:?}"),
            })
            .collect()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn create_datasource_table_with_sorted_buckets() {
        let ct = create(
            "CREATE TABLE t (a INT, b STRING) USING parquet \
             CLUSTERED BY (a) SORTED BY (b DESC, a ASC, a) INTO 256 BUCKETS",
        );
        assert_eq!(ct.name.to_string(), "t");
        assert_eq!(names(&ct.columns), ["a", "b"]);
        assert_eq!(ct.columns[0].data_type, DataType::Int(None));
        assert_eq!(ct.columns[1].data_type, DataType::String(None));
        assert_eq!(provider(&ct), "parquet");
        assert_eq!(bucket_columns(&ct), ["a"]);
        assert_eq!(num_buckets(&ct), "256");
        assert_eq!(
            sort_columns(&ct),
            [
                ("b".to_string(), Some(false)),
                ("a".to_string(), Some(true)),
                ("a".to_string(), None)
            ]
        );
        assert_eq!(ct.hive_distribution, HiveDistributionStyle::NONE);
        assert_eq!(location(&ct), None);
        assert_eq!(ct.table_options, CreateTableOptions::None);
        assert!(ct.query.is_none());
        assert!(!ct.external && !ct.if_not_exists);
    }

    #[test]
    fn create_using_after_partitioned_and_clustered() {
        let ct = create(
            "CREATE TABLE e (id BIGINT, v DOUBLE, event_date DATE) \
             PARTITIONED BY (event_date) CLUSTERED BY (id) INTO 16 BUCKETS USING parquet",
        );
        assert_eq!(provider(&ct), "parquet");
        assert_eq!(names(partition_columns(&ct)), ["event_date"]);
        assert_eq!(partition_columns(&ct)[0].data_type, DataType::Unspecified);
        assert_eq!(bucket_columns(&ct), ["id"]);
        assert_eq!(num_buckets(&ct), "16");
        assert!(sort_columns(&ct).is_empty());
    }

    #[test]
    fn create_using_before_partitioned_and_clustered() {
        let ct = create(
            "CREATE TABLE e (id BIGINT, event_date DATE) USING parquet \
             PARTITIONED BY (event_date) CLUSTERED BY (id) INTO 16 BUCKETS",
        );
        assert_eq!(provider(&ct), "parquet");
        assert_eq!(names(partition_columns(&ct)), ["event_date"]);
        assert_eq!(bucket_columns(&ct), ["id"]);
    }

    #[test]
    fn create_clustered_before_partitioned() {
        let ct = create(
            "CREATE TABLE e (id BIGINT, a INT, d DATE, h INT) USING parquet \
             CLUSTERED BY (id, a) SORTED BY (a) INTO 8 BUCKETS PARTITIONED BY (d, h)",
        );
        assert_eq!(names(partition_columns(&ct)), ["d", "h"]);
        assert_eq!(bucket_columns(&ct), ["id", "a"]);
        assert_eq!(sort_columns(&ct), [("a".to_string(), None)]);
        assert_eq!(num_buckets(&ct), "8");
    }

    #[test]
    fn create_hive_table() {
        let ct = create(
            "CREATE TABLE h (a INT) PARTITIONED BY (d STRING) CLUSTERED BY (a) INTO 4 BUCKETS \
             STORED AS PARQUET",
        );
        assert_eq!(names(&ct.columns), ["a"]);
        assert_eq!(names(partition_columns(&ct)), ["d"]);
        assert_eq!(partition_columns(&ct)[0].data_type, DataType::String(None));
        assert_eq!(bucket_columns(&ct), ["a"]);
        assert_eq!(num_buckets(&ct), "4");
        assert_eq!(
            storage(&ct),
            Some(&HiveIOFormat::FileFormat {
                format: FileFormat::PARQUET
            })
        );
    }

    #[test]
    fn create_table_as_select() {
        let ct = create(
            "CREATE TABLE t USING parquet CLUSTERED BY (k) INTO 8 BUCKETS \
             AS SELECT * FROM range(10)",
        );
        assert!(ct.columns.is_empty());
        assert_eq!(provider(&ct), "parquet");
        assert_eq!(bucket_columns(&ct), ["k"]);
        assert_eq!(num_buckets(&ct), "8");
        let query = ct.query.expect("query");
        assert_eq!(query.to_string(), "SELECT * FROM range(10)");

        let ct = create("CREATE TABLE t USING parquet SELECT 1 AS k");
        assert_eq!(ct.query.expect("query").to_string(), "SELECT 1 AS k");

        let ct = create(
            "CREATE TABLE IF NOT EXISTS db.t CLUSTERED BY (k) INTO 2 BUCKETS \
             WITH s AS (SELECT 1 AS k) SELECT k FROM s",
        );
        assert!(ct.if_not_exists);
        assert_eq!(ct.name.to_string(), "db.t");
        assert!(ct.query.expect("query").with.is_some());

        let ct = create("CREATE TABLE t AS SELECT 1");
        assert!(ct.query.is_some() && ct.hive_formats.is_none() && ct.clustered_by.is_none());
    }

    #[test]
    fn create_with_every_clause() {
        let ct = create(
            "CREATE EXTERNAL TABLE IF NOT EXISTS s.t \
             (a INT NOT NULL COMMENT 'the key', b STRING) \
             USING org.apache.spark.sql.parquet \
             OPTIONS (path '/x', 'compression' = 'zstd', mergeSchema true) \
             COMMENT 'a table' \
             LOCATION '/data/t' \
             TBLPROPERTIES ('p1' = 'v1', spark.sql.x = 2, p3 '-1')",
        );
        assert!(ct.external);
        assert!(ct.if_not_exists);
        assert_eq!(ct.name.to_string(), "s.t");
        assert_eq!(names(&ct.columns), ["a", "b"]);
        let a_options: Vec<&ColumnOption> =
            ct.columns[0].options.iter().map(|o| &o.option).collect();
        assert_eq!(
            a_options,
            [
                &ColumnOption::NotNull,
                &ColumnOption::Comment("the key".to_string())
            ]
        );
        assert_eq!(provider(&ct), "org.apache.spark.sql.parquet");
        assert_eq!(location(&ct), Some("/data/t"));
        assert_eq!(
            ct.comment,
            Some(CommentDef::WithoutEq("a table".to_string()))
        );
        let options = ct
            .hive_formats
            .as_ref()
            .and_then(|h| h.serde_properties.as_deref());
        assert_eq!(
            key_values(options.expect("OPTIONS")),
            pairs(&[
                ("path", "'/x'"),
                ("compression", "'zstd'"),
                ("mergeSchema", "true")
            ])
        );
        let CreateTableOptions::TableProperties(properties) = &ct.table_options else {
            panic!("expected TBLPROPERTIES, got {:?}", ct.table_options);
        };
        assert_eq!(
            key_values(properties),
            pairs(&[("p1", "'v1'"), ("spark.sql.x", "2"), ("p3", "'-1'")])
        );
    }

    #[test]
    fn create_clauses_in_any_order() {
        let ct = create(
            "CREATE TABLE t (a INT, d DATE) TBLPROPERTIES ('k' = 'v') LOCATION '/l' \
             COMMENT 'c' CLUSTERED BY (a) INTO 3 BUCKETS OPTIONS (x 1) PARTITIONED BY (d) \
             USING parquet AS SELECT 1 AS a, DATE '2024-01-01' AS d",
        );
        assert_eq!(provider(&ct), "parquet");
        assert_eq!(location(&ct), Some("/l"));
        assert_eq!(names(partition_columns(&ct)), ["d"]);
        assert_eq!(bucket_columns(&ct), ["a"]);
        assert!(matches!(
            ct.table_options,
            CreateTableOptions::TableProperties(_)
        ));
        assert!(ct.query.is_some());
    }

    #[test]
    fn create_column_types() {
        let ct = create(
            "CREATE TABLE t (c_string STRING, c_text TEXT, c_varchar VARCHAR(10), c_char CHAR(3), \
             c_bigint BIGINT, c_long LONG, c_int INT, c_integer INTEGER, c_smallint SMALLINT, \
             c_short SHORT, c_tinyint TINYINT, c_byte BYTE, c_double DOUBLE, \
             c_double_precision DOUBLE PRECISION, c_float FLOAT, c_real REAL, \
             c_decimal DECIMAL(10, 2), c_numeric NUMERIC(5, 1), c_dec DEC, c_date DATE, \
             c_timestamp TIMESTAMP, c_timestamp_ntz TIMESTAMP_NTZ, c_timestamp_ltz TIMESTAMP_LTZ, \
             c_timestamptz TIMESTAMP WITH TIME ZONE, c_timestamp_wo TIMESTAMP WITHOUT TIME ZONE, \
             c_boolean BOOLEAN, c_bool BOOL, c_binary BINARY, c_bytea BYTEA) USING parquet",
        );
        let custom =
            |name: &str| DataType::Custom(ObjectName::from(vec![Ident::new(name)]), vec![]);
        let expected = [
            DataType::String(None),
            DataType::Text,
            DataType::Varchar(Some(
                datafusion::sql::sqlparser::ast::CharacterLength::IntegerLength {
                    length: 10,
                    unit: None,
                },
            )),
            DataType::Char(Some(
                datafusion::sql::sqlparser::ast::CharacterLength::IntegerLength {
                    length: 3,
                    unit: None,
                },
            )),
            DataType::BigInt(None),
            DataType::BigInt(None),
            DataType::Int(None),
            DataType::Integer(None),
            DataType::SmallInt(None),
            custom("SHORT"),
            DataType::TinyInt(None),
            custom("BYTE"),
            DataType::Double(ExactNumberInfo::None),
            DataType::DoublePrecision,
            DataType::Float(ExactNumberInfo::None),
            DataType::Real,
            DataType::Decimal(ExactNumberInfo::PrecisionAndScale(10, 2)),
            DataType::Numeric(ExactNumberInfo::PrecisionAndScale(5, 1)),
            DataType::Dec(ExactNumberInfo::None),
            DataType::Date,
            DataType::Timestamp(None, TimezoneInfo::None),
            DataType::TimestampNtz(None),
            custom("TIMESTAMP_LTZ"),
            DataType::Timestamp(None, TimezoneInfo::WithTimeZone),
            DataType::Timestamp(None, TimezoneInfo::WithoutTimeZone),
            DataType::Boolean,
            DataType::Bool,
            DataType::Binary(None),
            DataType::Bytea,
        ];
        assert_eq!(ct.columns.len(), expected.len());
        for (column, expected) in ct.columns.iter().zip(expected) {
            assert_eq!(column.data_type, expected, "column {}", column.name);
        }
    }

    #[test]
    fn create_duplicate_clauses_are_rejected() {
        for (clause, sql) in [
            ("USING", "USING parquet USING orc"),
            ("PARTITIONED BY", "PARTITIONED BY (a) PARTITIONED BY (a)"),
            (
                "CLUSTERED BY",
                "CLUSTERED BY (a) INTO 2 BUCKETS CLUSTERED BY (a) INTO 4 BUCKETS",
            ),
            ("STORED AS", "STORED AS PARQUET STORED AS ORC"),
            ("LOCATION", "LOCATION '/a' LOCATION '/b'"),
            ("COMMENT", "COMMENT 'a' COMMENT 'b'"),
            (
                "TBLPROPERTIES",
                "TBLPROPERTIES ('a' = 'b') TBLPROPERTIES ('a' = 'b')",
            ),
            ("OPTIONS", "OPTIONS (a 'b') OPTIONS (a 'b')"),
        ] {
            let message = error(&format!("CREATE TABLE t (a INT) {sql}"));
            assert!(
                message.contains(&format!("Found duplicate clauses: {clause} at Line: 1")),
                "{sql}: {message}"
            );
        }
    }

    #[test]
    fn create_errors() {
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED BY (a) INTO 4");
        assert!(
            message.contains("Expected: BUCKETS, found: EOF"),
            "{message}"
        );
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED BY (a) 4 BUCKETS");
        assert!(message.contains("Expected: INTO"), "{message}");
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED (a) INTO 4 BUCKETS");
        assert!(message.contains("Expected: BY, found: ("), "{message}");
        let message = error("CREATE TABLE t (a INT) PARTITIONED (a)");
        assert!(message.contains("Expected: BY, found: ("), "{message}");
        let message = error("CREATE TABLE t (a INT) USING parquet STORED AS PARQUET");
        assert!(
            message.contains("Operation not allowed: CREATE TABLE ... USING ... STORED AS PARQUET"),
            "{message}"
        );
        let message = error("CREATE TABLE t (a INT) USING parquet BOGUS");
        assert!(
            message.contains("Expected: USING, PARTITIONED BY, CLUSTERED BY")
                && message.contains("found: BOGUS"),
            "{message}"
        );
        let message = error(
            "CREATE TABLE t (a INT) USING parquet CLUSTERED BY (a) INTO 4 BUCKETS SORTED BY (a)",
        );
        assert!(message.contains("found: SORTED"), "{message}");
        let message = error("CREATE TABLE t (a INT) AS SELECT 1 USING parquet");
        assert!(message.contains("Expected: end of statement"), "{message}");
    }

    #[test]
    fn create_does_not_validate_semantics() {
        let ct = create(
            "CREATE TABLE t (a INT) USING parquet CLUSTERED BY (nope) SORTED BY (a DESC) \
             INTO 0 BUCKETS",
        );
        assert_eq!(bucket_columns(&ct), ["nope"]);
        assert_eq!(num_buckets(&ct), "0");
        assert_eq!(sort_columns(&ct), [("a".to_string(), Some(false))]);
    }

    #[test]
    fn other_create_statements_use_the_default_parser() {
        let ct = create("CREATE TABLE t2 LIKE t1");
        assert!(ct.like.is_some());
        let ct =
            create("CREATE TABLE t (a INT PRIMARY KEY, b TEXT DEFAULT 'x') WITH (fillfactor = 70)");
        assert!(matches!(ct.table_options, CreateTableOptions::With(_)));
        let ct = create("CREATE OR REPLACE TABLE t (a INT)");
        assert!(ct.or_replace);
        let ct = create("CREATE TEMPORARY TABLE t (a INT)");
        assert!(ct.temporary);
        assert!(matches!(
            sql_statement("CREATE VIEW v AS SELECT 1"),
            Statement::CreateView(_)
        ));
        assert!(matches!(
            sql_statement("CREATE SCHEMA IF NOT EXISTS s"),
            Statement::CreateSchema { .. }
        ));
    }

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
            (
                "EXPLAIN (ANALYZE true, VERBOSE) SELECT 1",
                ExplainMode::Analyze,
            ),
            ("EXPLAIN (ANALYZE false) SELECT 1", ExplainMode::Simple),
            ("EXPLAIN (VERBOSE) SELECT 1", ExplainMode::Extended),
        ] {
            let stmt = sql_statement(sql);
            assert_eq!(explain_mode(&stmt), Some(mode), "{sql}");
            let Statement::Explain { statement, .. } = &stmt else {
                panic!("expected EXPLAIN for {sql}");
            };
            assert_eq!(statement.to_string(), "SELECT 1", "{sql}");
        }
        assert_eq!(explain_mode(&sql_statement("SELECT 1")), None);
        assert_eq!(explain_mode(&sql_statement("DESCRIBE SELECT 1")), None);
    }

    #[test]
    fn explain_mode_encoding() {
        let stmt =
            sql_statement("EXPLAIN FORMATTED SELECT * FROM a JOIN b ON a.k = b.k WHERE a.x > 1");
        let Statement::Explain {
            describe_alias,
            analyze,
            verbose,
            options,
            statement,
            ..
        } = &stmt
        else {
            panic!("expected EXPLAIN, got {stmt:?}");
        };
        assert!(matches!(describe_alias, DescribeAlias::Explain));
        assert!(!analyze && !verbose);
        assert_eq!(
            options.as_deref(),
            Some(
                &[UtilityOption {
                    name: Ident::new("FORMATTED"),
                    arg: None
                }][..]
            )
        );
        assert!(matches!(statement.as_ref(), Statement::Query(_)));

        let stmt = sql_statement(
            "EXPLAIN EXTENDED CREATE TABLE t USING parquet CLUSTERED BY (k) INTO 2 BUCKETS AS SELECT 1 AS k",
        );
        assert_eq!(explain_mode(&stmt), Some(ExplainMode::Extended));
        let Statement::Explain { statement, .. } = &stmt else {
            panic!("expected EXPLAIN");
        };
        assert!(
            matches!(statement.as_ref(), Statement::CreateTable(ct) if ct.clustered_by.is_some())
        );

        let stmt = sql_statement("EXPLAIN COST INSERT INTO t SELECT 1");
        assert_eq!(explain_mode(&stmt), Some(ExplainMode::Cost));
    }

    #[test]
    fn explain_errors() {
        let message = error("EXPLAIN LOGICAL SELECT 1");
        assert!(
            message.contains("Operation not allowed: EXPLAIN LOGICAL"),
            "{message}"
        );
        let message = error("EXPLAIN EXTENDED EXPLAIN SELECT 1");
        assert!(
            message.contains("Explain must be root of the plan"),
            "{message}"
        );
        let message = error("EXPLAIN FORMATTED SELEC 1");
        assert!(message.contains("SELEC"), "{message}");
    }

    #[test]
    fn describe_forms() {
        for (sql, alias, format, table_keyword) in [
            ("DESCRIBE t", DescribeAlias::Describe, None, false),
            ("DESC t", DescribeAlias::Desc, None, false),
            ("DESCRIBE TABLE t", DescribeAlias::Describe, None, true),
            (
                "DESCRIBE EXTENDED t",
                DescribeAlias::Describe,
                Some(HiveDescribeFormat::Extended),
                false,
            ),
            (
                "DESCRIBE TABLE EXTENDED t",
                DescribeAlias::Describe,
                Some(HiveDescribeFormat::Extended),
                true,
            ),
            (
                "DESC TABLE FORMATTED t",
                DescribeAlias::Desc,
                Some(HiveDescribeFormat::Formatted),
                true,
            ),
            (
                "DESC FORMATTED t",
                DescribeAlias::Desc,
                Some(HiveDescribeFormat::Formatted),
                false,
            ),
        ] {
            assert_eq!(
                sql_statement(sql),
                Statement::ExplainTable {
                    describe_alias: alias,
                    hive_format: format,
                    has_table_keyword: table_keyword,
                    table_name: ObjectName::from(vec![Ident::new("t")]),
                },
                "{sql}"
            );
        }
        let Statement::ExplainTable { table_name, .. } =
            sql_statement("DESCRIBE TABLE EXTENDED s.t")
        else {
            panic!("expected DESCRIBE");
        };
        assert_eq!(table_name.to_string(), "s.t");
    }

    #[test]
    fn insert_forms() {
        for (sql, overwrite, table, columns, source) in [
            (
                "INSERT OVERWRITE TABLE t SELECT * FROM s",
                true,
                "t",
                vec![],
                "SELECT * FROM s",
            ),
            (
                "INSERT OVERWRITE t SELECT 1, 2",
                true,
                "t",
                vec![],
                "SELECT 1, 2",
            ),
            (
                "INSERT OVERWRITE TABLE t (a, b) SELECT 1, 2",
                true,
                "t",
                vec!["a", "b"],
                "SELECT 1, 2",
            ),
            (
                "INSERT INTO t VALUES (1, 'x'), (2, 'y')",
                false,
                "t",
                vec![],
                "VALUES (1, 'x'), (2, 'y')",
            ),
            (
                "INSERT INTO TABLE s.t (a) VALUES (1)",
                false,
                "s.t",
                vec!["a"],
                "VALUES (1)",
            ),
            (
                "INSERT INTO TABLE t SELECT a FROM u",
                false,
                "t",
                vec![],
                "SELECT a FROM u",
            ),
        ] {
            let Statement::Insert(insert) = sql_statement(sql) else {
                panic!("expected INSERT for {sql}");
            };
            assert_eq!(insert.overwrite, overwrite, "{sql}");
            assert_eq!(insert.table.to_string(), table, "{sql}");
            let insert_columns: Vec<String> =
                insert.columns.iter().map(|c| c.to_string()).collect();
            assert_eq!(insert_columns, columns, "{sql}");
            assert_eq!(insert.source.expect("source").to_string(), source, "{sql}");
        }
    }

    #[test]
    fn show_forms() {
        let Statement::ShowTables { show_options, .. } = sql_statement("SHOW TABLES") else {
            panic!("expected SHOW TABLES");
        };
        assert!(show_options.show_in.is_none());
        for (sql, clause) in [
            ("SHOW TABLES IN s", ShowStatementInClause::IN),
            ("SHOW TABLES FROM s", ShowStatementInClause::FROM),
        ] {
            let Statement::ShowTables { show_options, .. } = sql_statement(sql) else {
                panic!("expected SHOW TABLES for {sql}");
            };
            let show_in = show_options.show_in.expect("IN");
            assert_eq!(show_in.clause, clause);
            assert_eq!(show_in.parent_name.expect("schema").to_string(), "s");
        }
        let Statement::ShowCreate { obj_type, obj_name } = sql_statement("SHOW CREATE TABLE s.t")
        else {
            panic!("expected SHOW CREATE TABLE");
        };
        assert_eq!(
            obj_type,
            datafusion::sql::sqlparser::ast::ShowCreateObject::Table
        );
        assert_eq!(obj_name.to_string(), "s.t");

        assert_eq!(
            parse_one("SHOW PARTITIONS s.t"),
            BucketSqlStatement::ShowPartitions {
                table: ObjectName::from(vec![Ident::new("s"), Ident::new("t")]),
                partition_spec: vec![],
            }
        );
        let partitions = parse_one("show partitions t PARTITION (d = '2024-01-01', h = 3)");
        let BucketSqlStatement::ShowPartitions {
            table,
            partition_spec,
        } = &partitions
        else {
            panic!("expected SHOW PARTITIONS, got {partitions:?}");
        };
        assert_eq!(table.to_string(), "t");
        let spec: Vec<(String, String)> = partition_spec
            .iter()
            .map(|(c, v)| (c.value.clone(), v.to_string()))
            .collect();
        assert_eq!(spec, pairs(&[("d", "'2024-01-01'"), ("h", "3")]));
        assert!(error("SHOW PARTITIONS").contains("Expected: identifier"));
    }

    #[test]
    fn analyze_forms() {
        for (sql, noscan, for_columns, columns) in [
            ("ANALYZE TABLE t COMPUTE STATISTICS", false, false, vec![]),
            (
                "ANALYZE TABLE t COMPUTE STATISTICS NOSCAN",
                true,
                false,
                vec![],
            ),
            (
                "ANALYZE TABLE t COMPUTE STATISTICS FOR COLUMNS a, b",
                false,
                true,
                vec!["a", "b"],
            ),
        ] {
            let Statement::Analyze(analyze) = sql_statement(sql) else {
                panic!("expected ANALYZE for {sql}");
            };
            assert_eq!(analyze.table_name.expect("table").to_string(), "t", "{sql}");
            assert!(analyze.compute_statistics, "{sql}");
            assert_eq!(analyze.noscan, noscan, "{sql}");
            assert_eq!(analyze.for_columns, for_columns, "{sql}");
            let analyzed: Vec<&str> = analyze.columns.iter().map(|c| c.value.as_str()).collect();
            assert_eq!(analyzed, columns, "{sql}");
        }
    }

    fn set(name: &str, value: Option<&str>) -> BucketSqlStatement {
        BucketSqlStatement::SetVariable {
            name: name.to_string(),
            value: value.map(str::to_string),
        }
    }

    fn show(name: Option<&str>) -> BucketSqlStatement {
        BucketSqlStatement::ShowVariable {
            name: name.map(str::to_string),
        }
    }

    fn reset(name: Option<&str>) -> BucketSqlStatement {
        BucketSqlStatement::Reset {
            name: name.map(str::to_string),
        }
    }

    #[test]
    fn set_show_and_reset_forms() {
        for (sql, expected) in [
            (
                "SET spark.sql.shuffle.partitions=8",
                set("spark.sql.shuffle.partitions", Some("8")),
            ),
            (
                "SET spark.sql.autoBroadcastJoinThreshold = -1",
                set("spark.sql.autoBroadcastJoinThreshold", Some("-1")),
            ),
            (
                "SET spark.sql.autoBroadcastJoinThreshold=-1;",
                set("spark.sql.autoBroadcastJoinThreshold", Some("-1")),
            ),
            (
                "set spark.sql.files.maxPartitionBytes = 128MB",
                set("spark.sql.files.maxPartitionBytes", Some("128MB")),
            ),
            (
                "SET spark.sql.sources.bucketing.enabled = false",
                set("spark.sql.sources.bucketing.enabled", Some("false")),
            ),
            ("SET k = 'it''s'", set("k", Some("it's"))),
            ("SET \"Mixed\".`key` = x", set("Mixed.key", Some("x"))),
            (
                "SET extra_float_digits TO 3",
                set("extra_float_digits", Some("3")),
            ),
            (
                "SET search_path = public, pg_catalog",
                set("search_path", Some("public, pg_catalog")),
            ),
            ("SET a = 1, b = 2", set("a", Some("1, b = 2"))),
            ("SET TIME ZONE 'UTC'", set("timezone", Some("UTC"))),
            ("SET TIME ZONE LOCAL", set("timezone", Some("LOCAL"))),
            (
                "SET TIMEZONE TO 'Europe/Paris'",
                set("TIMEZONE", Some("Europe/Paris")),
            ),
            (
                "SET spark.sql.shuffle.partitions",
                set("spark.sql.shuffle.partitions", None),
            ),
            ("SET", show(None)),
            ("SHOW ALL", show(None)),
            ("SHOW search_path", show(Some("search_path"))),
            ("SHOW \"TimeZone\"", show(Some("TimeZone"))),
            (
                "show transaction isolation level",
                show(Some("transaction_isolation")),
            ),
            (
                "RESET spark.sql.shuffle.partitions",
                reset(Some("spark.sql.shuffle.partitions")),
            ),
            ("RESET", reset(None)),
            ("RESET ALL", reset(None)),
        ] {
            assert_eq!(parse_one(sql), expected, "{sql}");
        }
        assert!(matches!(
            sql_statement(
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED"
            ),
            Statement::Set(Set::SetTransaction { .. })
        ));
        assert!(matches!(
            sql_statement("SHOW TBLPROPERTIES t"),
            Statement::ShowVariable { .. }
        ));
        assert!(error("SET k =").contains("Expected"));
        assert!(error("SET k v").contains("Expected"));
    }

    #[test]
    fn dialect_parses_bare_reset() {
        assert_eq!(
            Parser::parse_sql(&BucketSqlDialect, "RESET").unwrap(),
            [Statement::Reset(ResetStatement { reset: Reset::ALL })]
        );
    }

    #[test]
    fn display() {
        for (sql, text) in [
            ("SET k = 'v'", "SET k = v"),
            ("SET k", "SET k"),
            ("SET", "SHOW ALL"),
            ("SHOW x", "SHOW x"),
            ("RESET", "RESET"),
            ("RESET k", "RESET k"),
            ("SHOW PARTITIONS t", "SHOW PARTITIONS t"),
            (
                "SHOW PARTITIONS t PARTITION (d = '2024-01-01', h = 3)",
                "SHOW PARTITIONS t PARTITION (d = '2024-01-01', h = 3)",
            ),
            ("select 1", "SELECT 1"),
        ] {
            assert_eq!(parse_one(sql).to_string(), text, "{sql}");
        }
    }

    #[test]
    fn several_statements() {
        let statements = parse_sql("SET; SET k; RESET;; SELECT 1; SHOW PARTITIONS t;").unwrap();
        assert_eq!(statements.len(), 5);
        assert_eq!(statements[0], show(None));
        assert_eq!(statements[1], set("k", None));
        assert_eq!(statements[2], reset(None));
        assert!(matches!(
            statements[3],
            BucketSqlStatement::Sql(Statement::Query(_))
        ));
        assert!(matches!(
            statements[4],
            BucketSqlStatement::ShowPartitions { .. }
        ));
        let statements = parse_sql(
            "CREATE TABLE t (k INT) USING parquet CLUSTERED BY (k) INTO 2 BUCKETS; SELECT 1;",
        )
        .unwrap();
        assert_eq!(statements.len(), 2);
        assert!(matches!(
            &statements[0],
            BucketSqlStatement::Sql(Statement::CreateTable(ct)) if ct.clustered_by.is_some()
        ));
        assert!(parse_sql("").unwrap().is_empty());
        assert!(error("SELECT 1 SELECT 2").contains("Expected: end of statement"));
    }

    #[test]
    fn optimize_and_transactions() {
        let Statement::OptimizeTable { name, .. } = sql_statement("OPTIMIZE s.t") else {
            panic!("expected OPTIMIZE");
        };
        assert_eq!(name.to_string(), "s.t");
        assert!(matches!(
            sql_statement("BEGIN"),
            Statement::StartTransaction { begin: true, .. }
        ));
        assert!(matches!(
            sql_statement("START TRANSACTION"),
            Statement::StartTransaction { begin: false, .. }
        ));
        assert!(matches!(sql_statement("COMMIT"), Statement::Commit { .. }));
        assert!(matches!(
            sql_statement("ROLLBACK"),
            Statement::Rollback { .. }
        ));
    }

    #[test]
    fn hints_are_kept_and_extracted() {
        let stmt = sql_statement(
            "SELECT /*+ BROADCAST(a), merge(b, `c`) shuffle_hash(\"d\") COALESCE(3) */ * \
             FROM a JOIN b ON a.k = b.k",
        );
        assert_eq!(select_of(&stmt).optimizer_hints.len(), 1);
        assert_eq!(
            extract_hints(select_of(&stmt)),
            [
                Hint {
                    name: "BROADCAST".to_string(),
                    args: vec!["a".to_string()]
                },
                Hint {
                    name: "MERGE".to_string(),
                    args: vec!["b".to_string(), "c".to_string()]
                },
                Hint {
                    name: "SHUFFLE_HASH".to_string(),
                    args: vec!["d".to_string()]
                },
                Hint {
                    name: "COALESCE".to_string(),
                    args: vec!["3".to_string()]
                },
            ]
        );
        assert!(stmt.to_string().starts_with("SELECT /*+ BROADCAST(a)"));

        let stmt =
            sql_statement("SELECT /*+ REPARTITION(4, t.c, f(x, y)), NOARGS, EMPTY() */ * FROM t");
        assert_eq!(
            extract_hints(select_of(&stmt)),
            [
                Hint {
                    name: "REPARTITION".to_string(),
                    args: vec!["4".to_string(), "t.c".to_string(), "f(x, y)".to_string()]
                },
                Hint {
                    name: "NOARGS".to_string(),
                    args: vec![]
                },
                Hint {
                    name: "EMPTY".to_string(),
                    args: vec![]
                },
            ]
        );

        let stmt = sql_statement("SELECT /*+ BROADCAST(a) */ /*+ MERGE(b) */ * FROM a, b");
        let names: Vec<String> = extract_hints(select_of(&stmt))
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert_eq!(names, ["BROADCAST", "MERGE"]);

        let stmt = sql_statement("SELECT /*+ BROADCAST(a) ?? MERGE(b) */ * FROM a");
        assert_eq!(extract_hints(select_of(&stmt)).len(), 1);
        let stmt = sql_statement("SELECT /*+ BROADCAST(a */ * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());
        let stmt = sql_statement("SELECT /* BROADCAST(a) */ * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());
        let stmt = sql_statement("SELECT --+ BROADCAST(a)\n * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());
        let stmt = sql_statement("SELECT * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());

        let Statement::Insert(insert) =
            sql_statement("INSERT INTO t SELECT /*+ BROADCAST(s) */ * FROM s JOIN u USING (k)")
        else {
            panic!("expected INSERT");
        };
        let SetExpr::Select(inner) = insert.source.as_ref().expect("source").body.as_ref() else {
            panic!("expected SELECT");
        };
        assert_eq!(extract_hints(inner)[0].args, ["s"]);
    }

    #[test]
    fn literals_and_identifiers() {
        let stmt = sql_statement(
            "SELECT $1, x::text, E'a\\nb', \"Mixed Case\", `spark col` FROM \"S\".`t`",
        );
        let select = select_of(&stmt);
        let items: Vec<&Expr> = select
            .projection
            .iter()
            .map(|item| match item {
                datafusion::sql::sqlparser::ast::SelectItem::UnnamedExpr(expr) => expr,
                other => panic!("unexpected select item {other:?}"),
            })
            .collect();
        assert!(
            matches!(items[0], Expr::Value(v) if v.value == Value::Placeholder("$1".to_string()))
        );
        assert!(matches!(
            items[1],
            Expr::Cast {
                data_type: DataType::Text,
                ..
            }
        ));
        assert!(matches!(
            items[2],
            Expr::Value(v) if v.value == Value::EscapedStringLiteral("a\nb".to_string())
        ));
        assert_eq!(
            items[3],
            &Expr::Identifier(Ident::with_quote('"', "Mixed Case"))
        );
        assert_eq!(
            items[4],
            &Expr::Identifier(Ident::with_quote('`', "spark col"))
        );
        assert_eq!(select.from[0].relation.to_string(), "\"S\".`t`");
    }

    /// Ordinary PostgreSQL and Spark queries parse, and exactly as with `GenericDialect`.
    #[test]
    fn postgres_queries_parse_as_with_generic_dialect() {
        for sql in [
            "SELECT a.id, b.name FROM a INNER JOIN b ON a.id = b.id LEFT JOIN c USING (id) \
             WHERE a.x > 1 AND b.y IS NOT NULL ORDER BY 1 DESC NULLS LAST LIMIT 10 OFFSET 5",
            "WITH t AS (SELECT 1 AS k), u AS (SELECT k FROM t) SELECT * FROM u",
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 5) \
             SELECT sum(n) FROM r",
            "SELECT k, row_number() OVER (PARTITION BY k ORDER BY v DESC) AS rn, \
             sum(v) OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
            "SELECT * FROM t WHERE id = $1 AND name = $2",
            "SELECT x::text, CAST(y AS BIGINT), z::timestamp FROM t",
            "SELECT * FROM generate_series(1, 10) AS g(i)",
            "SELECT E'a\\nb', 'it''s', \"Quoted Col\" FROM \"Some Table\"",
            "SELECT `a b` FROM `db`.`t`",
            "SELECT count(*) FILTER (WHERE x > 0), string_agg(s, ',') FROM t GROUP BY ALL",
            "SELECT CASE WHEN a THEN 1 ELSE 2 END, coalesce(b, 0), a BETWEEN 1 AND 2 FROM t",
            "SELECT * FROM t WHERE k IN (SELECT k FROM u) AND EXISTS (SELECT 1 FROM v)",
            "SELECT date_trunc('day', ts), interval '1 day', now() - ts FROM t",
            "SELECT a FROM t UNION SELECT b FROM u EXCEPT SELECT c FROM v",
            "SELECT array_agg(x ORDER BY y) FROM t HAVING count(*) > 1",
            "SELECT /*+ BROADCAST(c) */ * FROM o JOIN c USING (customer_id)",
            "SELECT t.* FROM t WHERE s LIKE 'a%' OR s ILIKE 'b%' OR s ~ 'c'",
            "SELECT current_setting('server_version'), version()",
            "SELECT n.nspname FROM pg_catalog.pg_namespace n WHERE n.oid = 't'::regclass",
            "INSERT INTO t (a, b) VALUES ($1, $2)",
            "UPDATE t SET a = 1 WHERE b = 2",
            "DELETE FROM t WHERE a = 1",
            "DROP TABLE IF EXISTS s.t",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "BEGIN; SELECT 1; COMMIT",
            "EXPLAIN SELECT 1",
            "EXPLAIN ANALYZE VERBOSE SELECT * FROM t",
            "DESCRIBE t",
            "CREATE TABLE p (a INT PRIMARY KEY, b VARCHAR(10) NOT NULL DEFAULT 'x')",
            "CREATE TABLE h (a INT) PARTITIONED BY (d STRING) CLUSTERED BY (a) INTO 4 BUCKETS \
             STORED AS PARQUET",
        ] {
            let ours: Vec<Statement> = parse_sql(sql)
                .unwrap_or_else(|e| panic!("failed to parse {sql:?}: {e}"))
                .into_iter()
                .map(|s| match s {
                    BucketSqlStatement::Sql(s) => s,
                    other => panic!("unexpected {other:?} for {sql}"),
                })
                .collect();
            let generic = Parser::parse_sql(&GenericDialect, sql).unwrap();
            assert_eq!(ours, generic, "{sql}");
        }
    }

    #[test]
    fn garbage_is_rejected() {
        for sql in [
            "FOO BAR",
            "SELECT FROM WHERE (",
            "CREATE TABLE",
            "CREATE TABLE t (",
            "EXPLAIN",
        ] {
            error(sql);
        }
        assert!(error("CREATE TABLE t (a INT) USING").contains("Expected: identifier"));
    }
}

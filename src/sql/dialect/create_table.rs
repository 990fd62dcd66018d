//! Spark's `CREATE [EXTERNAL] TABLE`: the clauses that define a bucketed table (`USING`,
//! `PARTITIONED BY`, `CLUSTERED BY .. INTO n BUCKETS`, `STORED AS`, `LOCATION`, `COMMENT`,
//! `TBLPROPERTIES`, `OPTIONS`, `AS query`) in any order, falling back to the default parser for
//! statements outside that grammar. The AST it builds is described on [`BucketSqlDialect`].
//!
//! [`BucketSqlDialect`]: super::BucketSqlDialect

use datafusion::sql::sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder;
use datafusion::sql::sqlparser::ast::{
    ClusteredBy, ColumnDef, CommentDef, CreateTable, CreateTableLike, CreateTableLikeKind, CreateTableOptions,
    FileFormat, HiveDistributionStyle, HiveFormat, HiveIOFormat, Ident, Query, SqlOption, Statement,
};
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan};

use super::tokens::{dotted_name, is_statement_end, next_is_keyword};

/// `CREATE TABLE` or `CREATE EXTERNAL TABLE` (not `OR REPLACE`, `TEMPORARY`, views, ...).
pub(super) fn is_create_table(parser: &Parser) -> bool {
    let table_at = if next_is_keyword(parser, 1, Keyword::EXTERNAL) { 2 } else { 1 };
    next_is_keyword(parser, table_at, Keyword::TABLE)
}

pub(super) fn parse_create_table(parser: &mut Parser) -> Result<Statement, ParserError> {
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
        Some(_) => Err(ParserError::ParserError(format!("Found duplicate clauses: {clause}{}", at.span.start))),
        None => Ok(()),
    }
}

/// Parses `[EXTERNAL] TABLE ...` after `CREATE`. Sets `unknown_clause` when the statement has a
/// clause outside Spark's grammar, so that the caller can retry with the default parser.
fn parse_spark_create_table(parser: &mut Parser, unknown_clause: &mut bool) -> Result<CreateTable, ParserError> {
    let external = parser.parse_keyword(Keyword::EXTERNAL);
    parser.expect_keyword(Keyword::TABLE)?;
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_object_name(false)?;
    // Spark's `CREATE TABLE t LIKE source`, which takes the provider, storage, location and
    // properties clauses only.
    let like = match parser.parse_keyword(Keyword::LIKE) {
        true => {
            Some(CreateTableLikeKind::Plain(CreateTableLike { name: parser.parse_object_name(false)?, defaults: None }))
        }
        false => None,
    };
    let (columns, constraints) = if like.is_some() { Default::default() } else { parser.parse_columns()? };

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
        if like.is_some()
            && !matches!(keyword, Keyword::USING | Keyword::STORED | Keyword::LOCATION | Keyword::TBLPROPERTIES)
        {
            return parser.expected("USING, STORED AS, LOCATION, TBLPROPERTIES or end of statement", token);
        }
        match keyword {
            Keyword::USING => {
                check_unique(&c.provider, "USING", &token)?;
                parser.next_token();
                c.provider = Some(parse_dotted_name(parser)?);
            }
            Keyword::PARTITIONED => {
                check_unique(&c.partitioned_by, "PARTITIONED BY", &token)?;
                match parser.parse_hive_distribution()? {
                    HiveDistributionStyle::PARTITIONED { columns } => c.partitioned_by = Some(columns),
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

    if c.query.is_some() && !columns.is_empty() {
        return Err(ParserError::ParserError(
            "Operation not allowed: Schema may not be specified in a Create Table As Select (CTAS) statement."
                .to_string(),
        ));
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
    let hive_formats = (storage.is_some() || c.location.is_some() || c.options.is_some()).then_some(HiveFormat {
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
        .like(like)
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
pub(super) fn parse_property_list(parser: &mut Parser) -> Result<Vec<SqlOption>, ParserError> {
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

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::ast::{
        ColumnOption, DataType, ExactNumberInfo, ObjectName, OrderByExpr, TimezoneInfo, Value,
    };

    use super::*;
    use crate::sql::dialect::parse_one;
    use crate::sql::dialect::tests::{error, pairs};

    fn create(sql: &str) -> CreateTable {
        match parse_one(sql) {
            Statement::CreateTable(create) => create,
            other => panic!("expected CREATE TABLE for {sql:?}, got {other:?}"),
        }
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
        match &create.clustered_by.as_ref().expect("CLUSTERED BY").num_buckets {
            Value::Number(n, _) => n.clone(),
            other => panic!("expected a number of buckets, got {other:?}"),
        }
    }

    /// (column, asc) pairs of `SORTED BY`.
    fn sort_columns(create: &CreateTable) -> Vec<(String, Option<bool>)> {
        let clustered = create.clustered_by.as_ref().expect("CLUSTERED BY");
        let sorted: &[OrderByExpr] = clustered.sorted_by.as_deref().unwrap_or_default();
        sorted.iter().map(|o| (o.expr.to_string(), o.options.asc)).collect()
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
            [("b".to_string(), Some(false)), ("a".to_string(), Some(true)), ("a".to_string(), None)]
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
        assert_eq!(storage(&ct), Some(&HiveIOFormat::FileFormat { format: FileFormat::PARQUET }));
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
        let a_options: Vec<&ColumnOption> = ct.columns[0].options.iter().map(|o| &o.option).collect();
        assert_eq!(a_options, [&ColumnOption::NotNull, &ColumnOption::Comment("the key".to_string())]);
        assert_eq!(provider(&ct), "org.apache.spark.sql.parquet");
        assert_eq!(location(&ct), Some("/data/t"));
        assert_eq!(ct.comment, Some(CommentDef::WithoutEq("a table".to_string())));
        let options = ct.hive_formats.as_ref().and_then(|h| h.serde_properties.as_deref());
        assert_eq!(
            key_values(options.expect("OPTIONS")),
            pairs(&[("path", "'/x'"), ("compression", "'zstd'"), ("mergeSchema", "true")])
        );
        let CreateTableOptions::TableProperties(properties) = &ct.table_options else {
            panic!("expected TBLPROPERTIES, got {:?}", ct.table_options);
        };
        assert_eq!(key_values(properties), pairs(&[("p1", "'v1'"), ("spark.sql.x", "2"), ("p3", "'-1'")]));
    }

    #[test]
    fn create_clauses_in_any_order() {
        let ct = create(
            "CREATE TABLE t TBLPROPERTIES ('k' = 'v') LOCATION '/l' \
             COMMENT 'c' CLUSTERED BY (a) INTO 3 BUCKETS OPTIONS (x 1) PARTITIONED BY (d) \
             USING parquet AS SELECT 1 AS a, DATE '2024-01-01' AS d",
        );
        assert_eq!(provider(&ct), "parquet");
        assert_eq!(location(&ct), Some("/l"));
        assert_eq!(names(partition_columns(&ct)), ["d"]);
        assert_eq!(bucket_columns(&ct), ["a"]);
        assert!(matches!(ct.table_options, CreateTableOptions::TableProperties(_)));
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
        let custom = |name: &str| DataType::Custom(ObjectName::from(vec![Ident::new(name)]), vec![]);
        let expected = [
            DataType::String(None),
            DataType::Text,
            DataType::Varchar(Some(datafusion::sql::sqlparser::ast::CharacterLength::IntegerLength {
                length: 10,
                unit: None,
            })),
            DataType::Char(Some(datafusion::sql::sqlparser::ast::CharacterLength::IntegerLength {
                length: 3,
                unit: None,
            })),
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
            ("CLUSTERED BY", "CLUSTERED BY (a) INTO 2 BUCKETS CLUSTERED BY (a) INTO 4 BUCKETS"),
            ("STORED AS", "STORED AS PARQUET STORED AS ORC"),
            ("LOCATION", "LOCATION '/a' LOCATION '/b'"),
            ("COMMENT", "COMMENT 'a' COMMENT 'b'"),
            ("TBLPROPERTIES", "TBLPROPERTIES ('a' = 'b') TBLPROPERTIES ('a' = 'b')"),
            ("OPTIONS", "OPTIONS (a 'b') OPTIONS (a 'b')"),
        ] {
            let message = error(&format!("CREATE TABLE t (a INT) {sql}"));
            assert!(message.contains(&format!("Found duplicate clauses: {clause} at Line: 1")), "{sql}: {message}");
        }
    }

    #[test]
    fn create_errors() {
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED BY (a) INTO 4");
        assert!(message.contains("Expected: BUCKETS, found: EOF"), "{message}");
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED BY (a) 4 BUCKETS");
        assert!(message.contains("Expected: INTO"), "{message}");
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED (a) INTO 4 BUCKETS");
        assert!(message.contains("Expected: BY, found: ("), "{message}");
        let message = error("CREATE TABLE t (a INT) PARTITIONED (a)");
        assert!(message.contains("Expected: BY, found: ("), "{message}");
        let message = error("CREATE TABLE t (a INT) USING parquet STORED AS PARQUET");
        assert!(message.contains("Operation not allowed: CREATE TABLE ... USING ... STORED AS PARQUET"), "{message}");
        let message = error("CREATE TABLE t (a INT) USING parquet BOGUS");
        assert!(
            message.contains("Expected: USING, PARTITIONED BY, CLUSTERED BY") && message.contains("found: BOGUS"),
            "{message}"
        );
        let message = error("CREATE TABLE t (a INT) USING parquet CLUSTERED BY (a) INTO 4 BUCKETS SORTED BY (a)");
        assert!(message.contains("found: SORTED"), "{message}");
        let message = error("CREATE TABLE t (a BIGINT) USING parquet AS SELECT 1 AS a");
        assert!(
            message.contains("Schema may not be specified in a Create Table As Select (CTAS) statement"),
            "{message}"
        );
        let message = error("CREATE TABLE t AS SELECT 1 USING parquet");
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
    fn create_table_like_takes_storage_clauses_only() {
        let ct =
            create("CREATE TABLE IF NOT EXISTS t2 LIKE s.t1 USING parquet LOCATION '/x' TBLPROPERTIES ('a' = 'b')");
        let Some(CreateTableLikeKind::Plain(like)) = &ct.like else { panic!("expected LIKE, got {:?}", ct.like) };
        assert_eq!(like.name.to_string(), "s.t1");
        assert!(ct.if_not_exists && ct.columns.is_empty());
        assert_eq!(ct.hive_formats.and_then(|f| f.location).as_deref(), Some("/x"));
        assert!(error("CREATE TABLE t2 LIKE t1 PARTITIONED BY (a)").contains("Expected: USING, STORED AS, LOCATION"));
        assert!(error("CREATE TABLE t2 LIKE t1 AS SELECT 1").contains("Expected: USING, STORED AS, LOCATION"));
    }

    #[test]
    fn other_create_statements_use_the_default_parser() {
        let ct = create("CREATE TABLE t2 LIKE t1");
        assert!(ct.like.is_some());
        let ct = create("CREATE TABLE t (a INT PRIMARY KEY, b TEXT DEFAULT 'x') WITH (fillfactor = 70)");
        assert!(matches!(ct.table_options, CreateTableOptions::With(_)));
        let ct = create("CREATE OR REPLACE TABLE t (a INT)");
        assert!(ct.or_replace);
        let ct = create("CREATE TEMPORARY TABLE t (a INT)");
        assert!(ct.temporary);
        assert!(matches!(parse_one("CREATE VIEW v AS SELECT 1"), Statement::CreateView(_)));
        assert!(matches!(parse_one("CREATE SCHEMA IF NOT EXISTS s"), Statement::CreateSchema { .. }));
    }
}

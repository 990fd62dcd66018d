//! What the dialect parses a statement into: a plain sqlparser [`Statement`], or one of
//! Spark's statements sqlparser has no AST for, printed back as Spark writes them.

use std::fmt;

use datafusion::sql::sqlparser::ast::{ColumnDef, Expr, Ident, ObjectName, SqlOption, Statement};

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
    /// `REFRESH TABLE table`: the table's file list becomes what its directory holds.
    RefreshTable { table: ObjectName },
    /// `SHOW BUCKETS table [PARTITION (col = value, ...)]`: one row per bucket.
    ShowBuckets { table: ObjectName, partition_spec: Vec<(Ident, Expr)> },
    /// `ANALYZE TABLE table [PARTITION (..)] COMPUTE STATISTICS [NOSCAN | FOR [ALL] COLUMNS ..]`.
    AnalyzeTable { table: ObjectName, partition_spec: Vec<(Ident, Expr)>, columns: AnalyzedColumns },
    /// `ALTER TABLE table SET TBLPROPERTIES (key = value, ...)`.
    SetTableProperties { table: ObjectName, properties: Vec<SqlOption> },
    /// `ALTER TABLE table UNSET TBLPROPERTIES [IF EXISTS] (key, ...)`.
    UnsetTableProperties { table: ObjectName, keys: Vec<String>, if_exists: bool },
    /// `DESCRIBE [TABLE] [EXTENDED|FORMATTED] table column`.
    DescribeColumn { table: ObjectName, column: Ident, extended: bool },
    /// `ALTER TABLE table ADD COLUMNS (column type [COMMENT '..'], ...)` (or `ADD COLUMN`).
    AddColumns { table: ObjectName, columns: Vec<ColumnDef> },
    /// `ALTER TABLE table SET LOCATION 'path'`.
    SetLocation { table: ObjectName, location: String },
}

impl fmt::Display for BucketSqlStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BucketSqlStatement::Sql(statement) => write!(f, "{statement}"),
            BucketSqlStatement::SetVariable { name, value: None } => write!(f, "SET {name}"),
            BucketSqlStatement::SetVariable { name, value: Some(value) } => write!(f, "SET {name} = {value}"),
            BucketSqlStatement::ShowVariable { name: None } => write!(f, "SHOW ALL"),
            BucketSqlStatement::ShowVariable { name: Some(name) } => write!(f, "SHOW {name}"),
            BucketSqlStatement::Reset { name: None } => write!(f, "RESET"),
            BucketSqlStatement::Reset { name: Some(name) } => write!(f, "RESET {name}"),
            BucketSqlStatement::ShowPartitions { table, partition_spec } => {
                write!(f, "SHOW PARTITIONS {table}{}", PartitionSpec(partition_spec))
            }
            BucketSqlStatement::RefreshTable { table } => write!(f, "REFRESH TABLE {table}"),
            BucketSqlStatement::ShowBuckets { table, partition_spec } => {
                write!(f, "SHOW BUCKETS {table}{}", PartitionSpec(partition_spec))
            }
            BucketSqlStatement::AnalyzeTable { table, partition_spec, columns } => {
                write!(f, "ANALYZE TABLE {table}{} COMPUTE STATISTICS", PartitionSpec(partition_spec))?;
                match columns {
                    AnalyzedColumns::Table => Ok(()),
                    AnalyzedColumns::NoScan => write!(f, " NOSCAN"),
                    AnalyzedColumns::All => write!(f, " FOR ALL COLUMNS"),
                    AnalyzedColumns::Listed(columns) => {
                        let names: Vec<String> = columns.iter().map(Ident::to_string).collect();
                        write!(f, " FOR COLUMNS {}", names.join(", "))
                    }
                }
            }
            BucketSqlStatement::SetTableProperties { table, properties } => {
                let properties: Vec<String> = properties.iter().map(SqlOption::to_string).collect();
                write!(f, "ALTER TABLE {table} SET TBLPROPERTIES ({})", properties.join(", "))
            }
            BucketSqlStatement::UnsetTableProperties { table, keys, if_exists } => {
                let keys: Vec<String> = keys.iter().map(|k| format!("'{}'", k.replace('\'', "''"))).collect();
                let if_exists = if *if_exists { "IF EXISTS " } else { "" };
                write!(f, "ALTER TABLE {table} UNSET TBLPROPERTIES {if_exists}({})", keys.join(", "))
            }
            BucketSqlStatement::DescribeColumn { table, column, extended } => {
                write!(f, "DESCRIBE {}{table} {column}", if *extended { "EXTENDED " } else { "" })
            }
            BucketSqlStatement::AddColumns { table, columns } => {
                let columns: Vec<String> = columns.iter().map(ColumnDef::to_string).collect();
                write!(f, "ALTER TABLE {table} ADD COLUMNS ({})", columns.join(", "))
            }
            BucketSqlStatement::SetLocation { table, location } => {
                write!(f, "ALTER TABLE {table} SET LOCATION '{}'", location.replace('\'', "''"))
            }
        }
    }
}

/// ` PARTITION (col = value, ...)`, or nothing for an empty spec.
struct PartitionSpec<'a>(&'a [(Ident, Expr)]);

impl fmt::Display for PartitionSpec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        let spec: Vec<String> = self.0.iter().map(|(column, value)| format!("{column} = {value}")).collect();
        write!(f, " PARTITION ({})", spec.join(", "))
    }
}

/// What `ANALYZE TABLE .. COMPUTE STATISTICS` computes besides the table's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnalyzedColumns {
    /// The size and the row count.
    Table,
    /// `NOSCAN`: the size only.
    NoScan,
    /// `FOR COLUMNS c1, c2`.
    Listed(Vec<Ident>),
    /// `FOR ALL COLUMNS`.
    All,
}

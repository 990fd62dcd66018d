//! The tables `bench` and `demo` generate: transactions (N rows, `account_id` in `[0, N/10)`,
//! each account with ten of them) and accounts (N/10 rows), each written by one `CREATE TABLE
//! … AS` over `range()`, and copies of them bucketed by `account_id`. One statement per table,
//! not chunks: each write adds one file per bucket, and a bucketed table of one sorted file per
//! bucket is what the bench measures.

/// Accounts for `transactions` transactions: a tenth of them, at least one.
pub fn accounts_for(transactions: u64) -> u64 {
    (transactions / 10).max(1)
}

/// `table (tx_id BIGINT, account_id BIGINT, amount DOUBLE)` of `rows` transactions.
pub fn create_transactions(table: &str, rows: u64, accounts: u64) -> String {
    format!(
        "CREATE TABLE {table} USING parquet AS SELECT id AS tx_id, id % {accounts} AS account_id, CAST(id % 1000 AS DOUBLE) AS amount FROM range({rows})"
    )
}

/// `table (account_id BIGINT, name STRING)` of `accounts` accounts.
pub fn create_accounts(table: &str, accounts: u64) -> String {
    format!(
        "CREATE TABLE {table} USING parquet AS SELECT id AS account_id, concat('name', CAST(id AS STRING)) AS name FROM range({accounts})"
    )
}

/// A copy of `source` bucketed by `account_id` into `buckets` buckets, each file sorted on it.
pub fn create_bucketed_copy(table: &str, source: &str, buckets: u32) -> String {
    format!(
        "CREATE TABLE {table} USING parquet CLUSTERED BY (account_id) SORTED BY (account_id) INTO {buckets} BUCKETS AS SELECT * FROM {source}"
    )
}

//! One file per command a statement can be: what it checks, does and answers.

pub(crate) mod add_columns;
pub(crate) mod analyze_table;
pub(crate) mod copy;
pub(crate) mod create_table;
pub(crate) mod describe_column;
pub(crate) mod describe_table;
pub(crate) mod drop_table;
pub(crate) mod explain;
pub(crate) mod insert;
pub(crate) mod optimize;
pub(crate) mod query;
pub(crate) mod refresh_table;
pub(crate) mod rename_table;
pub(crate) mod repair_table;
pub(crate) mod set_location;
pub(crate) mod show_buckets;
pub(crate) mod show_create_table;
pub(crate) mod show_partitions;
pub(crate) mod show_tables;
pub(crate) mod table_properties;
pub(crate) mod transaction;
pub(crate) mod truncate_table;
pub(crate) mod variables;

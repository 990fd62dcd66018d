//! A table's DDL in Spark's syntax: what SHOW CREATE TABLE prints, and what registers the
//! table in a Spark's catalog.

use crate::catalog::table::TableMeta;
use crate::planner::table_provider::CATALOG_NAME;

/// The DDL that recreates the table, clause order as Spark prints it.
pub fn create_statement(meta: &TableMeta) -> String {
    table_ddl(meta, false)
}

/// The table property that marks a table of Spark's catalog as this server's registration,
/// with the metastore's id of the table.
pub const REGISTERED_ID: &str = "bucketsql.table_id";

/// The DDL that registers the table in a Spark's catalog (`crate::sql::spark`): every name
/// quoted, and the location given for managed tables too, since Spark reads the files where
/// they are.
pub fn registration_statement(meta: &TableMeta) -> String {
    table_ddl(meta, true)
}

fn table_ddl(meta: &TableMeta, registering: bool) -> String {
    let name = |n: &str| if registering { quote_identifier(n) } else { n.to_string() };
    let names = |list: &[String]| list.iter().map(|n| name(n)).collect::<Vec<_>>().join(", ");
    // SHOW CREATE TABLE escapes quotes only, as Spark prints it; Spark's parser reads the
    // registration, where a backslash must be escaped too.
    let literal = |text: &str| {
        let text = if registering { text.replace('\\', "\\\\") } else { text.to_string() };
        format!("'{}'", text.replace('\'', "\\'"))
    };
    let columns: Vec<String> = meta
        .columns
        .iter()
        .map(|c| {
            let comment = c.comment.as_deref().map_or_else(String::new, |text| format!(" COMMENT {}", literal(text)));
            // Spark 4 prints a string's collation; a registration leaves it to the cluster's default.
            let ty = if registering { c.ty.ddl_name() } else { c.ty.collated_ddl_name() };
            format!("  {} {ty}{comment}", name(&c.name))
        })
        .collect();
    let mut ddl = format!(
        "CREATE TABLE {CATALOG_NAME}.{}.{} (\n{})\nUSING {}\n",
        name(&meta.schema),
        name(&meta.name),
        columns.join(",\n"),
        meta.provider
    );
    if !meta.partition_columns.is_empty() {
        ddl.push_str(&format!("PARTITIONED BY ({})\n", names(&meta.partition_columns)));
    }
    if let Some(spec) = &meta.bucket_spec {
        ddl.push_str(&format!("CLUSTERED BY ({})\n", names(&spec.bucket_columns)));
        if !spec.sort_columns.is_empty() {
            ddl.push_str(&format!("SORTED BY ({})\n", names(&spec.sort_columns)));
        }
        ddl.push_str(&format!("INTO {} BUCKETS\n", spec.num_buckets));
    }
    if let Some(comment) = &meta.comment {
        ddl.push_str(&format!("COMMENT {}\n", literal(comment)));
    }
    if meta.external || registering {
        ddl.push_str(&format!("LOCATION {}\n", literal(&meta.location.uri())));
    }
    let registered_by = (REGISTERED_ID.to_string(), meta.id.to_string());
    let registered_by = registering.then_some((&registered_by.0, &registered_by.1));
    let properties: Vec<String> = meta
        .properties
        .iter()
        .filter(|(k, _)| !k.starts_with("spark.sql.statistics."))
        .chain(registered_by)
        .map(|(k, v)| format!("  {} = {}", literal(k), literal(v)))
        .collect();
    if !properties.is_empty() {
        ddl.push_str(&format!("TBLPROPERTIES (\n{})\n", properties.join(",\n")));
    }
    ddl
}

/// A Spark identifier in backquotes.
pub fn quote_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

//! `COPY`: which table or query, which direction, which format. The data itself moves on
//! the wire front end, and rows copied in stream into one write of the table, committed at
//! the end, through [`TableAppend`](crate::sql::write::append_stream::TableAppend).

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::execute_stream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::sql::sqlparser::ast::{
    CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Statement,
};
use futures::{StreamExt, stream};

use crate::error::SqlError;
use crate::planner::table_provider::table_schema;
use crate::sql::activity::CopyCommand;
use crate::sql::dialect::{BucketSqlStatement, parse_sql};
use crate::sql::names::table_name;
use crate::sql::output::{CopyFormat, CopyIn, CopyOptions, CopyOut, Output};
use crate::sql::pg_catalog::table_oid;
use crate::sql::session::Session;

pub async fn copy(session: &Session, stmt: &Statement) -> Result<Output, SqlError> {
    let Statement::Copy { source, to, target, options, legacy_options, values } = stmt else {
        return Err(SqlError::internal("not a COPY statement"));
    };
    let options = copy_options(options, legacy_options)?;
    match (to, target) {
        (false, CopyTarget::Stdin) if values.is_empty() => copy_in(session, source, options),
        (true, CopyTarget::Stdout) => copy_out(session, source, options).await,
        (false, CopyTarget::Stdin) => {
            Err(SqlError::feature_not_supported("COPY data must follow as CopyData messages, not inside the statement"))
        }
        _ => Err(SqlError::feature_not_supported(
            "COPY with a file or program on the server is not supported; use FROM STDIN / TO STDOUT (psql's \\copy)",
        )),
    }
}

fn copy_in(session: &Session, source: &CopySource, options: CopyOptions) -> Result<Output, SqlError> {
    let CopySource::Table { table_name: name, columns } = source else {
        return Err(SqlError::syntax("COPY FROM needs a table"));
    };
    let (schema, table) = table_name(name)?;
    let meta = session
        .tables
        .table(&schema, &table)?
        .ok_or_else(|| SqlError::undefined_table(format!("relation \"{name}\" does not exist")))?;
    let table_schema = table_schema(&meta)?;
    let progress = session.backend.report_copy(table_oid(&meta), CopyCommand::From);
    let columns = if columns.is_empty() {
        (0..table_schema.fields().len()).collect()
    } else {
        let mut indices: Vec<usize> = Vec::with_capacity(columns.len());
        for column in columns {
            let index =
                table_schema.fields().iter().position(|f| f.name().eq_ignore_ascii_case(&column.value)).ok_or_else(
                    || {
                        SqlError::undefined_column(format!(
                            "column \"{}\" of relation \"{table}\" does not exist",
                            column.value
                        ))
                    },
                )?;
            if indices.contains(&index) {
                return Err(SqlError::duplicate_column(format!(
                    "column \"{}\" specified more than once",
                    column.value
                )));
            }
            indices.push(index);
        }
        indices
    };
    Ok(Output::CopyIn(CopyIn { schema, table, table_schema, columns, options, progress }))
}

/// Plans and starts the query, and reads its first batch, so that errors are reported
/// before the client is told the COPY has begun. The rows hold their own janitor guard:
/// the files they read stay until they are sent.
async fn copy_out(session: &Session, source: &CopySource, options: CopyOptions) -> Result<Output, SqlError> {
    let guard = session.engine.janitor.begin_statement();
    // Not a metastore table (a catalog view, a query): 0, as PostgreSQL reports a query's
    // COPY. Planning says what is wrong with a name that names nothing.
    let relid = match source {
        CopySource::Table { table_name: name, .. } => table_name(name)
            .ok()
            .and_then(|(schema, table)| session.tables.table(&schema, &table).ok().flatten())
            .map_or(0, |meta| table_oid(&meta)),
        CopySource::Query(_) => 0,
    };
    let progress = session.backend.report_copy(relid, CopyCommand::To);
    let query = match source {
        CopySource::Query(query) => Statement::Query(query.clone()),
        CopySource::Table { table_name, columns } => {
            let list = if columns.is_empty() {
                "*".to_string()
            } else {
                columns.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            };
            match parse_sql(&format!("SELECT {list} FROM {table_name}"))?.pop() {
                Some(BucketSqlStatement::Sql(query)) => query,
                _ => return Err(SqlError::internal("COPY did not build a query")),
            }
        }
    };
    let plan = session.plan(&query).await?;
    let physical = session.physical_plan(&query, &plan).await?;
    let schema: SchemaRef = Arc::new(plan.schema().as_arrow().clone());
    let mut batches = execute_stream(physical, session.task_context())?;
    let first = batches.next().await.transpose()?;
    let stream = stream::iter(first.map(Ok)).chain(batches).map(move |batch| {
        let _ = &guard;
        batch
    });
    let stream = Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&schema), stream));
    Ok(Output::CopyOut(CopyOut { options, schema, stream, progress }))
}

/// Reads both option syntaxes: `WITH (FORMAT csv, HEADER)` and the older
/// `WITH CSV HEADER DELIMITER ','` that psql's `\copy` passes through.
fn copy_options(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<CopyOptions, SqlError> {
    let mut format = CopyFormat::Text;
    let mut header = false;
    let (mut delimiter, mut null, mut quote, mut escape) = (None, None, None, None);
    let unsupported = |option: &dyn std::fmt::Display| {
        SqlError::feature_not_supported(format!("COPY option {option} is not supported"))
    };
    for option in options {
        match option {
            CopyOption::Format(name) => {
                format = match name.value.to_lowercase().as_str() {
                    "text" => CopyFormat::Text,
                    "csv" => CopyFormat::Csv,
                    "binary" => CopyFormat::Binary,
                    other => {
                        return Err(SqlError::invalid_parameter(format!("COPY format \"{other}\" not recognized")));
                    }
                }
            }
            CopyOption::Header(on) => header = *on,
            CopyOption::Delimiter(c) => delimiter = Some(*c),
            CopyOption::Null(s) => null = Some(s.clone()),
            CopyOption::Quote(c) => quote = Some(*c),
            CopyOption::Escape(c) => escape = Some(*c),
            CopyOption::Freeze(_) => {}
            CopyOption::Encoding(e) if e.eq_ignore_ascii_case("utf8") || e.eq_ignore_ascii_case("utf-8") => {}
            other => return Err(unsupported(other)),
        }
    }
    for option in legacy {
        match option {
            CopyLegacyOption::Binary => format = CopyFormat::Binary,
            CopyLegacyOption::Header => header = true,
            CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
            CopyLegacyOption::Null(s) => null = Some(s.clone()),
            CopyLegacyOption::Csv(csv) => {
                format = CopyFormat::Csv;
                for option in csv {
                    match option {
                        CopyLegacyCsvOption::Header => header = true,
                        CopyLegacyCsvOption::Quote(c) => quote = Some(*c),
                        CopyLegacyCsvOption::Escape(c) => escape = Some(*c),
                        other => return Err(unsupported(other)),
                    }
                }
            }
            other => return Err(unsupported(other)),
        }
    }
    let csv = format == CopyFormat::Csv;
    if format == CopyFormat::Binary && (header || delimiter.is_some() || null.is_some()) {
        return Err(SqlError::syntax("cannot specify HEADER, DELIMITER or NULL in BINARY mode"));
    }
    if !csv && (quote.is_some() || escape.is_some()) {
        return Err(SqlError::feature_not_supported("COPY QUOTE and ESCAPE are available only in CSV mode"));
    }
    let single_byte = |c: char, what: &str| match u8::try_from(c) {
        Ok(b) if c.is_ascii() && b != b'\n' && b != b'\r' => Ok(b),
        _ => Err(SqlError::feature_not_supported(format!("COPY {what} must be a single one-byte character"))),
    };
    let delimiter = single_byte(delimiter.unwrap_or(if csv { ',' } else { '\t' }), "delimiter")?;
    let quote = single_byte(quote.unwrap_or('"'), "quote")?;
    let escape = escape.map(|c| single_byte(c, "escape")).transpose()?.unwrap_or(quote);
    let null = null.unwrap_or_else(|| if csv { String::new() } else { "\\N".to_string() });
    if null.as_bytes().contains(&delimiter) {
        return Err(SqlError::invalid_parameter("COPY delimiter must not appear in the NULL specification"));
    }
    Ok(CopyOptions { format, header, delimiter, null, quote, escape })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(sql: &str) -> Result<CopyOptions, SqlError> {
        match parse_sql(sql).unwrap().pop() {
            Some(BucketSqlStatement::Sql(Statement::Copy { options, legacy_options, .. })) => {
                copy_options(&options, &legacy_options)
            }
            _ => panic!("{sql} is not a COPY"),
        }
    }

    #[test]
    fn reads_new_and_legacy_option_syntax() {
        let text = options("COPY t FROM STDIN").unwrap();
        assert_eq!(
            (text.format, text.delimiter, text.null.as_str(), text.header),
            (CopyFormat::Text, b'\t', "\\N", false)
        );
        let csv = options("COPY t (a, b) FROM STDIN WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'NA')").unwrap();
        assert_eq!((csv.format, csv.delimiter, csv.null.as_str(), csv.header), (CopyFormat::Csv, b';', "NA", true));
        let legacy = options("COPY t FROM STDIN WITH CSV HEADER").unwrap();
        assert_eq!(
            (legacy.format, legacy.delimiter, legacy.null.as_str(), legacy.header),
            (CopyFormat::Csv, b',', "", true)
        );
        let psql = options("COPY  t FROM STDIN DELIMITER '|' CSV").unwrap();
        assert_eq!((psql.format, psql.delimiter), (CopyFormat::Csv, b'|'));
        assert_eq!(options("COPY t TO STDOUT (FORMAT binary)").unwrap().format, CopyFormat::Binary);
        assert_eq!(options("COPY (SELECT 1) TO STDOUT WITH CSV").unwrap().format, CopyFormat::Csv);
    }

    #[test]
    fn rejects_options_postgres_rejects() {
        assert_eq!(options("COPY t FROM STDIN (FORMAT json)").unwrap_err().code, "22023");
        assert_eq!(options("COPY t FROM STDIN (FORMAT binary, HEADER)").unwrap_err().code, "42601");
        assert_eq!(options("COPY t FROM STDIN (QUOTE '''')").unwrap_err().code, "0A000");
        assert_eq!(options("COPY t FROM STDIN (DELIMITER ',', NULL 'a,b')").unwrap_err().code, "22023");
    }
}

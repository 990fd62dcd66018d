//! Spark's `FileSourceScanExec` of our bucketed Parquet scan: `Scan parquet` with its file
//! index, pushed filters, read schema and bucketing, its metadata abbreviated in simple
//! EXPLAIN as Spark abbreviates it.

use datafusion::physical_plan::ExecutionPlan;

use super::Converter;
use crate::exec::file_source_scan::FileSourceScanExec;
use crate::explain::expressions::{Attr, Columns, join, list, render, spark_type};
use crate::explain::plan::{Node, Role, field};
use crate::planner::table_provider::table_schema;

/// Spark's `spark.sql.maxMetadataStringLength`: simple EXPLAIN abbreviates scan metadata.
const MAX_METADATA_LENGTH: usize = 100;

impl Converter {
    pub(super) fn scan(&mut self, scan: &FileSourceScanExec) -> Node {
        let table = scan.table();
        let output_schema = scan.schema();
        let table_fields = table_schema(table).map_or_else(|_| output_schema.fields().clone(), |s| s.fields().clone());
        let table_attrs: Vec<Attr> = table_fields.iter().map(|f| self.fresh_field(f)).collect();
        let output: Vec<Attr> = output_schema
            .fields()
            .iter()
            .map(|f| table_attrs.iter().find(|a| a.name == *f.name()).cloned().unwrap_or_else(|| self.fresh_field(f)))
            .collect();
        let columns = Columns::Attrs(&table_attrs);
        let filters = scan.filters();
        let partition_filters: Vec<String> = filters.partition.iter().map(|e| render(e, &columns)).collect();
        let data_filters: Vec<String> = filters.data.iter().map(|e| render(e, &columns)).collect();

        let root = table.location.uri();
        let (index, paths) = if table.partition_columns.is_empty() {
            ("InMemoryFileIndex", vec![root])
        } else if filters.partition.is_empty() {
            ("CatalogFileIndex", vec![root])
        } else {
            ("InMemoryFileIndex", scan.selected_partitions().iter().map(|p| format!("{root}/{p}")).collect())
        };
        let formatted_location = match paths.as_slice() {
            [first, _, ..] => format!("{index} [{first}, ... {} entries]", paths.len() - 1),
            _ => format!("{index} {}", list(&paths)),
        };
        let mut listed = String::new();
        for path in &paths {
            if listed.len() >= MAX_METADATA_LENGTH {
                break;
            }
            if !listed.is_empty() {
                listed += ", ";
            }
            listed += path;
        }
        let simple_location = format!("{index}({} paths)[{listed}]", paths.len());

        let read_schema = scan.read_schema();
        let read_fields = read_schema.fields().iter().map(|f| format!("{}:{}", f.name(), spark_type(f.data_type())));
        let batched = !output_schema.fields().iter().any(|f| f.data_type().is_nested());
        let provider = table.provider.to_lowercase();
        let format = provider.get(..1).map_or_else(String::new, |first| first.to_uppercase() + &provider[1..]);

        let mut metadata: Vec<(&str, String)> = vec![
            ("Batched", batched.to_string()),
            ("DataFilters", list(&data_filters)),
            ("Format", format),
            ("Location", simple_location),
            ("PartitionFilters", list(&partition_filters)),
            ("PushedFilters", list(&filters.pushed)),
            ("ReadSchema", format!("struct<{}>", join(read_fields, ","))),
        ];
        if let Some(bucketed) = scan.status().explain() {
            metadata.push(("Bucketed", bucketed.to_string()));
        }
        if let (true, Some(selected), Some(spec)) =
            (scan.is_bucketed(), scan.selected_bucket_count(), scan.bucket_spec())
        {
            let coalesced = scan.coalesced_to().map_or_else(String::new, |n| format!(" (Coalesced to {n})"));
            metadata.push(("SelectedBucketsCount", format!("{selected} out of {}{coalesced}", spec.num_buckets)));
        }
        metadata.sort_by_key(|(k, _)| *k);

        let name = format!("Scan {provider} spark_catalog.{}.{}", table.schema, table.name);
        let simple_metadata = metadata.iter().map(|(k, v)| format!("{k}: {}", abbreviate(v, MAX_METADATA_LENGTH)));
        let simple = format!("File{name}[{}] {}", join(&output, ","), join(simple_metadata, ", "));
        let mut details = vec![field("Output", &output)];
        details.extend(
            metadata
                .into_iter()
                .filter(|(k, v)| !matches!(*k, "DataFilters" | "Format") && !v.is_empty() && v != "[]")
                .map(|(k, v)| if k == "Location" { format!("{k}: {formatted_location}") } else { format!("{k}: {v}") }),
        );
        let bucket_columns = scan.bucket_spec().map(|s| s.bucket_columns.clone()).unwrap_or_default();
        let declared_size = scan
            .declared_size()
            .map(|declared| (declared, scan.bytes_read()))
            .filter(|(declared, read)| declared != read);
        Node::new(name, simple, output, Vec::new()).details(details).role(Role::Scan {
            status: scan.status(),
            bucket_columns,
            declared_size,
        })
    }
}

/// Commons-lang `StringUtils.abbreviate`, as Spark applies it to scan metadata.
fn abbreviate(value: &str, width: usize) -> String {
    if value.chars().count() <= width {
        value.to_string()
    } else {
        format!("{}...", value.chars().take(width - 3).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviates_like_commons_lang() {
        assert_eq!(abbreviate("abcdef", 5), "ab...");
    }
}

//! What a data file's Parquet footer says about its rows, read without reading them: a
//! column's smallest and largest values, from the row groups' statistics, and whether the
//! rows are declared sorted (Parquet's `sorting_columns`, which our writer sets).

use std::path::Path;

use datafusion::arrow::array::Array;
use datafusion::common::ScalarValue;
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::file::reader::FileReader;

use super::existing_files::{arrow_schema, open};
use super::parquet_writer::sorting_columns;
use crate::error::SqlError;

/// A file's footer facts about one column.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    /// `None` when the file holds no non-null value of the column, or a row group holding
    /// some has no exact statistics for it.
    pub min: Option<ScalarValue>,
    pub max: Option<ScalarValue>,
    /// Every row group declares its rows sorted by the given columns (an empty file is).
    pub sorted: bool,
}

/// `column`'s range in the file at `path`, and whether the file declares its rows sorted by
/// `sorted_by` (never, for an empty `sorted_by`).
pub fn column_range(path: &Path, column: &str, sorted_by: &[String]) -> Result<ColumnRange, SqlError> {
    let reader = open(path)?;
    let schema = arrow_schema(&reader)?;
    let metadata = reader.metadata();
    let row_groups = metadata.row_groups();
    let expected = sorting_columns(&schema, sorted_by);
    let sorted = !sorted_by.is_empty()
        && expected.len() == sorted_by.len()
        && row_groups
            .iter()
            .all(|group| group.sorting_columns().is_some_and(|declared| declared.starts_with(&expected)));
    let converter = StatisticsConverter::try_new(column, &schema, metadata.file_metadata().schema_descr())?;
    let mins = converter.row_group_mins(row_groups.iter())?;
    let maxes = converter.row_group_maxes(row_groups.iter())?;
    let nulls = converter.row_group_null_counts(row_groups.iter())?;
    // Long strings' statistics may be truncated bounds, not values the column holds.
    let exact_mins = converter.row_group_is_min_value_exact(row_groups.iter())?;
    let exact_maxes = converter.row_group_is_max_value_exact(row_groups.iter())?;
    let mut range = ColumnRange { min: None, max: None, sorted };
    for (i, group) in row_groups.iter().enumerate() {
        let values = (group.num_rows() as u64).saturating_sub(if nulls.is_null(i) { 0 } else { nulls.value(i) });
        if values == 0 {
            continue;
        }
        let exact = |flags: &datafusion::arrow::array::BooleanArray| !flags.is_null(i) && flags.value(i);
        if mins.is_null(i) || maxes.is_null(i) || !exact(&exact_mins) || !exact(&exact_maxes) {
            return Ok(ColumnRange { min: None, max: None, sorted });
        }
        let (min, max) = (ScalarValue::try_from_array(&mins, i)?, ScalarValue::try_from_array(&maxes, i)?);
        if range.min.as_ref().is_none_or(|m| min < *m) {
            range.min = Some(min);
        }
        if range.max.as_ref().is_none_or(|m| max > *m) {
            range.max = Some(max);
        }
    }
    Ok(range)
}

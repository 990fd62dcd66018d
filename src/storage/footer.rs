//! What a data file's Parquet footer says about its rows, read without reading them: a
//! column's smallest and largest values, from the row groups' statistics, and whether the
//! rows are declared sorted (Parquet's `sorting_columns`, which our writer sets).

use datafusion::arrow::array::Array;
use datafusion::common::ScalarValue;
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::reader::FileReader;

use super::existing_files::{footer, open, schema_of};
use super::object_stores::ObjectStores;
use super::parquet_writer::sorting_columns;
use crate::catalog::location::Location;
use crate::error::SqlError;

/// What statistics say about a column's values.
#[derive(Debug, Clone, PartialEq)]
pub enum Bounds {
    /// No non-null value.
    Empty,
    /// The smallest and largest values.
    Within(ScalarValue, ScalarValue),
    /// Some values lie outside what the statistics tell (missing or inexact bounds).
    Unknown,
}

impl Bounds {
    /// The smallest value, where the statistics tell it.
    pub fn min(&self) -> Option<&ScalarValue> {
        match self {
            Bounds::Within(min, _) => Some(min),
            _ => None,
        }
    }

    pub fn max(&self) -> Option<&ScalarValue> {
        match self {
            Bounds::Within(_, max) => Some(max),
            _ => None,
        }
    }

    /// The bounds of both sets of values together.
    pub fn widen(self, other: Bounds) -> Bounds {
        match (self, other) {
            (Bounds::Unknown, _) | (_, Bounds::Unknown) => Bounds::Unknown,
            (Bounds::Empty, bounds) | (bounds, Bounds::Empty) => bounds,
            (Bounds::Within(min, max), Bounds::Within(other_min, other_max)) => Bounds::Within(
                if other_min < min { other_min } else { min },
                if other_max > max { other_max } else { max },
            ),
        }
    }
}

/// A file's footer facts about one column.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnRange {
    pub bounds: Bounds,
    /// Every row group declares its rows sorted by the given columns (an empty file is).
    pub sorted: bool,
}

/// `column`'s range in each of `files` (paths relative to `location`, with their sizes), and
/// whether each declares its rows sorted by `sorted_by`, in order. Local footers are read on
/// a blocking thread; objects' with range requests.
pub async fn column_ranges(
    location: &Location,
    files: Vec<(String, u64)>,
    column: &str,
    sorted_by: &[String],
    stores: &ObjectStores,
) -> Result<Vec<ColumnRange>, SqlError> {
    match location {
        Location::Local(dir) => {
            let (dir, column, sorted_by) = (dir.clone(), column.to_string(), sorted_by.to_vec());
            tokio::task::spawn_blocking(move || {
                files.iter().map(|(path, _)| range_in(open(&dir.join(path))?.metadata(), &column, &sorted_by)).collect()
            })
            .await
            .map_err(|e| SqlError::internal(format!("reading footers failed: {e}")))?
        }
        Location::Object(prefix) => {
            let store = stores.store(prefix)?;
            let mut ranges = Vec::with_capacity(files.len());
            for (path, size) in files {
                let Location::Object(object) = location.join(&path) else { unreachable!("an object joins to one") };
                ranges.push(range_in(&footer(&store, &object, size).await?, column, sorted_by)?);
            }
            Ok(ranges)
        }
    }
}

/// `column`'s range in the file whose footer is `metadata`, and whether the file declares its
/// rows sorted by `sorted_by` (never, for an empty `sorted_by`).
fn range_in(metadata: &ParquetMetaData, column: &str, sorted_by: &[String]) -> Result<ColumnRange, SqlError> {
    let schema = schema_of(metadata.file_metadata())?;
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
    let mut bounds = Bounds::Empty;
    for (i, group) in row_groups.iter().enumerate() {
        let values = (group.num_rows() as u64).saturating_sub(if nulls.is_null(i) { 0 } else { nulls.value(i) });
        if values == 0 {
            continue;
        }
        let exact = |flags: &datafusion::arrow::array::BooleanArray| !flags.is_null(i) && flags.value(i);
        let group_bounds = if mins.is_null(i) || maxes.is_null(i) || !exact(&exact_mins) || !exact(&exact_maxes) {
            Bounds::Unknown
        } else {
            Bounds::Within(ScalarValue::try_from_array(&mins, i)?, ScalarValue::try_from_array(&maxes, i)?)
        };
        bounds = bounds.widen(group_bounds);
    }
    Ok(ColumnRange { bounds, sorted })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_widen_and_unknown_wins() {
        let within = |a: i64, b: i64| Bounds::Within(ScalarValue::from(a), ScalarValue::from(b));
        assert_eq!(within(3, 5).widen(within(1, 4)), within(1, 5));
        assert_eq!(Bounds::Empty.widen(within(2, 2)), within(2, 2));
        assert_eq!(within(2, 2).widen(Bounds::Empty), within(2, 2));
        assert_eq!(within(2, 2).widen(Bounds::Unknown), Bounds::Unknown);
        assert_eq!(Bounds::Unknown.widen(Bounds::Empty), Bounds::Unknown);
    }
}

//! Data file names as Spark writes them, so Spark reading a table directory finds the
//! bucket of every file where it looks for it.

use uuid::Uuid;

/// Directory inside a table location where a write stages its files before commit; Spark
/// and other Hadoop-style readers skip names starting with `_`.
pub const STAGING_DIR: &str = "_temporary";

/// `part-<task>-<write uuid>[_<bucket>].c000.snappy.parquet`, Spark's `getFileName`:
/// the bucket id, zero-padded to five digits, follows the job id.
pub fn data_file_name(task: usize, write_id: &Uuid, bucket: Option<u32>) -> String {
    let bucket = bucket.map(|b| format!("_{b:05}")).unwrap_or_default();
    format!("part-{task:05}-{write_id}{bucket}.c000.snappy.parquet")
}

/// The bucket id Spark reads from a file name (`.*_(\d+)(?:\..*)?$`): the digits after
/// the last `_` that is followed only by digits and an optional extension.
pub fn bucket_id_of(file_name: &str) -> Option<u32> {
    let underscore = file_name.rfind('_')?;
    let rest = &file_name[underscore + 1..];
    let digits_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    if digits_end == 0 || !(digits_end == rest.len() || rest[digits_end..].starts_with('.')) {
        return None;
    }
    rest[..digits_end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_ids_round_trip_through_file_names() {
        let id = Uuid::new_v4();
        let name = data_file_name(0, &id, Some(3));
        assert_eq!(name, format!("part-00000-{id}_00003.c000.snappy.parquet"));
        assert_eq!(bucket_id_of(&name), Some(3));
        assert_eq!(bucket_id_of(&data_file_name(12, &id, None)), None);
    }

    #[test]
    fn parses_names_written_by_spark() {
        assert_eq!(bucket_id_of("part-00000-39d1b4c5-8d4b-4f0a-9c4e-0fd3e6a8c4ae_00001.c000.snappy.parquet"), Some(1));
        assert_eq!(bucket_id_of("00002_0_copy"), None);
        assert_eq!(bucket_id_of("x_12"), Some(12));
        assert_eq!(bucket_id_of("part-00000-abc.c000.snappy.parquet"), None);
    }
}

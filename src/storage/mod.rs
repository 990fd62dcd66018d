//! Table files: Spark's bucket hash and file names, the Parquet writer and what its footers
//! say, the commit protocol and the janitor that deletes what no table holds.

pub mod bucket_hash;
pub mod commit;
pub mod existing_files;
pub mod file_naming;
pub mod footer;
pub mod janitor;
pub mod parquet_writer;
pub mod partition_path;

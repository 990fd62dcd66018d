//! Table files: Spark's bucket hash and file names, the Parquet writer and what its footers
//! say, the commit protocol and the janitor that deletes what no table holds, and the object
//! stores of tables on S3.

pub(crate) mod aws_profile;
pub mod bucket_hash;
pub(crate) mod commit;
pub(crate) mod existing_files;
pub mod file_naming;
pub(crate) mod footer;
pub(crate) mod janitor;
pub mod object_stores;
pub(crate) mod object_upload;
pub(crate) mod object_write;
pub(crate) mod parquet_writer;
pub(crate) mod partition_path;
pub mod transaction;
pub(crate) mod write_target;

//! Spark's `SortExec` (`sort_exec`), with the keys normalized to integers it checks and packs
//! (`keys`) and the radix sort of the packed keys (`radix`). The merge join walks its sides by
//! the same normalized keys.

mod keys;
mod radix;
mod sort_exec;
#[cfg(test)]
mod tests;

pub(crate) use keys::{NormalizedKey, normalizable, normalize};
pub use sort_exec::SortExec;

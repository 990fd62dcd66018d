//! The mode of `EXPLAIN` (Spark's `EXPLAIN [mode] statement`): which plans the text shows.

/// The mode of an `EXPLAIN` statement, as in Spark's `EXPLAIN [mode] statement`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExplainMode {
    /// `EXPLAIN stmt`: the physical plan.
    Simple,
    /// `EXPLAIN EXTENDED` (also `EXPLAIN VERBOSE`): parsed, analyzed, optimized and physical plans.
    Extended,
    /// `EXPLAIN FORMATTED`: plan outline followed by per-operator details.
    Formatted,
    /// `EXPLAIN COST`: optimized logical plan with statistics.
    Cost,
    /// `EXPLAIN CODEGEN`: generated code.
    Codegen,
    /// `EXPLAIN ANALYZE`: execute and report runtime metrics.
    Analyze,
}

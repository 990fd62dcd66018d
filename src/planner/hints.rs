//! Spark's join strategy hints (`/*+ BROADCAST(t) */` and friends), resolved to the tables
//! they name. A hint names a relation by its alias or its table name; a join side carries
//! the hint when it reads exactly that one table (`ResolveJoinStrategyHints`).

use std::collections::{HashMap, HashSet};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement, TableFactor};

use crate::sql::dialect::extract_hints;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JoinHint {
    Broadcast,
    ShuffleMerge,
    ShuffleHash,
    ShuffleReplicateNl,
}

impl JoinHint {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "BROADCAST" | "BROADCASTJOIN" | "MAPJOIN" => JoinHint::Broadcast,
            "MERGE" | "SHUFFLE_MERGE" | "MERGEJOIN" => JoinHint::ShuffleMerge,
            "SHUFFLE_HASH" => JoinHint::ShuffleHash,
            "SHUFFLE_REPLICATE_NL" => JoinHint::ShuffleReplicateNl,
            _ => return None,
        })
    }
}

/// Hints by the `(schema, table)` they apply to.
#[derive(Debug, Clone, Default)]
pub struct QueryHints {
    by_table: HashMap<String, HashSet<JoinHint>>,
}

impl QueryHints {
    /// Collects the hints of every SELECT in `statement`, resolving aliases through `plan`.
    pub fn resolve(statement: &Statement, plan: &LogicalPlan) -> Self {
        let mut named: Vec<(JoinHint, String)> = Vec::new();
        if let Statement::Query(query) = statement {
            collect(query, &mut named);
        }
        if named.is_empty() {
            return QueryHints::default();
        }
        let aliases = alias_map(plan);
        let mut by_table: HashMap<String, HashSet<JoinHint>> = HashMap::new();
        for (hint, name) in named {
            let table = aliases.get(&name).cloned().unwrap_or(name);
            by_table.entry(table).or_default().insert(hint);
        }
        QueryHints { by_table }
    }

    /// The hints on a relation reading `table` (`<schema>.<table>`).
    pub fn for_table(&self, table: &str) -> HashSet<JoinHint> {
        self.by_table.get(table).cloned().unwrap_or_default()
    }
}

fn collect(query: &Query, named: &mut Vec<(JoinHint, String)>) {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return;
    };
    for hint in extract_hints(select) {
        if let Some(kind) = JoinHint::parse(&hint.name) {
            named.extend(hint.args.iter().map(|a| (kind, a.to_lowercase())));
        }
    }
    for table in &select.from {
        for factor in std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation)) {
            if let TableFactor::Derived { subquery, .. } = factor {
                collect(subquery, named);
            }
        }
    }
}

/// Alias → `<schema>.<table>` for `table AS alias`, and table name → itself.
fn alias_map(plan: &LogicalPlan) -> HashMap<String, String> {
    let mut aliases = HashMap::new();
    let _ = plan.apply(|node| {
        match node {
            LogicalPlan::SubqueryAlias(alias) => {
                if let LogicalPlan::TableScan(scan) = alias.input.as_ref() {
                    aliases.insert(alias.alias.table().to_lowercase(), qualified(&scan.table_name));
                }
            }
            LogicalPlan::TableScan(scan) => {
                let full = qualified(&scan.table_name);
                aliases.insert(scan.table_name.table().to_lowercase(), full.clone());
                aliases.insert(full.clone(), full);
            }
            _ => {}
        }
        Ok(TreeNodeRecursion::Continue)
    });
    aliases
}

fn qualified(name: &datafusion::common::TableReference) -> String {
    let schema = name.schema().unwrap_or(crate::catalog::metastore::DEFAULT_SCHEMA);
    format!("{schema}.{}", name.table()).to_lowercase()
}

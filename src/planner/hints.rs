//! Spark's join strategy hints (`/*+ BROADCAST(t) */` and friends): read from the hint comment
//! of each `SELECT` and resolved to the tables they name. A hint names a relation by its alias or
//! its table name; a join side carries the hint when it reads exactly that one table
//! (`ResolveJoinStrategyHints`).

use std::collections::{HashMap, HashSet};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::LogicalPlan;
use datafusion::sql::sqlparser::ast::{
    JoinOperator, OptimizerHintStyle, Query, Select, SetExpr, Statement, TableFactor,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JoinHint {
    Broadcast,
    ShuffleMerge,
    ShuffleHash,
    ShuffleReplicateNl,
    /// Spark's internal `NO_BROADCAST_HASH`, never written by users: adaptive execution found
    /// most of the side's shuffle partitions empty (`DynamicJoinSelection`).
    NoBroadcastHash,
    /// Spark's internal `PREFER_SHUFFLE_HASH`: adaptive execution found every shuffle partition
    /// of the side small enough for a local hash map (`DynamicJoinSelection`).
    PreferShuffleHash,
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
    /// The query writes `CROSS JOIN`, which Spark keeps as the `Cross` join type where no
    /// condition joins the sides. Where we differ: the plan does not say which join was
    /// written so, so a join without a condition written with a comma is taken as one too
    /// when the same query also writes `CROSS JOIN`.
    cross_join_written: bool,
}

impl QueryHints {
    /// Collects the hints of every SELECT in `statement`, resolving aliases through `plan`.
    pub fn resolve(statement: &Statement, plan: &LogicalPlan) -> Self {
        let mut named: Vec<(JoinHint, String)> = Vec::new();
        let mut cross_join_written = false;
        if let Statement::Query(query) = statement {
            collect(query, &mut named, &mut cross_join_written);
        }
        if named.is_empty() {
            return QueryHints { cross_join_written, ..QueryHints::default() };
        }
        let aliases = alias_map(plan);
        let mut by_table: HashMap<String, HashSet<JoinHint>> = HashMap::new();
        for (hint, name) in named {
            let table = aliases.get(&name).cloned().unwrap_or(name);
            by_table.entry(table).or_default().insert(hint);
        }
        QueryHints { by_table, cross_join_written }
    }

    pub fn cross_join_written(&self) -> bool {
        self.cross_join_written
    }

    /// The hints on a relation reading `table` (`<schema>.<table>`).
    pub fn for_table(&self, table: &str) -> HashSet<JoinHint> {
        self.by_table.get(table).cloned().unwrap_or_default()
    }
}

fn collect(query: &Query, named: &mut Vec<(JoinHint, String)>, cross_join_written: &mut bool) {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return;
    };
    for hint in extract_hints(select) {
        if let Some(kind) = JoinHint::parse(&hint.name) {
            named.extend(hint.args.iter().map(|a| (kind, a.to_lowercase())));
        }
    }
    for table in &select.from {
        *cross_join_written |= table.joins.iter().any(|j| matches!(j.join_operator, JoinOperator::CrossJoin(_)));
        for factor in std::iter::once(&table.relation).chain(table.joins.iter().map(|j| &j.relation)) {
            if let TableFactor::Derived { subquery, .. } = factor {
                collect(subquery, named, cross_join_written);
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

/// A Spark optimizer hint such as `BROADCAST(t)`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hint {
    /// The hint name, upper-cased (Spark matches hint names case-insensitively).
    name: String,
    /// The arguments as written, trimmed; a backquoted or double-quoted identifier is unquoted.
    args: Vec<String>,
}

/// The Spark hints of a `SELECT`: the `/*+ ... */` comment right after `SELECT`, which may hold
/// several hints separated by commas or spaces, e.g. `/*+ BROADCAST(a), MERGE(b, c) */`.
///
/// Only `/*+` comments count, as in Spark (`--+` and prefixed `/*abc+` comments are ignored). The
/// scan of a comment stops at text that is not hint syntax.
fn extract_hints(select: &Select) -> Vec<Hint> {
    select
        .optimizer_hints
        .iter()
        .filter(|hint| hint.prefix.is_empty() && hint.style == OptimizerHintStyle::MultiLine)
        .flat_map(|hint| parse_hint_text(&hint.text))
        .collect()
}

fn parse_hint_text(text: &str) -> Vec<Hint> {
    let mut hints = Vec::new();
    let mut rest = text;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
        let name_len = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
        if name_len == 0 {
            return hints;
        }
        let name = rest[..name_len].to_ascii_uppercase();
        rest = rest[name_len..].trim_start();
        let mut args = Vec::new();
        if let Some(after_paren) = rest.strip_prefix('(') {
            let Some((parsed, remaining)) = parse_hint_args(after_paren) else {
                return hints;
            };
            args = parsed;
            rest = remaining;
        }
        hints.push(Hint { name, args });
    }
}

/// Splits `a, f(b, c), 'x,y')...` at top-level commas up to the closing parenthesis; returns the
/// arguments and the text after `)`, or `None` if the parenthesis is never closed.
fn parse_hint_args(text: &str) -> Option<(Vec<String>, &str)> {
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"' | '`') => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') if depth > 0 => depth -= 1,
            (None, ',') if depth == 0 => {
                args.push(unquote_hint_arg(&text[start..i]));
                start = i + 1;
            }
            (None, ')') => {
                let last = text[start..i].trim();
                if !(args.is_empty() && last.is_empty()) {
                    args.push(unquote_hint_arg(last));
                }
                return Some((args, &text[i + 1..]));
            }
            (None, _) => {}
        }
    }
    None
}

fn unquote_hint_arg(arg: &str) -> String {
    let arg = arg.trim();
    for quote in ['`', '"'] {
        if arg.len() >= 2 && arg.starts_with(quote) && arg.ends_with(quote) {
            let doubled = format!("{quote}{quote}");
            return arg[1..arg.len() - 1].replace(&doubled, &quote.to_string());
        }
    }
    arg.to_string()
}

#[cfg(test)]
mod tests {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    use super::*;

    /// The one statement of `sql`. The SQL layer's dialect parses queries as [`GenericDialect`]
    /// does, hint comments included.
    fn parse(sql: &str) -> Statement {
        let mut statements =
            Parser::parse_sql(&GenericDialect, sql).unwrap_or_else(|e| panic!("failed to parse {sql:?}: {e}"));
        assert_eq!(statements.len(), 1, "{sql}");
        statements.remove(0)
    }

    fn select_of(statement: &Statement) -> &Select {
        let Statement::Query(query) = statement else {
            panic!("expected a query, got {statement:?}");
        };
        let SetExpr::Select(select) = query.body.as_ref() else {
            panic!("expected a SELECT, got {query:?}");
        };
        select
    }

    #[test]
    fn hints_are_kept_and_extracted() {
        let stmt = parse(
            "SELECT /*+ BROADCAST(a), merge(b, `c`) shuffle_hash(\"d\") COALESCE(3) */ * \
             FROM a JOIN b ON a.k = b.k",
        );
        assert_eq!(select_of(&stmt).optimizer_hints.len(), 1);
        assert_eq!(
            extract_hints(select_of(&stmt)),
            [
                Hint { name: "BROADCAST".to_string(), args: vec!["a".to_string()] },
                Hint { name: "MERGE".to_string(), args: vec!["b".to_string(), "c".to_string()] },
                Hint { name: "SHUFFLE_HASH".to_string(), args: vec!["d".to_string()] },
                Hint { name: "COALESCE".to_string(), args: vec!["3".to_string()] },
            ]
        );
        assert!(stmt.to_string().starts_with("SELECT /*+ BROADCAST(a)"));

        let stmt = parse("SELECT /*+ REPARTITION(4, t.c, f(x, y)), NOARGS, EMPTY() */ * FROM t");
        assert_eq!(
            extract_hints(select_of(&stmt)),
            [
                Hint {
                    name: "REPARTITION".to_string(),
                    args: vec!["4".to_string(), "t.c".to_string(), "f(x, y)".to_string()]
                },
                Hint { name: "NOARGS".to_string(), args: vec![] },
                Hint { name: "EMPTY".to_string(), args: vec![] },
            ]
        );

        let stmt = parse("SELECT /*+ BROADCAST(a) */ /*+ MERGE(b) */ * FROM a, b");
        let names: Vec<String> = extract_hints(select_of(&stmt)).into_iter().map(|h| h.name).collect();
        assert_eq!(names, ["BROADCAST", "MERGE"]);

        let stmt = parse("SELECT /*+ BROADCAST(a) ?? MERGE(b) */ * FROM a");
        assert_eq!(extract_hints(select_of(&stmt)).len(), 1);
        let stmt = parse("SELECT /*+ BROADCAST(a */ * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());
        let stmt = parse("SELECT /* BROADCAST(a) */ * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());
        let stmt = parse("SELECT --+ BROADCAST(a)\n * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());
        let stmt = parse("SELECT * FROM a");
        assert!(extract_hints(select_of(&stmt)).is_empty());

        let Statement::Insert(insert) = parse("INSERT INTO t SELECT /*+ BROADCAST(s) */ * FROM s JOIN u USING (k)")
        else {
            panic!("expected INSERT");
        };
        let SetExpr::Select(inner) = insert.source.as_ref().expect("source").body.as_ref() else {
            panic!("expected SELECT");
        };
        assert_eq!(extract_hints(inner)[0].args, ["s"]);
    }
}

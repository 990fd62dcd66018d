//! Spark's `ExtractEquiJoinKeys` for null-safe keys: a join on `l <=> r` (an EXCEPT's or
//! INTERSECT's, or a user's) joins on `coalesce(l, default)` and `isnull(l)` against the same of
//! `r`, two keys that are never NULL, so NULL meets NULL and nothing else. They are what both
//! sides are shuffled and sorted on (`hashpartitioning(coalesce(k, 0), isnull(k), 200)`), and a
//! side bucketed by `k` does not provide them.
//!
//! `default` is Spark's `Literal.default` of the key's type: 0, the empty string, false, the
//! epoch. Keys of a type without one (a struct, a list) are left null-safe as they are.

use std::sync::Arc;

use datafusion::arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{CaseExpr, IsNotNullExpr, IsNullExpr, Literal};

type JoinKeys = Vec<(Arc<dyn PhysicalExpr>, Arc<dyn PhysicalExpr>)>;

/// The never-NULL keys that stand for null-safe keys `on`, or `None` if a key has no default.
pub fn null_safe_keys(on: &JoinKeys, left: &Schema, right: &Schema) -> Option<JoinKeys> {
    let mut keys = Vec::with_capacity(on.len() * 2);
    for (l, r) in on {
        keys.push((or_default(l, left)?, or_default(r, right)?));
        keys.push((is_null(l), is_null(r)));
    }
    Some(keys)
}

/// `coalesce(key, default)`, as DataFusion runs it: `CASE WHEN isnotnull(key) THEN key ELSE
/// default END`.
fn or_default(key: &Arc<dyn PhysicalExpr>, schema: &Schema) -> Option<Arc<dyn PhysicalExpr>> {
    let default: Arc<dyn PhysicalExpr> =
        Arc::new(Literal::new(ScalarValue::new_default(&key.data_type(schema).ok()?).ok()?));
    let tested: Arc<dyn PhysicalExpr> = Arc::new(IsNotNullExpr::new(Arc::clone(key)));
    Some(Arc::new(CaseExpr::try_new(None, vec![(tested, Arc::clone(key))], Some(default)).ok()?))
}

fn is_null(key: &Arc<dyn PhysicalExpr>) -> Arc<dyn PhysicalExpr> {
    Arc::new(IsNullExpr::new(Arc::clone(key)))
}

//! Spark's `MINUS` is another name for `EXCEPT` (with `ALL` or `DISTINCT` alike); sqlparser
//! parses it as its own [`SetOperator::Minus`], which DataFusion does not plan.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Query, SetExpr, SetOperator, Statement, VisitMut, VisitorMut};

/// `statement` with every `MINUS` an `EXCEPT`.
pub(super) fn minus_as_except(statement: &mut Statement) {
    let _ = statement.visit(&mut MinusAsExcept);
}

struct MinusAsExcept;

impl VisitorMut for MinusAsExcept {
    type Break = ();

    fn pre_visit_query(&mut self, query: &mut Query) -> ControlFlow<()> {
        let mut pending = vec![query.body.as_mut()];
        while let Some(body) = pending.pop() {
            if let SetExpr::SetOperation { op, left, right, .. } = body {
                if *op == SetOperator::Minus {
                    *op = SetOperator::Except;
                }
                pending.extend([left.as_mut(), right.as_mut()]);
            }
        }
        ControlFlow::Continue(())
    }
}

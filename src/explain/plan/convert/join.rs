//! Spark's joins (`SortMergeJoin`, `ShuffledHashJoin`, `BroadcastHashJoin`,
//! `BroadcastNestedLoopJoin`, `CartesianProduct`) of our join operator: output nullability by
//! join type, normalized keys, the condition over both sides, build side and codegen.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{JoinSide, JoinType};

use super::{Converter, Position};
use crate::exec::join::SparkJoinExec;
use crate::exec::join_spec::{BuildSide, JoinStrategy};
use crate::explain::expressions::{Attr, Columns, key, list, render};
use crate::explain::plan::{Codegen, Node, Role, field};

impl Converter {
    pub(super) fn join(&mut self, join: &SparkJoinExec) -> Node {
        let side = Position { root: false, join_child: true };
        let left = self.convert(join.left(), side);
        let right = self.convert(join.right(), side);
        let spec = join.spec();
        let nullable = |attrs: &[Attr]| attrs.iter().map(|a| Attr { nullable: true, ..a.clone() }).collect::<Vec<_>>();
        let output = match spec.join_type {
            JoinType::Inner => [left.output.clone(), right.output.clone()].concat(),
            JoinType::Left => [left.output.clone(), nullable(&right.output)].concat(),
            JoinType::Right => [nullable(&left.output), right.output.clone()].concat(),
            JoinType::Full => [nullable(&left.output), nullable(&right.output)].concat(),
            JoinType::LeftSemi | JoinType::LeftAnti => left.output.clone(),
            JoinType::RightSemi | JoinType::RightAnti => right.output.clone(),
            JoinType::LeftMark => [left.output.clone(), vec![self.fresh("exists", DataType::Boolean, false)]].concat(),
            JoinType::RightMark => {
                [right.output.clone(), vec![self.fresh("exists", DataType::Boolean, false)]].concat()
            }
        };
        let (left_schema, right_schema) = (join.left().schema(), join.right().schema());
        let mut left_keys: Vec<String> =
            join.left_keys().iter().map(|k| key(k, &left_schema, &Columns::Attrs(&left.output))).collect();
        let mut right_keys: Vec<String> =
            join.right_keys().iter().map(|k| key(k, &right_schema, &Columns::Attrs(&right.output))).collect();
        // A join filter reads an intermediate schema: each of its columns is a column of one side.
        let condition = match &spec.filter {
            Some(filter) => {
                let mut attrs = Vec::new();
                for (column, field) in filter.column_indices().iter().zip(filter.schema().fields()) {
                    let side = match column.side {
                        JoinSide::Left => left.output.get(column.index),
                        JoinSide::Right => right.output.get(column.index),
                        JoinSide::None => None,
                    };
                    attrs.push(side.cloned().unwrap_or_else(|| self.fresh_field(field)));
                }
                Some(render(filter.expression(), &Columns::Attrs(&attrs)))
            }
            None => None,
        };
        // A product keeps its equi-join keys in its condition, ahead of the rest.
        let condition = if spec.strategy == JoinStrategy::Cartesian && !left_keys.is_empty() {
            let equalities = left_keys.drain(..).zip(right_keys.drain(..)).map(|(l, r)| format!("({l} = {r})"));
            equalities.chain(condition).reduce(|all, next| format!("({all} AND {next})"))
        } else {
            condition
        };

        // Spark's `SortMergeJoin(skew=true)` once adaptive execution split skewed partitions.
        let name = if spec.skew {
            format!("{}(skew=true)", spec.strategy.spark_name())
        } else {
            spec.strategy.spark_name().to_string()
        };
        let join_type = spec.spark_join_type();
        let build = spec.build_side.filter(|_| {
            matches!(
                spec.strategy,
                JoinStrategy::ShuffledHash | JoinStrategy::BroadcastHash | JoinStrategy::BroadcastNestedLoop
            )
        });
        let with_condition = |text: String| match &condition {
            Some(c) => format!("{text}, {c}"),
            None => text,
        };
        let keys = format!("{}, {}", list(&left_keys), list(&right_keys));
        let build_name = build.map_or("", |b| b.spark_name());
        let simple = match spec.strategy {
            JoinStrategy::SortMerge => with_condition(format!("{name} {keys}, {join_type}")),
            JoinStrategy::ShuffledHash => with_condition(format!("{name} {keys}, {join_type}, {build_name}")),
            JoinStrategy::BroadcastHash => {
                format!("{}, false", with_condition(format!("{name} {keys}, {join_type}, {build_name}")))
            }
            JoinStrategy::BroadcastNestedLoop => with_condition(format!("{name} {build_name}, {join_type}")),
            JoinStrategy::Cartesian => condition.as_ref().map_or_else(|| name.clone(), |c| format!("{name} {c}")),
        };
        let mut details = Vec::new();
        if !left_keys.is_empty() {
            details.push(field("Left keys", &left_keys));
            details.push(field("Right keys", &right_keys));
        }
        details.push(format!("Join type: {join_type}"));
        details.push(format!("Join condition: {}", condition.as_deref().unwrap_or("None")));
        let codegen = match (spec.strategy, spec.join_type, spec.build_side) {
            (JoinStrategy::SortMerge | JoinStrategy::ShuffledHash, _, _) => Codegen::Isolating,
            (JoinStrategy::BroadcastHash, _, _) => Codegen::Yes,
            (JoinStrategy::BroadcastNestedLoop, JoinType::Inner, _)
            | (JoinStrategy::BroadcastNestedLoop, JoinType::Left, Some(BuildSide::Right))
            | (JoinStrategy::BroadcastNestedLoop, JoinType::Right, Some(BuildSide::Left))
            | (JoinStrategy::BroadcastNestedLoop, JoinType::LeftSemi | JoinType::LeftAnti, Some(BuildSide::Right)) => {
                Codegen::Yes
            }
            _ => Codegen::No,
        };
        let role = if spec.strategy == JoinStrategy::Cartesian { Role::Other } else { Role::NeedsDistribution };
        let mut node =
            Node::new(name.clone(), simple, output, vec![left, right]).details(details).codegen(codegen).role(role);
        node.outline = match build {
            Some(b) => format!("{name} {join_type} {}", b.spark_name()),
            None => format!("{name} {join_type}"),
        };
        node
    }
}

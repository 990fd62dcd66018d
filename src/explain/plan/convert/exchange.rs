//! Spark's exchanges: `Exchange` of our shuffle (hash, range or single partition) and
//! `BroadcastExchange` with its hashed relation's key, packed into one long as Spark packs it.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::ExecutionPlan;

use super::{Converter, Position, address};
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::reused_exchange::ReusedExchangeExec;
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};
use crate::explain::expressions::{Attr, Columns, join, key, render, sort_order};
use crate::explain::plan::{Codegen, Node, Role, field, unary};

impl Converter {
    /// Spark's `Exchange` of our shuffle; hash keys feeding a join are normalized as the join's are.
    pub(super) fn shuffle(&mut self, exchange: &ShuffleExchangeExec, at: Position) -> Node {
        let child = self.convert(exchange.input(), Position::default());
        let partitions = exchange.partitioning().partition_count();
        let partitioning = match exchange.partitioning() {
            ExchangePartitioning::Hash(exprs, n) => {
                let schema = exchange.input().schema();
                let columns = Columns::Attrs(&child.output);
                let keys =
                    exprs.iter().map(|e| if at.join_child { key(e, &schema, &columns) } else { render(e, &columns) });
                format!("hashpartitioning({}, {n})", join(keys, ", "))
            }
            ExchangePartitioning::Single => "SinglePartition".to_string(),
            ExchangePartitioning::Range(ordering, n) => {
                let columns = Columns::Attrs(&child.output);
                let order = ordering.iter().map(|s| sort_order(render(&s.expr, &columns), s));
                format!("rangepartitioning({}, {n})", join(order, ", "))
            }
        };
        let mut node = self.exchange(child, partitioning, partitions, exchange.reason().map(str::to_string));
        node.exchange = Some(address(exchange));
        node
    }

    /// Spark's `ReusedExchange`: its output as fresh attributes; the exchange it reads is named
    /// once operator ids are known.
    pub(super) fn reused_exchange(&mut self, reused: &ReusedExchangeExec) -> Node {
        let output: Vec<Attr> = reused
            .schema()
            .fields()
            .iter()
            .map(|f| self.fresh(f.name(), f.data_type().clone(), f.is_nullable()))
            .collect();
        let details = vec![field("Output", &output)];
        let mut node = Node::new("ReusedExchange", "ReusedExchange", output, Vec::new()).details(details);
        node.reuses = Some(address(reused.exchange()));
        node
    }

    pub(super) fn exchange(
        &mut self,
        child: Node,
        partitioning: String,
        partitions: usize,
        reason: Option<String>,
    ) -> Node {
        let arguments = format!("{partitioning}, ENSURE_REQUIREMENTS, [plan_id={}]", self.plan_id());
        unary("Exchange", arguments, child, Codegen::No).role(Role::Shuffle { partitioning, partitions, reason })
    }

    pub(super) fn broadcast(&mut self, broadcast: &BroadcastExchangeExec) -> Node {
        let child = self.convert(broadcast.input(), Position::default());
        let schema = broadcast.input().schema();
        let bound = |e: &Arc<dyn PhysicalExpr>| key(e, &schema, &Columns::Bound(&child.output));
        let integral_size = |e: &Arc<dyn PhysicalExpr>| match e.data_type(&schema) {
            Ok(DataType::Int8 | DataType::UInt8) => Some(1),
            Ok(DataType::Int16 | DataType::UInt16) => Some(2),
            Ok(DataType::Int32 | DataType::UInt32) => Some(4),
            Ok(DataType::Int64 | DataType::UInt64) => Some(8),
            _ => None,
        };
        // Spark's `HashJoin.rewriteKeyExpr`: integral keys that fit 64 bits are packed into one long.
        let sizes: Option<Vec<usize>> = broadcast.keys().iter().map(integral_size).collect();
        let keys = match sizes {
            Some(sizes) if !sizes.is_empty() && sizes.iter().sum::<usize>() <= 8 => {
                let long = |e: &Arc<dyn PhysicalExpr>, size: usize| {
                    if size == 8 { bound(e) } else { format!("cast({} as bigint)", bound(e)) }
                };
                let keys = broadcast.keys();
                let mut packed = long(&keys[0], sizes[0]);
                for (key, size) in keys.iter().zip(&sizes).skip(1) {
                    let bits = size * 8;
                    packed = format!("(shiftleft({packed}, {bits}) | ({} & {}))", long(key, *size), (1u64 << bits) - 1);
                }
                packed
            }
            _ => join(broadcast.keys().iter().map(bound), ", "),
        };
        // A nested loop join broadcasts rows as they are (no keys): Spark's `IdentityBroadcastMode`.
        let mode = if broadcast.keys().is_empty() {
            "IdentityBroadcastMode".to_string()
        } else {
            format!("HashedRelationBroadcastMode(List({keys}),{})", broadcast.is_null_aware())
        };
        let arguments = format!("{mode}, [plan_id={}]", self.plan_id());
        let mut node = unary("BroadcastExchange", arguments, child, Codegen::No).role(Role::Broadcast);
        node.exchange = Some(address(broadcast));
        node
    }
}

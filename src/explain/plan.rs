//! Our physical plan as Spark would print it: Spark's operator names and arguments,
//! attributes with expression ids, and without DataFusion's plumbing nodes.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{JoinSide, JoinType};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_expr::expressions::{Column, IsNotNullExpr};
use datafusion::physical_expr::{PhysicalExpr, split_conjunction};
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateInputMode, AggregateMode, AggregateOutputMode};
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::coop::CooperativeExec;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::limit::{GlobalLimitExec, LocalLimitExec};
use datafusion::physical_plan::memory::LazyMemoryExec;
use datafusion::physical_plan::placeholder_row::PlaceholderRowExec;
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use datafusion::physical_plan::sorts::sort_preserving_merge::SortPreservingMergeExec;
use datafusion::physical_plan::union::{InterleaveExec, UnionExec};
use datafusion::physical_plan::windows::{BoundedWindowAggExec, WindowAggExec};
use datafusion::physical_plan::{ExecutionPlan, Partitioning, WindowExpr, displayable};

use super::expressions::{Attr, Columns, join, key, list, render, sort_order, spark_type, window_frame};
use crate::planner::table_provider::table_schema;
use crate::exec::broadcast_exchange::BroadcastExchangeExec;
use crate::exec::file_source_scan::{BucketedStatus, FileSourceScanExec};
use crate::exec::join::{BuildSide, JoinStrategy, SparkJoinExec, spark_join_type};
use crate::exec::shuffle_exchange::{ExchangePartitioning, ShuffleExchangeExec};

/// Spark's `spark.sql.maxMetadataStringLength`: simple EXPLAIN abbreviates scan metadata.
const MAX_METADATA_LENGTH: usize = 100;

/// How an operator takes part in whole-stage code generation (`CollapseCodegenStages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Codegen {
    No,
    Yes,
    /// Generates code inside a stage but never starts one (`LocalTableScan`).
    NotRoot,
    /// Generates code, but each child is its own stage (sort-merge and shuffled hash joins).
    Isolating,
}

/// What the AQE wrapper and the bucketing section need to know about an operator.
#[derive(Debug, Clone)]
pub(super) enum Role {
    Scan {
        status: BucketedStatus,
        bucket_columns: Vec<String>,
    },
    Shuffle {
        partitioning: String,
        reason: Option<String>,
    },
    Broadcast,
    /// Requires a child distribution other than Spark's `UnspecifiedDistribution`.
    NeedsDistribution,
    Other,
}

/// The whole-stage codegen stage an operator belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    None,
    /// Collected into the stage being built, whose id is taken once its children are done.
    Pending,
    Id(u32),
}

#[derive(Debug, Clone)]
pub(super) struct Node {
    /// Spark's `nodeName`, the header of the detail block.
    pub name: String,
    /// The node in the FORMATTED outline (joins add their type and build side).
    pub outline: String,
    /// The node in simple EXPLAIN.
    pub simple: String,
    /// The lines of the FORMATTED detail block after its header.
    pub details: Vec<String>,
    pub output: Vec<Attr>,
    pub children: Vec<Node>,
    pub codegen: Codegen,
    pub role: Role,
    /// Operator id of EXPLAIN FORMATTED, assigned once the tree is final.
    pub id: usize,
    pub stage: Stage,
}

impl Node {
    pub fn new(name: impl Into<String>, simple: impl Into<String>, output: Vec<Attr>, children: Vec<Node>) -> Node {
        let name = name.into();
        Node {
            outline: name.clone(),
            name,
            simple: simple.into(),
            details: Vec::new(),
            output,
            children,
            codegen: Codegen::No,
            role: Role::Other,
            id: 0,
            stage: Stage::None,
        }
    }

    fn details(mut self, details: Vec<String>) -> Node {
        self.details = details;
        self
    }

    fn codegen(mut self, codegen: Codegen) -> Node {
        self.codegen = codegen;
        self
    }

    fn role(mut self, role: Role) -> Node {
        self.role = role;
        self
    }

    /// Spark's `ColumnarToRow`, which turns the Parquet reader's column batches into rows.
    pub fn columnar_to_row(self) -> Node {
        let details = vec![field("Input", &self.output)];
        Node::new("ColumnarToRow", "ColumnarToRow", self.output.clone(), vec![self])
            .details(details)
            .codegen(Codegen::Yes)
    }

    /// Spark's root of an adaptive plan that has not run yet.
    pub fn adaptive(self) -> Node {
        let output = field("Output", &self.output);
        Node::new("AdaptiveSparkPlan", "AdaptiveSparkPlan isFinalPlan=false", self.output.clone(), vec![self])
            .details(vec![output, "Arguments: isFinalPlan=false".into()])
    }
}

/// Spark's `ExplainUtils.generateFieldString` for a list.
pub(super) fn field(name: &str, values: &[impl ToString]) -> String {
    match values.len() {
        0 => format!("{name}: []"),
        n => format!("{name} [{n}]: {}", list(values.iter().map(|v| v.to_string()))),
    }
}

/// Where a node sits, for the few operators Spark prints differently by context.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Position {
    /// The root of the query: a limit there is Spark's `CollectLimit`.
    pub root: bool,
    /// Feeds a join directly or through its sort: sort and partitioning keys are the
    /// join keys, which Spark normalizes when they are floating-point.
    pub join_child: bool,
}

/// Converts a DataFusion plan bottom-up, handing out expression ids as values appear.
#[derive(Default)]
pub(super) struct Converter {
    next_id: u64,
    next_plan_id: u64,
    /// The input attributes of each partial aggregate, by address, for its final aggregate.
    partial_inputs: HashMap<usize, Vec<Attr>>,
}

impl Converter {
    fn fresh(&mut self, name: &str, data_type: DataType, nullable: bool) -> Attr {
        self.next_id += 1;
        Attr { name: name.to_string(), id: self.next_id, data_type, nullable }
    }

    fn fresh_field(&mut self, field: &Field) -> Attr {
        self.fresh(field.name(), field.data_type().clone(), field.is_nullable())
    }

    fn fresh_schema(&mut self, schema: &Schema) -> Vec<Attr> {
        schema.fields().iter().map(|f| self.fresh_field(f)).collect()
    }

    fn plan_id(&mut self) -> u64 {
        self.next_plan_id += 1;
        self.next_plan_id
    }

    pub fn convert(&mut self, plan: &Arc<dyn ExecutionPlan>, at: Position) -> Node {
        if let Some(inner) = transparent(plan) {
            return self.convert(inner, at);
        }
        if let Some(scan) = plan.downcast_ref::<FileSourceScanExec>() {
            self.scan(scan)
        } else if let Some(exchange) = plan.downcast_ref::<ShuffleExchangeExec>() {
            let child = self.convert(exchange.input(), Position::default());
            let partitioning = match exchange.partitioning() {
                ExchangePartitioning::Hash(exprs, n) => {
                    let schema = exchange.input().schema();
                    let columns = Columns::Attrs(&child.output);
                    let keys = exprs
                        .iter()
                        .map(|e| if at.join_child { key(e, &schema, &columns) } else { render(e, &columns) });
                    format!("hashpartitioning({}, {n})", join(keys, ", "))
                }
                ExchangePartitioning::Single => "SinglePartition".to_string(),
            };
            self.exchange(child, partitioning, exchange.reason().map(str::to_string))
        } else if let Some(broadcast) = plan.downcast_ref::<BroadcastExchangeExec>() {
            self.broadcast(broadcast)
        } else if let Some(join) = plan.downcast_ref::<SparkJoinExec>() {
            self.join(join)
        } else if let Some(filter) = plan.downcast_ref::<FilterExec>() {
            self.filter(filter)
        } else if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
            let child = self.convert_named(projection.input(), at, &column_aliases(projection));
            let exprs = projection.expr().iter().map(|p| (Arc::clone(&p.expr), p.alias.clone())).collect();
            self.project(child, exprs, &projection.input().schema())
        } else if let Some(aggregate) = plan.downcast_ref::<AggregateExec>() {
            self.aggregate(aggregate, &[])
        } else if let Some(sort) = plan.downcast_ref::<SortExec>() {
            self.sort(sort, at)
        } else if let Some(merge) = plan.downcast_ref::<SortPreservingMergeExec>() {
            let child = self.convert(merge.input(), Position::default());
            let order =
                list(merge.expr().iter().map(|s| sort_order(render(&s.expr, &Columns::Attrs(&child.output)), s)));
            let arguments = match merge.fetch() {
                Some(fetch) => format!("{order}, {fetch}"),
                None => order,
            };
            unary("SortPreservingMerge", arguments, child, Codegen::No).role(Role::NeedsDistribution)
        } else if let Some(coalesce) = plan.downcast_ref::<CoalescePartitionsExec>() {
            self.coalesce(coalesce, at)
        } else if let Some(limit) = plan.downcast_ref::<GlobalLimitExec>() {
            let fetch = limit.fetch().map_or(-1, |f| f as i64);
            if at.root {
                let child = self.convert(below_collect_limit(limit.input()), Position::default());
                let arguments = if limit.skip() > 0 { format!("{fetch}, {}", limit.skip()) } else { fetch.to_string() };
                unary("CollectLimit", arguments, child, Codegen::No)
            } else {
                let child = self.convert(limit.input(), Position::default());
                unary("GlobalLimit", format!("{fetch}, {}", limit.skip()), child, Codegen::Yes)
                    .role(Role::NeedsDistribution)
            }
        } else if let Some(limit) = plan.downcast_ref::<LocalLimitExec>() {
            let child = self.convert(limit.input(), Position::default());
            unary("LocalLimit", limit.fetch().to_string(), child, Codegen::Yes)
        } else if let Some(window) = window_parts(plan) {
            self.window(window, &plan.schema(), &[])
        } else if plan.is::<UnionExec>() || plan.is::<InterleaveExec>() {
            let children: Vec<Node> =
                plan.children().into_iter().map(|c| self.convert(c, Position::default())).collect();
            let output = children.first().map(|c| c.output.clone()).unwrap_or_default();
            Node::new("Union", "Union", output, children)
        } else if let Some(range) = plan.downcast_ref::<LazyMemoryExec>().and_then(range_arguments) {
            let output = self.fresh_schema(&plan.schema());
            let simple = format!("Range {range}");
            let details = vec![field("Output", &output), format!("Arguments: {simple}")];
            Node::new("Range", simple, output, Vec::new()).details(details).codegen(Codegen::Yes)
        } else if let Some(rows) = local_rows(plan) {
            let output = self.fresh_schema(&plan.schema());
            let arguments = if rows == 0 { format!("<empty>, {}", list(&output)) } else { list(&output) };
            let details = vec![field("Output", &output), format!("Arguments: {arguments}")];
            Node::new("LocalTableScan", format!("LocalTableScan {arguments}"), output, Vec::new())
                .details(details)
                .codegen(Codegen::NotRoot)
        } else if plan.is::<PlaceholderRowExec>() {
            let output = self.fresh_schema(&plan.schema());
            let details = vec![field("Output", &output)];
            Node::new("Scan OneRowRelation", "Scan OneRowRelation[]", output, Vec::new())
                .details(details)
                .codegen(Codegen::Yes)
        } else {
            self.unknown(plan)
        }
    }

    /// Converts the input of a projection. Spark names aggregate and window results after
    /// the select list's aliases, where DataFusion renames them in the projection above.
    fn convert_named(&mut self, plan: &Arc<dyn ExecutionPlan>, at: Position, names: &[Option<String>]) -> Node {
        let inner = below_plumbing(plan);
        if let Some(aggregate) = inner.downcast_ref::<AggregateExec>()
            && aggregate.mode().output_mode() == AggregateOutputMode::Final
        {
            self.aggregate(aggregate, names)
        } else if let Some(window) = window_parts(inner) {
            self.window(window, &inner.schema(), names)
        } else {
            self.convert(plan, at)
        }
    }

    fn scan(&mut self, scan: &FileSourceScanExec) -> Node {
        let table = scan.table();
        let output_schema = scan.schema();
        let table_fields = table_schema(table).map_or_else(|_| output_schema.fields().clone(), |s| s.fields().clone());
        let table_attrs: Vec<Attr> = table_fields.iter().map(|f| self.fresh_field(f)).collect();
        let output: Vec<Attr> = output_schema
            .fields()
            .iter()
            .map(|f| table_attrs.iter().find(|a| a.name == *f.name()).cloned().unwrap_or_else(|| self.fresh_field(f)))
            .collect();
        let columns = Columns::Attrs(&table_attrs);
        let filters = scan.filters();
        let partition_filters: Vec<String> = filters.partition.iter().map(|e| render(e, &columns)).collect();
        let data_filters: Vec<String> = filters.data.iter().map(|e| render(e, &columns)).collect();

        let root = format!("file:{}", table.location.display());
        let (index, paths) = if table.partition_columns.is_empty() {
            ("InMemoryFileIndex", vec![root])
        } else if filters.partition.is_empty() {
            ("CatalogFileIndex", vec![root])
        } else {
            ("InMemoryFileIndex", scan.selected_partitions().iter().map(|p| format!("{root}/{p}")).collect())
        };
        let formatted_location = match paths.as_slice() {
            [first, _, ..] => format!("{index} [{first}, ... {} entries]", paths.len() - 1),
            _ => format!("{index} {}", list(&paths)),
        };
        let mut listed = String::new();
        for path in &paths {
            if listed.len() >= MAX_METADATA_LENGTH {
                break;
            }
            if !listed.is_empty() {
                listed += ", ";
            }
            listed += path;
        }
        let simple_location = format!("{index}({} paths)[{listed}]", paths.len());

        let read_schema = scan.read_schema();
        let read_fields = read_schema.fields().iter().map(|f| format!("{}:{}", f.name(), spark_type(f.data_type())));
        let batched = !output_schema.fields().iter().any(|f| f.data_type().is_nested());
        let provider = table.provider.to_lowercase();
        let format = provider.get(..1).map_or_else(String::new, |first| first.to_uppercase() + &provider[1..]);

        let mut metadata: Vec<(&str, String)> = vec![
            ("Batched", batched.to_string()),
            ("DataFilters", list(&data_filters)),
            ("Format", format),
            ("Location", simple_location),
            ("PartitionFilters", list(&partition_filters)),
            ("PushedFilters", list(&filters.pushed)),
            ("ReadSchema", format!("struct<{}>", join(read_fields, ","))),
        ];
        if let Some(bucketed) = scan.status().explain() {
            metadata.push(("Bucketed", bucketed.to_string()));
        }
        if let (true, Some(selected), Some(spec)) =
            (scan.is_bucketed(), scan.selected_bucket_count(), scan.bucket_spec())
        {
            let coalesced = scan.coalesced_to().map_or_else(String::new, |n| format!(" (Coalesced to {n})"));
            metadata.push(("SelectedBucketsCount", format!("{selected} out of {}{coalesced}", spec.num_buckets)));
        }
        metadata.sort_by_key(|(k, _)| *k);

        let name = format!("Scan {provider} spark_catalog.{}.{}", table.schema, table.name);
        let simple_metadata = metadata.iter().map(|(k, v)| format!("{k}: {}", abbreviate(v, MAX_METADATA_LENGTH)));
        let simple = format!("File{name}[{}] {}", join(&output, ","), join(simple_metadata, ", "));
        let mut details = vec![field("Output", &output)];
        details.extend(
            metadata
                .into_iter()
                .filter(|(k, v)| !matches!(*k, "DataFilters" | "Format") && !v.is_empty() && v != "[]")
                .map(|(k, v)| if k == "Location" { format!("{k}: {formatted_location}") } else { format!("{k}: {v}") }),
        );
        let bucket_columns = scan.bucket_spec().map(|s| s.bucket_columns.clone()).unwrap_or_default();
        Node::new(name, simple, output, Vec::new())
            .details(details)
            .role(Role::Scan { status: scan.status(), bucket_columns })
    }

    fn exchange(&mut self, child: Node, partitioning: String, reason: Option<String>) -> Node {
        let arguments = format!("{partitioning}, ENSURE_REQUIREMENTS, [plan_id={}]", self.plan_id());
        unary("Exchange", arguments, child, Codegen::No).role(Role::Shuffle { partitioning, reason })
    }

    fn broadcast(&mut self, broadcast: &BroadcastExchangeExec) -> Node {
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
        let arguments = format!("HashedRelationBroadcastMode(List({keys}),false), [plan_id={}]", self.plan_id());
        unary("BroadcastExchange", arguments, child, Codegen::No).role(Role::Broadcast)
    }

    fn join(&mut self, join: &SparkJoinExec) -> Node {
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
        let left_keys: Vec<String> =
            join.left_keys().iter().map(|k| key(k, &left_schema, &Columns::Attrs(&left.output))).collect();
        let right_keys: Vec<String> =
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

        let name = spec.strategy.spark_name();
        let join_type = spark_join_type(spec.join_type);
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
            JoinStrategy::Cartesian => condition.as_ref().map_or_else(|| name.to_string(), |c| format!("{name} {c}")),
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
        let mut node = Node::new(name, simple, output, vec![left, right]).details(details).codegen(codegen).role(role);
        node.outline = match build {
            Some(b) => format!("{name} {join_type} {}", b.spark_name()),
            None => format!("{name} {join_type}"),
        };
        node
    }

    fn filter(&mut self, filter: &FilterExec) -> Node {
        let child = self.convert(filter.input(), Position::default());
        let condition = render(filter.predicate(), &Columns::Attrs(&child.output));
        // Spark's FilterExec: columns the condition requires to be non-null are non-null above it.
        let non_null: Vec<usize> = split_conjunction(filter.predicate())
            .into_iter()
            .filter_map(|c| c.downcast_ref::<IsNotNullExpr>()?.arg().downcast_ref::<Column>().map(Column::index))
            .collect();
        let output: Vec<Attr> = child
            .output
            .iter()
            .enumerate()
            .map(|(i, a)| Attr { nullable: a.nullable && !non_null.contains(&i), ..a.clone() })
            .collect();
        let details = vec![field("Input", &child.output), format!("Condition : {condition}")];
        let node = Node::new("Filter", format!("Filter {condition}"), output, vec![child])
            .details(details)
            .codegen(Codegen::Yes);
        match filter.projection() {
            Some(projection) => {
                let schema = filter.input().schema();
                let exprs = projection
                    .iter()
                    .map(|i| {
                        (
                            Arc::new(Column::new(schema.field(*i).name(), *i)) as Arc<dyn PhysicalExpr>,
                            schema.field(*i).name().clone(),
                        )
                    })
                    .collect();
                self.project(node, exprs, &schema)
            }
            None => node,
        }
    }

    /// Spark's `Project`, or its child when it passes the child's columns through unchanged
    /// (`RemoveRedundantProjects`).
    fn project(&mut self, child: Node, exprs: Vec<(Arc<dyn PhysicalExpr>, String)>, input: &Schema) -> Node {
        let passthrough: Vec<Option<Attr>> = exprs
            .iter()
            .map(|(expr, alias)| {
                expr.downcast_ref::<Column>()
                    .and_then(|c| child.output.get(c.index()))
                    .filter(|a| a.name == *alias)
                    .cloned()
            })
            .collect();
        let identity = passthrough.len() == child.output.len()
            && passthrough.iter().zip(&child.output).all(|(p, a)| p.as_ref().is_some_and(|p| p.id == a.id));
        if identity {
            return child;
        }
        let mut output = Vec::new();
        let mut projected = Vec::new();
        for ((expr, alias), passed) in exprs.iter().zip(passthrough) {
            match passed {
                Some(attr) => {
                    projected.push(attr.to_string());
                    output.push(attr);
                }
                None => {
                    let data_type = expr.data_type(input).unwrap_or(DataType::Null);
                    let attr = self.fresh(alias, data_type, expr.nullable(input).unwrap_or(true));
                    projected.push(format!("{} AS {attr}", render(expr, &Columns::Attrs(&child.output))));
                    output.push(attr);
                }
            }
        }
        let details = vec![field("Output", &output), field("Input", &child.output)];
        Node::new("Project", format!("Project {}", list(&projected)), output, vec![child])
            .details(details)
            .codegen(Codegen::Yes)
    }

    /// Spark's `HashAggregate`; `names` renames its results by output position.
    fn aggregate(&mut self, aggregate: &AggregateExec, names: &[Option<String>]) -> Node {
        let child = self.convert(aggregate.input(), Position::default());
        let mode = aggregate.mode();
        let raw_input = mode.input_mode() == AggregateInputMode::Raw;
        let input_schema = aggregate.input().schema();
        let columns = Columns::Attrs(&child.output);

        let mut keys = Vec::new();
        let mut key_attrs = Vec::new();
        for (expr, alias) in aggregate.group_expr().expr() {
            let passed =
                expr.downcast_ref::<Column>().and_then(|c| child.output.get(c.index())).filter(|a| a.name == *alias);
            let text = if raw_input { key(expr, &input_schema, &columns) } else { render(expr, &columns) };
            let attr = match passed {
                Some(attr) => attr.clone(),
                None => {
                    let data_type = expr.data_type(&input_schema).unwrap_or(DataType::Null);
                    self.fresh(alias, data_type, expr.nullable(&input_schema).unwrap_or(true))
                }
            };
            keys.push(if passed.is_some() && text == attr.to_string() { text } else { format!("{text} AS {attr}") });
            key_attrs.push(attr);
        }

        // A merging aggregate's functions read the columns its partial aggregate read.
        let raw_attrs = if raw_input {
            child.output.clone()
        } else {
            self.partial_input_of(aggregate).unwrap_or_else(|| child.output.clone())
        };
        let prefix = match mode {
            AggregateMode::Partial => "partial_",
            AggregateMode::PartialReduce => "merge_",
            _ => "",
        };
        let mut functions = Vec::new();
        let mut aggregate_attrs = Vec::new();
        let mut results = Vec::new();
        let mut output = Vec::new();
        for (i, attr) in key_attrs.iter().enumerate() {
            match names.get(i).and_then(Option::as_ref).filter(|n| **n != attr.name) {
                Some(name) => {
                    let renamed = self.fresh(name, attr.data_type.clone(), attr.nullable);
                    results.push(format!("{attr} AS {renamed}"));
                    output.push(renamed);
                }
                None => {
                    results.push(attr.to_string());
                    output.push(attr.clone());
                }
            }
        }
        let mut buffers = Vec::new();
        for (i, function) in aggregate.aggr_expr().iter().enumerate() {
            let args = join(function.expressions().iter().map(|e| render(e, &Columns::Attrs(&raw_attrs))), ", ");
            let distinct = if function.is_distinct() { "distinct " } else { "" };
            let call = format!("{}({distinct}{args})", function.fun().name());
            let filter = match aggregate.filter_expr().get(i) {
                Some(Some(filter)) if raw_input => format!(" FILTER (WHERE {})", render(filter, &columns)),
                _ => String::new(),
            };
            functions.push(format!("{prefix}{call}{filter}"));
            if mode.output_mode() == AggregateOutputMode::Partial {
                buffers.extend(function.state_fields().unwrap_or_default());
            } else {
                let field = function.field();
                let attr = self.fresh(&call, field.data_type().clone(), field.is_nullable());
                let schema = aggregate.schema();
                let position = key_attrs.len() + i;
                let name = names
                    .get(position)
                    .and_then(Option::as_ref)
                    .or(schema.fields().get(position).map(|f| f.name()))
                    .map_or(function.name(), String::as_str);
                let result = self.fresh(name, field.data_type().clone(), field.is_nullable());
                results.push(format!("{attr} AS {result}"));
                aggregate_attrs.push(attr);
                output.push(result);
            }
        }
        // A partial aggregate's buffers: Spark's `aggBufferAttributes`, then their copies as results.
        for state in &buffers {
            aggregate_attrs.push(self.fresh(state_name(state.name()), state.data_type().clone(), state.is_nullable()));
        }
        for state in &buffers {
            let result = self.fresh(state_name(state.name()), state.data_type().clone(), state.is_nullable());
            results.push(result.to_string());
            output.push(result);
        }
        if raw_input && mode.output_mode() == AggregateOutputMode::Partial {
            self.partial_inputs.insert(address(aggregate), child.output.clone());
        }

        let simple =
            format!("HashAggregate(keys={}, functions={}, output={})", list(&keys), list(&functions), list(&output));
        let details = vec![
            field("Input", &child.output),
            field("Keys", &keys),
            field("Functions", &functions),
            field("Aggregate Attributes", &aggregate_attrs),
            field("Results", &results),
        ];
        let role = match mode.output_mode() {
            AggregateOutputMode::Final => Role::NeedsDistribution,
            AggregateOutputMode::Partial => Role::Other,
        };
        Node::new("HashAggregate", simple, output, vec![child]).details(details).codegen(Codegen::Yes).role(role)
    }

    /// The input attributes of the partial aggregate below a merging one, found through
    /// the exchanges and other single-input operators between them.
    fn partial_input_of(&self, aggregate: &AggregateExec) -> Option<Vec<Attr>> {
        let mut plan = aggregate.input();
        loop {
            if let Some(partial) = plan.downcast_ref::<AggregateExec>() {
                return self.partial_inputs.get(&address(partial)).cloned();
            }
            match plan.children().as_slice() {
                [child] => plan = child,
                _ => return None,
            }
        }
    }

    fn sort(&mut self, sort: &SortExec, at: Position) -> Node {
        let child = self.convert(sort.input(), Position { root: false, join_child: at.join_child });
        let schema = sort.input().schema();
        let columns = Columns::Attrs(&child.output);
        let order = list(sort.expr().iter().map(|s| {
            let text = if at.join_child { key(&s.expr, &schema, &columns) } else { render(&s.expr, &columns) };
            sort_order(text, s)
        }));
        if let Some(limit) = sort.fetch() {
            let arguments = format!("{limit}, {order}, {}", list(&child.output));
            let simple =
                format!("TakeOrderedAndProject(limit={limit}, orderBy={order}, output={})", list(&child.output));
            let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
            return Node::new("TakeOrderedAndProject", simple, child.output.clone(), vec![child]).details(details);
        }
        let global = !sort.preserve_partitioning();
        let node = unary("Sort", format!("{order}, {global}, 0"), child, Codegen::Yes);
        if global { node.role(Role::NeedsDistribution) } else { node }
    }

    fn coalesce(&mut self, coalesce: &CoalescePartitionsExec, at: Position) -> Node {
        if let (Some(fetch), true) = (coalesce.fetch(), at.root) {
            let child = self.convert(below_collect_limit(coalesce.input()), Position::default());
            return unary("CollectLimit", fetch.to_string(), child, Codegen::No);
        }
        let child = self.convert(coalesce.input(), Position::default());
        match coalesce.fetch() {
            Some(fetch) => {
                let gathered = self.exchange(child, "SinglePartition".into(), None);
                unary("GlobalLimit", format!("{fetch}, 0"), gathered, Codegen::Yes).role(Role::NeedsDistribution)
            }
            None => self.exchange(child, "SinglePartition".into(), None),
        }
    }

    /// Spark's `Window`; `names` renames its results by output position.
    fn window(&mut self, (exprs, input): WindowParts, schema: &Schema, names: &[Option<String>]) -> Node {
        let child = self.convert(input, Position::default());
        let columns = Columns::Attrs(&child.output);
        let mut output = child.output.clone();
        let mut windows = Vec::new();
        for (i, expr) in exprs.iter().enumerate() {
            let function = expr.name().split('(').next().unwrap_or_default().to_lowercase();
            let args = join(expr.expressions().iter().map(|e| render(e, &columns)), ", ");
            let spec = expr
                .partition_by()
                .iter()
                .map(|e| render(e, &columns))
                .chain(expr.order_by().iter().map(|s| sort_order(render(&s.expr, &columns), s)))
                .chain([window_frame(expr.get_window_frame())]);
            let position = child.output.len() + i;
            let (data_type, nullable) = schema
                .fields()
                .get(position)
                .map_or((DataType::Null, true), |f| (f.data_type().clone(), f.is_nullable()));
            let name = names.get(position).and_then(Option::as_ref).map_or(expr.name(), String::as_str);
            let attr = self.fresh(name, data_type, nullable);
            windows.push(format!("{function}({args}) windowspecdefinition({}) AS {attr}", join(spec, ", ")));
            output.push(attr);
        }
        let (partition, order) = exprs.first().map_or_else(Default::default, |e| {
            (
                list(e.partition_by().iter().map(|p| render(p, &columns))),
                list(e.order_by().iter().map(|s| sort_order(render(&s.expr, &columns), s))),
            )
        });
        let arguments = format!("{}, {partition}, {order}", list(&windows));
        let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
        Node::new("Window", format!("Window {arguments}"), output, vec![child])
            .details(details)
            .role(Role::NeedsDistribution)
    }

    /// An operator Spark has no name for, shown under DataFusion's.
    fn unknown(&mut self, plan: &Arc<dyn ExecutionPlan>) -> Node {
        let children: Vec<Node> = plan.children().into_iter().map(|c| self.convert(c, Position::default())).collect();
        let schema = plan.schema();
        let output = match children.as_slice() {
            [child]
                if child.output.len() == schema.fields().len()
                    && child.output.iter().zip(schema.fields()).all(|(a, f)| a.name == *f.name()) =>
            {
                child.output.clone()
            }
            _ => self.fresh_schema(&schema),
        };
        let line = displayable(plan.as_ref()).one_line().to_string();
        let line = line.trim();
        let arguments = line.split_once(": ").map(|(_, a)| a.to_string());
        let mut details = match children.as_slice() {
            [] => vec![field("Output", &output)],
            [child] => vec![field("Input", &child.output)],
            _ => Vec::new(),
        };
        details.extend(arguments.map(|a| format!("Arguments: {a}")));
        Node::new(plan.name(), line, output, children).details(details)
    }
}

/// A unary operator whose detail block is Spark's default: `Input` and `Arguments`.
fn unary(name: &str, arguments: String, child: Node, codegen: Codegen) -> Node {
    let details = vec![field("Input", &child.output), format!("Arguments: {arguments}")];
    let output = child.output.clone();
    Node::new(name, format!("{name} {arguments}"), output, vec![child]).details(details).codegen(codegen)
}

/// DataFusion's plumbing that Spark has no operator for: cooperative scheduling, batch
/// coalescing and round-robin spreading of batches over cores.
fn transparent(plan: &Arc<dyn ExecutionPlan>) -> Option<&Arc<dyn ExecutionPlan>> {
    if let Some(cooperative) = plan.downcast_ref::<CooperativeExec>() {
        return Some(cooperative.input());
    }
    if let Some(repartition) = plan.downcast_ref::<RepartitionExec>() {
        return matches!(repartition.partitioning(), Partitioning::RoundRobinBatch(_)).then(|| repartition.input());
    }
    match plan.children().as_slice() {
        [child] if plan.name() == "CoalesceBatchesExec" => Some(*child),
        _ => None,
    }
}

type WindowParts<'a> = (&'a [Arc<dyn WindowExpr>], &'a Arc<dyn ExecutionPlan>);

/// The window expressions and input of either of DataFusion's window operators.
fn window_parts(plan: &Arc<dyn ExecutionPlan>) -> Option<WindowParts<'_>> {
    if let Some(window) = plan.downcast_ref::<WindowAggExec>() {
        return Some((window.window_expr(), window.input()));
    }
    plan.downcast_ref::<BoundedWindowAggExec>().map(|w| (w.window_expr(), w.input()))
}

/// The name a projection gives each of its input's columns, by input position.
fn column_aliases(projection: &ProjectionExec) -> Vec<Option<String>> {
    let mut names = vec![None; projection.input().schema().fields().len()];
    for p in projection.expr() {
        if let Some(name) = p.expr.downcast_ref::<Column>().and_then(|c| names.get_mut(c.index())) {
            name.get_or_insert_with(|| p.alias.clone());
        }
    }
    names
}

fn below_plumbing(mut plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    while let Some(inner) = transparent(plan) {
        plan = inner;
    }
    plan
}

/// The input of Spark's `CollectLimit`, which gathers and limits by itself: DataFusion's
/// gathering and per-partition limits below a root limit are part of it.
fn below_collect_limit(mut plan: &Arc<dyn ExecutionPlan>) -> &Arc<dyn ExecutionPlan> {
    loop {
        plan = if let Some(inner) = transparent(plan) {
            inner
        } else if let Some(coalesce) = plan.downcast_ref::<CoalescePartitionsExec>() {
            coalesce.input()
        } else if let Some(limit) = plan.downcast_ref::<LocalLimitExec>() {
            limit.input()
        } else {
            return plan;
        };
    }
}

fn address<T>(value: &T) -> usize {
    value as *const T as usize
}

/// `count` from DataFusion's state field name `count(x)[count]`.
fn state_name(name: &str) -> &str {
    name.rsplit_once('[').and_then(|(_, rest)| rest.strip_suffix(']')).unwrap_or(name)
}

/// Spark's `Range (start, end, step=s, splits=n)` of our `range()` table function, read
/// from its generators' `Range: start=.., step=.., rows=..` descriptions.
fn range_arguments(exec: &LazyMemoryExec) -> Option<String> {
    let mut parts = Vec::new();
    for generator in exec.generators() {
        let text = generator.read().to_string();
        let mut values =
            text.strip_prefix("Range: ")?.split(", ").map(|kv| kv.split_once('=').map(|(_, v)| v.parse::<i128>()));
        let mut next = || values.next().flatten().and_then(Result::ok);
        parts.push((next()?, next()?, next()?));
    }
    let (start, step, _) = *parts.first()?;
    let rows: i128 = parts.iter().map(|(_, _, rows)| rows).sum();
    Some(format!("({start}, {}, step={step}, splits={})", start + rows * step, parts.len()))
}

/// The number of rows of an in-memory relation (`VALUES`, empty relations).
fn local_rows(plan: &Arc<dyn ExecutionPlan>) -> Option<usize> {
    if plan.is::<EmptyExec>() {
        return Some(0);
    }
    let memory = plan.downcast_ref::<DataSourceExec>()?.data_source().downcast_ref::<MemorySourceConfig>()?;
    Some(memory.partitions().iter().flatten().map(|b| b.num_rows()).sum())
}

/// Commons-lang `StringUtils.abbreviate`, as Spark applies it to scan metadata.
fn abbreviate(value: &str, width: usize) -> String {
    if value.chars().count() <= width {
        value.to_string()
    } else {
        format!("{}...", value.chars().take(width - 3).collect::<String>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(state_name("sum(t.amount)[sum]"), "sum");
        assert_eq!(abbreviate("abcdef", 5), "ab...");
        assert_eq!(field("Keys", &[] as &[&str]), "Keys: []");
        assert_eq!(field("Keys", &["a", "b"]), "Keys [2]: [a, b]");
    }
}

//! Spark's `Generate`: each row beside the rows a generator (`explode`, `posexplode`, `inline`,
//! `stack`, their `_outer` forms) makes of it. Spark's analyzer builds it from
//! `LATERAL VIEW [OUTER] gen(…) v AS c…` (`ResolveGenerate`) and from a generator in a select
//! list (`ExtractGenerator`). The SQL layer writes both as a lateral table function,
//! `CROSS JOIN LATERAL gen(…) AS v(c…)`; [`GeneratorRelations`] plans that as a join to a scan
//! of a [`GeneratorTable`] whose arguments name the left side's columns, and this rule makes the
//! join what Spark's `Generate` is: the left side's rows, each with the list of rows its
//! generator makes (`exec::generate`), unnested, the rows' fields becoming the view's
//! columns. A generator with nothing before it (`SELECT * FROM explode(array(1, 2))`)
//! generates from one empty row.
//!
//! Where we differ: EXPLAIN shows DataFusion's `UnnestExec` under a projection where Spark
//! shows `Generate`.

use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DFSchema, ScalarValue, TableReference, UnnestOptions, internal_err, plan_err};
use datafusion::datasource::{provider_as_source, source_as_provider};
use datafusion::error::Result;
use datafusion::functions::core::expr_fn::get_field;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{PlannedRelation, RelationPlanner, RelationPlannerContext, RelationPlanning};
use datafusion::logical_expr::{
    EmptyRelation, Expr, ExprSchemable, JoinType, LogicalPlan, LogicalPlanBuilder, TableScan, TableType,
};
use datafusion::optimizer::AnalyzerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::sqlparser::ast::{FunctionArg, FunctionArgExpr, TableFactor};

use crate::exec::generate::Generator;

/// Plans a generator named in a FROM clause (`explode(…) AS v(c)`, lateral or not) as a scan
/// of its [`GeneratorTable`]. Its arguments are planned with no columns of their own, so the
/// columns they name on a lateral call's left side are outer references, typed.
#[derive(Debug)]
pub struct GeneratorRelations;

impl RelationPlanner for GeneratorRelations {
    fn plan_relation(
        &self,
        relation: TableFactor,
        context: &mut dyn RelationPlannerContext,
    ) -> Result<RelationPlanning> {
        let (name, args, alias) = match &relation {
            TableFactor::Function { name, args, alias, .. } => (name, args.clone(), alias),
            TableFactor::Table { name, args: Some(args), alias, .. } => (name, args.args.clone(), alias),
            _ => return Ok(RelationPlanning::Original(Box::new(relation))),
        };
        let generator = match name.0.as_slice() {
            [part] => part.as_ident().and_then(|ident| Generator::named(&ident.value)),
            _ => None,
        };
        let Some(generator) = generator else {
            return Ok(RelationPlanning::Original(Box::new(relation)));
        };
        let no_columns = DFSchema::empty();
        let mut args = args
            .into_iter()
            .map(|arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => {
                    context.sql_expr_to_logical_expr(expr, &no_columns)
                }
                other => plan_err!("{} takes plain arguments, not {other}", generator.name()),
            })
            .collect::<Result<Vec<_>>>()?;
        let types = args.iter().map(|a| a.get_type(&no_columns)).collect::<Result<Vec<_>>>()?;
        let row_count = args.first().and_then(literal);
        let fields = generator.output_fields(&types, row_count.as_ref())?;
        // `stack`'s row count, folded, for the rows function to read as a literal.
        if let (Some(count), Some(first)) = (row_count, args.first_mut()) {
            *first = Expr::Literal(count, None);
        }
        let table = GeneratorTable { generator, args, schema: Arc::new(Schema::new(fields)) };
        let plan = LogicalPlanBuilder::scan(generator.name(), provider_as_source(Arc::new(table)), None)?.build()?;
        Ok(RelationPlanning::Planned(Box::new(PlannedRelation::new(plan, alias.clone()))))
    }
}

/// A literal, through the casts that narrowed it.
fn literal(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) => Some(value.clone()),
        Expr::Cast(cast) => literal(&cast.expr)?.cast_to(cast.field.data_type()).ok(),
        _ => None,
    }
}

/// The columns a generator adds, as a table DataFusion's SQL planner can name and alias. It is
/// never scanned: [`Generate`] replaces it.
#[derive(Debug)]
pub struct GeneratorTable {
    generator: Generator,
    /// The arguments, where the left side's columns are outer references.
    args: Vec<Expr>,
    schema: SchemaRef,
}

#[async_trait]
impl TableProvider for GeneratorTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        _projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        internal_err!("{} is planned by the Generate rule, not scanned", self.generator.name())
    }
}

#[derive(Debug, Default)]
pub struct Generate;

impl AnalyzerRule for Generate {
    fn name(&self) -> &str {
        "generate"
    }

    fn analyze(&self, plan: LogicalPlan, _: &ConfigOptions) -> Result<LogicalPlan> {
        let mut generated = 0;
        plan.transform_down_with_subqueries(|node| {
            let generator_join = match &node {
                LogicalPlan::Join(join)
                    if join.join_type == JoinType::Inner && join.on.is_empty() && join.filter.is_none() =>
                {
                    generator_table(&join.right)?
                }
                _ => None,
            };
            if let (Some(table), LogicalPlan::Join(join)) = (generator_join, &node) {
                generated += 1;
                let left_width = join.left.schema().fields().len();
                let output: Vec<(Option<TableReference>, String)> = join
                    .schema
                    .iter()
                    .skip(left_width)
                    .map(|(qualifier, field)| (qualifier.cloned(), field.name().clone()))
                    .collect();
                let plan = generate(Arc::unwrap_or_clone(Arc::clone(&join.left)), &table, output, generated)?;
                return Ok(Transformed::yes(plan));
            }
            if let LogicalPlan::TableScan(scan) = &node
                && let Some(table) = scanned_generator(scan)?
            {
                generated += 1;
                let output = scan
                    .projected_schema
                    .iter()
                    .map(|(qualifier, field)| (qualifier.cloned(), field.name().clone()))
                    .collect();
                let one_row = LogicalPlan::EmptyRelation(EmptyRelation {
                    produce_one_row: true,
                    schema: Arc::new(DFSchema::empty()),
                });
                return Ok(Transformed::yes(generate(one_row, &table, output, generated)?));
            }
            Ok(Transformed::no(node))
        })
        .map(|t| t.data)
    }
}

/// The generator `plan` scans, under the aliases and renames the SQL planner put on it.
fn generator_table(plan: &LogicalPlan) -> Result<Option<Arc<GeneratorTable>>> {
    match plan {
        LogicalPlan::SubqueryAlias(alias) => generator_table(&alias.input),
        LogicalPlan::Projection(projection)
            if projection.expr.iter().all(|e| matches!(e.clone().unalias(), Expr::Column(_))) =>
        {
            generator_table(&projection.input)
        }
        LogicalPlan::TableScan(scan) => scanned_generator(scan),
        _ => Ok(None),
    }
}

fn scanned_generator(scan: &TableScan) -> Result<Option<Arc<GeneratorTable>>> {
    let provider = source_as_provider(&scan.source)?;
    if !provider.is::<GeneratorTable>() {
        return Ok(None);
    }
    if scan.projection.as_ref().is_some_and(|p| p.len() != provider.schema().fields().len()) {
        return internal_err!("a generator's columns were pruned before the Generate rule");
    }
    let any: Arc<dyn Any + Send + Sync> = provider;
    Ok(any.downcast::<GeneratorTable>().ok())
}

/// `input`'s columns, then the generated ones named `output` (in the generator's order):
/// `input` with each row's list of generated rows, unnested, and the rows' fields taken out.
fn generate(
    input: LogicalPlan,
    table: &GeneratorTable,
    output: Vec<(Option<TableReference>, String)>,
    number: usize,
) -> Result<LogicalPlan> {
    let rows = format!("__generated_rows_{number}");
    let args = table
        .args
        .iter()
        .map(|arg| {
            arg.clone()
                .transform(|e| match e {
                    Expr::OuterReferenceColumn(_, column) => Ok(Transformed::yes(Expr::Column(column))),
                    e => Ok(Transformed::no(e)),
                })
                .map(|t| t.data)
        })
        .collect::<Result<Vec<_>>>()?;
    let input_columns: Vec<Expr> = input.schema().columns().into_iter().map(Expr::Column).collect();
    let generated_rows = Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(table.generator.rows_udf()), args));
    let unnested = LogicalPlanBuilder::from(input)
        .project(input_columns.iter().cloned().chain([generated_rows.alias(&rows)]))?
        .unnest_column_with_options(rows.as_str(), UnnestOptions::new().with_preserve_nulls(false))?
        .build()?;
    let fields = table.schema.fields().iter().zip(output).map(|(field, (qualifier, name))| {
        get_field(Expr::Column(rows.as_str().into()), field.name().as_str()).alias_qualified(qualifier, name)
    });
    LogicalPlanBuilder::from(unnested).project(input_columns.into_iter().chain(fields))?.build()
}

//! Spark's `GenerateExec`: the rows a generator (`explode`, `posexplode`, `inline`, `stack` and
//! their `_outer` forms) makes of each input row, beside that row's own columns.
//!
//! Here a generator is a function that gives each input row a list of structs, one struct per
//! output row; DataFusion's unnest then spreads the list into rows and the planner's `Generate`
//! rule takes the struct's fields out as columns. Spark's rules are kept: a NULL or empty
//! collection makes no row, or under `_outer` one row of NULLs; `posexplode` counts from 0;
//! `inline` of a NULL struct is a row of NULLs; `stack(n, …)` makes `n` rows, filling the last
//! with NULLs.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Int32Array, ListArray, StructArray, UInt32Array, new_null_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{interleave, take};
use datafusion::arrow::datatypes::{ArrowNativeType, DataType, Field, FieldRef, Fields};
use datafusion::common::{ScalarValue, exec_err};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use crate::error::SqlError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Explode,
    PosExplode,
    Inline,
    Stack,
}

/// One of Spark's generators, by its SQL name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Generator {
    kind: Kind,
    /// `_outer`: a NULL or empty collection makes one row of NULLs instead of none.
    outer: bool,
}

impl Generator {
    pub fn named(name: &str) -> Option<Self> {
        let name = name.to_ascii_lowercase();
        let (base, outer) = match name.strip_suffix("_outer") {
            Some(base) => (base, true),
            None => (name.as_str(), false),
        };
        let kind = match base {
            "explode" => Kind::Explode,
            "posexplode" => Kind::PosExplode,
            "inline" => Kind::Inline,
            "stack" if !outer => Kind::Stack,
            _ => return None,
        };
        Some(Generator { kind, outer })
    }

    pub fn name(&self) -> String {
        let base = match self.kind {
            Kind::Explode => "explode",
            Kind::PosExplode => "posexplode",
            Kind::Inline => "inline",
            Kind::Stack => "stack",
        };
        if self.outer { format!("{base}_outer") } else { base.to_string() }
    }

    /// The columns this generator adds, named as Spark names them (`col`, `key` and `value`,
    /// `pos`, an inlined struct's fields, `col0` … for `stack`), from its arguments' types and,
    /// for `stack`, the literal row count.
    pub fn output_fields(&self, args: &[DataType], row_count: Option<&ScalarValue>) -> Result<Fields> {
        let mut fields = Vec::new();
        match self.kind {
            Kind::Explode | Kind::PosExplode => {
                let [collection] = args else {
                    return self.wrong_argument_count(args.len(), "1");
                };
                if self.kind == Kind::PosExplode {
                    fields.push(Field::new("pos", DataType::Int32, true));
                }
                match collection {
                    DataType::List(element) | DataType::LargeList(element) => {
                        fields.push(Field::new("col", element.data_type().clone(), true));
                    }
                    DataType::Map(entries, _) => match entries.data_type() {
                        DataType::Struct(kv) if kv.len() == 2 => {
                            fields.push(Field::new("key", kv[0].data_type().clone(), true));
                            fields.push(Field::new("value", kv[1].data_type().clone(), true));
                        }
                        other => return exec_err!("a map's entries of type {other}"),
                    },
                    other => return self.unexpected_type(other, "(\"ARRAY\" or \"MAP\")"),
                }
            }
            Kind::Inline => {
                let [collection] = args else {
                    return self.wrong_argument_count(args.len(), "1");
                };
                match collection {
                    DataType::List(element) | DataType::LargeList(element) => match element.data_type() {
                        DataType::Struct(members) => {
                            fields.extend(members.iter().map(|m| m.as_ref().clone().with_nullable(true)));
                        }
                        other => return self.unexpected_type(other, "\"ARRAY<STRUCT>\""),
                    },
                    other => return self.unexpected_type(other, "\"ARRAY<STRUCT>\""),
                }
            }
            Kind::Stack => return Ok(stack_columns(args, row_count)?.fields()),
        }
        Ok(Fields::from(fields))
    }

    /// The function that gives each input row its list of output rows, as structs of
    /// [`Generator::output_fields`].
    pub fn rows_udf(&self) -> ScalarUDF {
        ScalarUDF::new_from_impl(GeneratorRows {
            generator: *self,
            name: self.name(),
            signature: Signature::variadic_any(Volatility::Immutable),
        })
    }

    fn wrong_argument_count<T>(&self, got: usize, expected: &str) -> Result<T> {
        Err(DataFusionError::from(SqlError::new(
            "42605",
            format!(
                "[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The `{}` requires {expected} parameters but the actual number is {got}.",
                self.name()
            ),
        )))
    }

    fn unexpected_type<T>(&self, got: &DataType, required: &str) -> Result<T> {
        Err(DataFusionError::from(SqlError::new(
            "42K09",
            format!(
                "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve \"{}\" due to data type mismatch: The first parameter requires {required} type, however the argument has the type \"{}\".",
                self.name(),
                crate::catalog::types::SparkType::from_arrow(got).map_or_else(|_| got.to_string(), |t| t.ddl_name())
            ),
        )))
    }
}

/// `stack(n, v1, …, vk)`: `n` rows of `ceil(k / n)` columns, each column of one type.
struct StackColumns {
    rows: usize,
    types: Vec<DataType>,
}

impl StackColumns {
    /// Spark's names for the columns: `col0`, `col1`, ….
    fn fields(&self) -> Fields {
        self.types.iter().enumerate().map(|(c, ty)| Field::new(format!("col{c}"), ty.clone(), true)).collect()
    }
}

fn stack_columns(args: &[DataType], row_count: Option<&ScalarValue>) -> Result<StackColumns> {
    let rows = match row_count.map(|n| n.cast_to(&DataType::Int64)) {
        Some(Ok(ScalarValue::Int64(Some(n)))) if n > 0 && args.first().is_some_and(DataType::is_integer) => n as usize,
        _ => {
            return Err(DataFusionError::from(SqlError::new(
                "42K09",
                "[DATATYPE_MISMATCH.NON_FOLDABLE_INPUT] Cannot resolve \"stack\" due to data type mismatch: the input n should be a foldable positive \"INT\" expression.".to_string(),
            )));
        }
    };
    let values = &args[1..];
    if values.is_empty() {
        return Err(DataFusionError::from(SqlError::new(
            "42605",
            "[WRONG_NUM_ARGS.WITHOUT_SUGGESTION] The `stack` requires > 1 parameters but the actual number is 1."
                .to_string(),
        )));
    }
    let width = values.len().div_ceil(rows);
    let mut types = vec![DataType::Null; width];
    for (i, ty) in values.iter().enumerate() {
        let column = &mut types[i % width];
        if *column == DataType::Null {
            *column = ty.clone();
        } else if *ty != DataType::Null && ty != column {
            return Err(DataFusionError::from(SqlError::new(
                "42K09",
                format!(
                    "[DATATYPE_MISMATCH.STACK_COLUMN_DIFF_TYPES] Cannot resolve \"stack\" due to data type mismatch: The data type of the column ({}) do not have the same type: {column} <> {ty}.",
                    i % width
                ),
            )));
        }
    }
    Ok(StackColumns { rows, types })
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct GeneratorRows {
    generator: Generator,
    name: String,
    signature: Signature,
}

impl ScalarUDFImpl for GeneratorRows {
    fn name(&self) -> &str {
        &self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        exec_err!("the rows of {} are typed by its arguments", self.name)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        let types: Vec<DataType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let row_count = args.scalar_arguments.first().copied().flatten();
        let fields = self.generator.output_fields(&types, row_count)?;
        Ok(Arc::new(Field::new(&self.name, rows_type(fields), true)))
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let row_count = match args.args.first() {
            Some(ColumnarValue::Scalar(n)) => Some(n.clone()),
            _ => None,
        };
        let types: Vec<DataType> = args.arg_fields.iter().map(|f| f.data_type().clone()).collect();
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (fields, (offsets, children)) = match self.generator.kind {
            Kind::Stack => {
                let columns = stack_columns(&types, row_count.as_ref())?;
                (columns.fields(), stack(&arrays[1..], &columns, args.number_rows)?)
            }
            _ => (self.generator.output_fields(&types, None)?, spread(&arrays[0], self.generator)?),
        };
        let len = offsets.last().copied().unwrap_or(0) as usize;
        let structs = StructArray::try_new_with_length(fields.clone(), children, None, len)?;
        let list = ListArray::try_new(row_field(fields), OffsetBuffer::new(offsets.into()), Arc::new(structs), None)?;
        Ok(ColumnarValue::Array(Arc::new(list)))
    }
}

/// The type of a generator's rows for one input row.
pub fn rows_type(fields: Fields) -> DataType {
    DataType::List(row_field(fields))
}

fn row_field(fields: Fields) -> FieldRef {
    Arc::new(Field::new("item", DataType::Struct(fields), true))
}

/// Output offsets per input row, and the output columns.
type Rows = (Vec<i32>, Vec<ArrayRef>);

/// `explode`, `posexplode` and `inline`: one output row per element of each input row's
/// collection, taken from the collection's values by index (`None`: a row of NULLs).
fn spread(collection: &ArrayRef, generator: Generator) -> Result<Rows> {
    let Some(CollectionEntries { ranges: starts, keys, values }) = collection_entries(collection) else {
        return exec_err!("{} of {}", generator.name(), collection.data_type());
    };
    let values: Vec<ArrayRef> = keys.into_iter().chain([values]).collect();
    let (values, element_nulls) = match generator.kind {
        Kind::Inline => {
            let structs = values[0].as_struct();
            (structs.columns().to_vec(), structs.logical_nulls())
        }
        _ => (values, None),
    };
    let nulls = collection.logical_nulls();
    let mut offsets = Vec::with_capacity(starts.len() + 1);
    offsets.push(0i32);
    let mut indices: Vec<Option<u32>> = Vec::new();
    let mut positions: Vec<Option<i32>> = Vec::new();
    for (row, &(start, end)) in starts.iter().enumerate() {
        let present = !nulls.as_ref().is_some_and(|n| n.is_null(row));
        if present && end > start {
            for j in start..end {
                let element_null = element_nulls.as_ref().is_some_and(|n| n.is_null(j));
                indices.push(if element_null { None } else { Some(index(j)?) });
                positions.push(Some(i32::try_from(j - start).map_err(|_| overflow())?));
            }
        } else if generator.outer {
            indices.push(None);
            positions.push(None);
        }
        offsets.push(i32::try_from(indices.len()).map_err(|_| overflow())?);
    }
    let indices = UInt32Array::from(indices);
    let mut columns = Vec::new();
    if generator.kind == Kind::PosExplode {
        columns.push(Arc::new(Int32Array::from(positions)) as ArrayRef);
    }
    for values in values {
        columns.push(take(values.as_ref(), &indices, None)?);
    }
    Ok((offsets, columns))
}

/// A list's or a map's entries: each row's range of them, a map's keys and the values.
pub struct CollectionEntries {
    pub ranges: Vec<(usize, usize)>,
    pub keys: Option<ArrayRef>,
    pub values: ArrayRef,
}

/// The entries of `collection`; `None` unless it is a list or a map.
pub fn collection_entries(collection: &ArrayRef) -> Option<CollectionEntries> {
    fn ranges<O: ArrowNativeType>(offsets: &[O]) -> Vec<(usize, usize)> {
        offsets.windows(2).map(|w| (w[0].as_usize(), w[1].as_usize())).collect()
    }
    let (ranges, keys, values) = match collection.data_type() {
        DataType::List(_) => {
            let list = collection.as_list::<i32>();
            (ranges(list.value_offsets()), None, list.values())
        }
        DataType::LargeList(_) => {
            let list = collection.as_list::<i64>();
            (ranges(list.value_offsets()), None, list.values())
        }
        DataType::Map(..) => {
            let map = collection.as_map();
            (ranges(map.value_offsets()), Some(Arc::clone(map.keys())), map.values())
        }
        _ => return None,
    };
    Some(CollectionEntries { ranges, keys, values: Arc::clone(values) })
}

fn index(j: usize) -> Result<u32> {
    u32::try_from(j).map_err(|_| overflow())
}

fn overflow() -> DataFusionError {
    DataFusionError::from(SqlError::new("54000", "a generator's output for one batch is too large".to_string()))
}

/// `stack(n, v…)`: row `r` of each input row takes values `r * width` … of its arguments.
fn stack(values: &[ArrayRef], columns: &StackColumns, input_rows: usize) -> Result<Rows> {
    let width = columns.types.len();
    let offsets = (0..=input_rows)
        .map(|i| i32::try_from(i * columns.rows).map_err(|_| overflow()))
        .collect::<Result<Vec<_>>>()?;
    let mut output = Vec::with_capacity(width);
    for (c, ty) in columns.types.iter().enumerate() {
        let mut sources: Vec<ArrayRef> = Vec::new();
        for r in 0..columns.rows {
            let source = match values.get(r * width + c) {
                Some(v) if v.data_type() == ty => Arc::clone(v),
                Some(v) => datafusion::arrow::compute::cast(v, ty)?,
                None => new_null_array(ty, input_rows),
            };
            sources.push(source);
        }
        let pick: Vec<(usize, usize)> = (0..input_rows).flat_map(|i| (0..columns.rows).map(move |r| (r, i))).collect();
        let sources: Vec<&dyn Array> = sources.iter().map(|s| s.as_ref()).collect();
        output.push(interleave(&sources, &pick)?);
    }
    Ok((offsets, output))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Int64Array, Int64Builder, MapBuilder, StringBuilder};
    use datafusion::arrow::datatypes::Int32Type;

    use super::*;

    fn rows_of(list: &ListArray) -> Vec<Vec<String>> {
        (0..list.len())
            .map(|i| {
                let structs = list.value(i);
                let structs = structs.as_struct();
                (0..structs.len())
                    .map(|j| {
                        structs
                            .columns()
                            .iter()
                            .map(|c| ScalarValue::try_from_array(c, j).unwrap().to_string())
                            .collect::<Vec<_>>()
                            .join("|")
                    })
                    .collect()
            })
            .collect()
    }

    fn generate(name: &str, args: Vec<ColumnarValue>, rows: usize) -> Vec<Vec<String>> {
        let generator = Generator::named(name).unwrap();
        let udf = generator.rows_udf();
        let arg_fields: Vec<FieldRef> = args.iter().map(|a| Arc::new(Field::new("a", a.data_type(), true))).collect();
        let scalars: Vec<Option<&ScalarValue>> =
            args.iter().map(|a| if let ColumnarValue::Scalar(s) = a { Some(s) } else { None }).collect();
        let return_field = udf
            .return_field_from_args(ReturnFieldArgs { arg_fields: &arg_fields, scalar_arguments: &scalars })
            .unwrap();
        let out = udf
            .invoke_with_args(ScalarFunctionArgs {
                args,
                arg_fields,
                number_rows: rows,
                return_field,
                config_options: Arc::default(),
            })
            .unwrap();
        let ColumnarValue::Array(out) = out else { panic!("not an array") };
        rows_of(out.as_list::<i32>())
    }

    #[test]
    fn explode_skips_null_and_empty_lists_and_outer_keeps_them_as_nulls() {
        let list = || {
            ColumnarValue::Array(Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(vec![
                Some(vec![Some(1), None]),
                None,
                Some(vec![]),
            ])))
        };
        assert_eq!(generate("explode", vec![list()], 3), vec![vec!["1", "NULL"], vec![], vec![]]);
        assert_eq!(generate("explode_outer", vec![list()], 3), vec![vec!["1", "NULL"], vec!["NULL"], vec!["NULL"]]);
        assert_eq!(generate("posexplode", vec![list()], 3), vec![vec!["0|1", "1|NULL"], vec![], vec![]]);
    }

    #[test]
    fn explode_of_a_map_gives_keys_and_values() {
        let mut map = MapBuilder::new(None, StringBuilder::new(), Int64Builder::new());
        map.keys().append_value("a");
        map.values().append_value(1);
        map.keys().append_value("b");
        map.values().append_null();
        map.append(true).unwrap();
        let map = ColumnarValue::Array(Arc::new(map.finish()));
        assert_eq!(generate("posexplode", vec![map], 1), vec![vec!["0|a|1", "1|b|NULL"]]);
    }

    #[test]
    fn stack_fills_its_last_row_with_nulls() {
        let args = vec![
            ColumnarValue::Scalar(ScalarValue::Int32(Some(2))),
            ColumnarValue::Array(Arc::new(Int64Array::from(vec![1, 10]))),
            ColumnarValue::Scalar(ScalarValue::Int64(Some(2))),
            ColumnarValue::Scalar(ScalarValue::Int64(Some(3))),
        ];
        assert_eq!(generate("stack", args, 2), vec![vec!["1|2", "3|NULL"], vec!["10|2", "3|NULL"]]);
        let mixed = vec![
            ColumnarValue::Scalar(ScalarValue::Int32(Some(1))),
            ColumnarValue::Scalar(ScalarValue::Int32(Some(1))),
            ColumnarValue::Scalar(ScalarValue::Int32(Some(1))),
        ];
        let generator = Generator::named("stack").unwrap();
        let types = [DataType::Int32, DataType::Int32, DataType::Utf8];
        assert!(generator.output_fields(&types, Some(&ScalarValue::Int32(Some(2)))).is_err());
        assert_eq!(generate("stack", mixed, 1), vec![vec!["1|1"]]);
    }
}

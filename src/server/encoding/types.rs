//! Which PostgreSQL type each Arrow type is sent as (the facts themselves live in
//! `pg_catalog::types`, which also answers catalog queries about them), the
//! RowDescription fields built from that, and the text/binary format codes of Bind.

use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};
use pgwire::api::Type;
use pgwire::api::portal::Format;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::error::{PgWireError, PgWireResult};

use super::user_error;
use crate::sql::pg_catalog::types as pg_types;

pub(super) fn unsupported_type(dt: &DataType) -> PgWireError {
    user_error("0A000", format!("data type {dt} is not supported by the PostgreSQL protocol layer"))
}

/// The PostgreSQL type a column of `dt` is sent as, with its `pg_type.typlen`,
/// which PostgreSQL sends in every RowDescription.
fn wire_type(dt: &DataType) -> PgWireResult<(Type, i16)> {
    let (ty, array) = pg_types::sent_as(dt).ok_or_else(|| unsupported_type(dt))?;
    let wire = u32::try_from(ty.oid_of(array)).ok().and_then(Type::from_oid).ok_or_else(|| unsupported_type(dt))?;
    Ok((wire, ty.len_of(array)))
}

/// The PostgreSQL type a column of `dt` is sent as (built-in OIDs only, see
/// `pg_catalog::types::sent_as`).
pub fn pg_type(dt: &DataType) -> PgWireResult<Type> {
    wire_type(dt).map(|(ty, _)| ty)
}

/// The Arrow type a parameter declared as `pg` is planned and decoded as.
/// `None` for UNKNOWN and types without a dedicated decoder, so the planner
/// infers the type from the placeholder's context instead.
pub fn arrow_type(pg: &Type) -> Option<DataType> {
    Some(match *pg {
        Type::BOOL => DataType::Boolean,
        Type::INT2 => DataType::Int16,
        Type::INT4 => DataType::Int32,
        Type::INT8 | Type::OID => DataType::Int64,
        Type::FLOAT4 => DataType::Float32,
        Type::FLOAT8 => DataType::Float64,
        // DataFusion's own default for an unconstrained DECIMAL.
        Type::NUMERIC => DataType::Decimal128(38, 10),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => DataType::Utf8,
        Type::BYTEA => DataType::Binary,
        Type::DATE => DataType::Date32,
        Type::TIME => DataType::Time64(TimeUnit::Microsecond),
        Type::TIMESTAMP => DataType::Timestamp(TimeUnit::Microsecond, None),
        Type::TIMESTAMPTZ => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        _ => return None,
    })
}

/// The wire format of each of `count` values. `Format::format_for` indexes
/// per-column codes unchecked, so a Bind with the wrong number of codes is
/// answered with PostgreSQL's protocol violation instead of a panic.
pub(super) fn resolve_formats(
    format: &Format,
    count: usize,
    mismatch: impl FnOnce(usize) -> String,
) -> PgWireResult<Vec<FieldFormat>> {
    match format {
        Format::UnifiedText => Ok(vec![FieldFormat::Text; count]),
        Format::UnifiedBinary => Ok(vec![FieldFormat::Binary; count]),
        Format::Individual(codes) if codes.len() != count => Err(user_error("08P01", mismatch(codes.len()))),
        Format::Individual(codes) => codes
            .iter()
            .map(|&code| match code {
                0 => Ok(FieldFormat::Text),
                1 => Ok(FieldFormat::Binary),
                _ => Err(user_error("22023", format!("unsupported format code: {code}"))),
            })
            .collect(),
    }
}

/// RowDescription fields for `schema`, each in the wire format the client
/// asked for in `format`.
pub fn field_infos(schema: &Schema, format: &Format) -> PgWireResult<Vec<FieldInfo>> {
    let columns = schema.fields().len();
    let formats = resolve_formats(format, columns, |codes| {
        format!("bind message has {codes} result formats but query has {columns} columns")
    })?;
    schema
        .fields()
        .iter()
        .zip(formats)
        .map(|(field, format)| {
            let (ty, size) = wire_type(field.data_type())?;
            Ok(FieldInfo::new(field.name().clone(), None, None, ty, format)
                .with_type_modifier(pg_types::type_modifier(field.data_type()))
                .with_type_size(size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Arc;

    use datafusion::arrow::array::new_empty_array;
    use datafusion::arrow::datatypes::{Field, IntervalUnit, UnionFields, UnionMode};

    use super::super::test_support::code;

    #[test]
    fn maps_arrow_types_to_pg_types() {
        let utf8_list = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
        let cases = [
            (DataType::Boolean, Type::BOOL),
            (DataType::Struct(vec![Field::new("a", DataType::Int32, true)].into()), Type::JSON),
            (DataType::List(Arc::new(Field::new("item", utf8_list.clone(), true))), Type::JSON_ARRAY),
            (DataType::Int8, Type::INT2),
            (DataType::Int16, Type::INT2),
            (DataType::UInt8, Type::INT2),
            (DataType::Int32, Type::INT4),
            (DataType::UInt16, Type::INT4),
            (DataType::Int64, Type::INT8),
            (DataType::UInt32, Type::INT8),
            (DataType::UInt64, Type::NUMERIC),
            (DataType::Float16, Type::FLOAT4),
            (DataType::Float32, Type::FLOAT4),
            (DataType::Float64, Type::FLOAT8),
            (DataType::Decimal128(10, 2), Type::NUMERIC),
            (DataType::Decimal256(50, 2), Type::NUMERIC),
            (DataType::Utf8, Type::TEXT),
            (DataType::LargeUtf8, Type::TEXT),
            (DataType::Utf8View, Type::TEXT),
            (DataType::Binary, Type::BYTEA),
            (DataType::LargeBinary, Type::BYTEA),
            (DataType::BinaryView, Type::BYTEA),
            (DataType::FixedSizeBinary(4), Type::BYTEA),
            (DataType::Date32, Type::DATE),
            (DataType::Date64, Type::DATE),
            (DataType::Time32(TimeUnit::Second), Type::TIME),
            (DataType::Time64(TimeUnit::Nanosecond), Type::TIME),
            (DataType::Timestamp(TimeUnit::Nanosecond, None), Type::TIMESTAMP),
            (DataType::Timestamp(TimeUnit::Second, Some("+02:00".into())), Type::TIMESTAMPTZ),
            (DataType::Interval(IntervalUnit::MonthDayNano), Type::INTERVAL),
            (DataType::Duration(TimeUnit::Millisecond), Type::INTERVAL),
            (DataType::Null, Type::TEXT),
            (DataType::List(Arc::new(Field::new("item", DataType::Int64, true))), Type::INT8_ARRAY),
            (DataType::LargeList(Arc::new(Field::new("item", DataType::Int8, true))), Type::INT2_ARRAY),
            (utf8_list, Type::TEXT_ARRAY),
            (DataType::List(Arc::new(Field::new("item", DataType::Null, true))), Type::TEXT_ARRAY),
            (DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)), Type::TEXT),
        ];
        for (dt, expected) in cases {
            assert_eq!(pg_type(&dt).unwrap(), expected, "{dt}");
        }
    }

    #[test]
    fn rejects_unsupported_types_with_0a000() {
        let union = DataType::Union(
            UnionFields::from_iter([(0, Arc::new(Field::new("a", DataType::Int32, true)))]),
            UnionMode::Sparse,
        );
        let listed = DataType::List(Arc::new(Field::new("item", union.clone(), true)));
        for dt in [union, listed.clone()] {
            let PgWireError::UserError(info) = pg_type(&dt).unwrap_err() else {
                panic!("not a user error");
            };
            assert_eq!(info.code, "0A000");
            assert!(info.message.contains(&dt.to_string()), "{}", info.message);
        }
        let nested = new_empty_array(&listed);
        let schema = Schema::new(vec![Field::new("c", nested.data_type().clone(), true)]);
        assert_eq!(code(field_infos(&schema, &Format::UnifiedText)), "0A000");
    }

    #[test]
    fn field_infos_carry_names_types_formats_and_typmods() {
        let schema = Schema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new("name", DataType::Utf8, true),
            Field::new("hundreds", DataType::Decimal128(5, -2), true),
        ]);
        let fields = field_infos(&schema, &Format::Individual(vec![1, 0, 1, 0])).unwrap();
        let summary: Vec<_> = fields
            .iter()
            .map(|f| (f.name(), f.datatype().clone(), f.format(), f.type_modifier(), f.type_size()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("id", Type::INT4, FieldFormat::Binary, -1, 4),
                ("price", Type::NUMERIC, FieldFormat::Text, ((10 << 16) | 2) + 4, -1),
                ("name", Type::TEXT, FieldFormat::Binary, -1, -1),
                ("hundreds", Type::NUMERIC, FieldFormat::Text, ((5 << 16) | 0x7fe) + 4, -1),
            ]
        );
        let all_binary = field_infos(&schema, &Format::UnifiedBinary).unwrap();
        assert!(all_binary.iter().all(|f| f.format() == FieldFormat::Binary));
        let all_text = field_infos(&schema, &Format::UnifiedText).unwrap();
        assert!(all_text.iter().all(|f| f.format() == FieldFormat::Text));
    }

    #[test]
    fn field_infos_reject_bad_format_codes() {
        let schema = Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Int32, false),
            Field::new("c", DataType::Int32, false),
        ]);
        assert_eq!(code(field_infos(&schema, &Format::Individual(vec![1, 0]))), "08P01");
        assert_eq!(code(field_infos(&schema, &Format::Individual(vec![1]))), "08P01");
        assert_eq!(code(field_infos(&schema, &Format::Individual(vec![1, 0, 0, 1]))), "08P01");
        assert_eq!(code(field_infos(&schema, &Format::Individual(vec![1, 2, 0]))), "22023");
    }

    #[test]
    fn arrow_type_inverts_pg_type_for_parameters() {
        for dt in [
            DataType::Boolean,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::Float32,
            DataType::Float64,
            DataType::Utf8,
            DataType::Binary,
            DataType::Date32,
            DataType::Time64(TimeUnit::Microsecond),
            DataType::Timestamp(TimeUnit::Microsecond, None),
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        ] {
            assert_eq!(arrow_type(&pg_type(&dt).unwrap()), Some(dt.clone()), "{dt}");
        }
        assert_eq!(arrow_type(&Type::NUMERIC), Some(DataType::Decimal128(38, 10)));
        assert_eq!(arrow_type(&Type::OID), Some(DataType::Int64));
        assert_eq!(arrow_type(&Type::VARCHAR), Some(DataType::Utf8));
        assert_eq!(arrow_type(&Type::UNKNOWN), None);
        assert_eq!(arrow_type(&Type::INT4_ARRAY), None);
    }
}

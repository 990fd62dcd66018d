//! Bind parameters into `ScalarValue`s: each parameter's type (declared,
//! inferred or TEXT) and format code pick the text or binary reader, and a
//! rejected value becomes PostgreSQL's error naming the parameter.

use datafusion::common::ScalarValue;
use pgwire::api::Type;
use pgwire::api::portal::Portal;
use pgwire::api::results::FieldFormat;
use pgwire::error::PgWireResult;

use super::binary_values::decode_binary;
use super::param_error::ParamError;
use super::text_values::decode_text;
use super::types::{arrow_type, resolve_formats};
use super::user_error;

/// Decodes the parameters bound to `portal`. Parameter i has the type the
/// client declared in Parse when it declared one other than UNKNOWN, else the
/// server-inferred `types[i]`, else TEXT. Values of types without a dedicated
/// decoder are passed on as their text, for DataFusion to cast.
pub fn decode_parameters<S: Clone>(portal: &Portal<S>, types: &[Type]) -> PgWireResult<Vec<ScalarValue>> {
    let declared = &portal.statement.parameter_types;
    let count = portal.parameters.len();
    let expected = declared.len().max(types.len());
    if count != expected {
        return Err(user_error(
            "08P01",
            format!("bind message supplies {count} parameters, but prepared statement requires {expected}"),
        ));
    }
    let formats = resolve_formats(&portal.parameter_format, count, |codes| {
        format!("bind message has {codes} parameter formats but {count} parameters")
    })?;
    portal
        .parameters
        .iter()
        .zip(formats)
        .enumerate()
        .map(|(idx, (value, format))| {
            let ty = declared
                .get(idx)
                .cloned()
                .flatten()
                .filter(|t| *t != Type::UNKNOWN)
                .or_else(|| types.get(idx).cloned())
                .unwrap_or(Type::TEXT);
            let Some(raw) = value.as_deref() else {
                return Ok(typed_null(&ty));
            };
            match format {
                FieldFormat::Text => decode_text(&ty, raw),
                FieldFormat::Binary => decode_binary(&ty, raw).map_err(ParamError::from),
            }
            .map_err(|e| e.into_pg(idx + 1, &ty))
        })
        .collect()
}

fn typed_null(ty: &Type) -> ScalarValue {
    arrow_type(ty).and_then(|dt| ScalarValue::try_from(&dt).ok()).unwrap_or(ScalarValue::Utf8(None))
}

#[cfg(test)]
mod tests {
    use pgwire::error::PgWireError;

    use super::*;

    use super::super::test_support::{code, decode_one, decode_text_one, hex, portal};

    #[test]
    fn decodes_nulls_as_typed_nulls() {
        let p = portal(
            vec![Some(Type::INT4), Some(Type::NUMERIC), None, Some(Type::TIMESTAMPTZ), Some(Type::JSON)],
            vec![1, 0, 0, 1, 0],
            vec![None, None, None, None, None],
        );
        assert_eq!(
            decode_parameters(&p, &[]).unwrap(),
            vec![
                ScalarValue::Int32(None),
                ScalarValue::Decimal128(None, 38, 10),
                ScalarValue::Utf8(None),
                ScalarValue::TimestampMicrosecond(None, Some("UTC".into())),
                ScalarValue::Utf8(None),
            ]
        );
    }

    #[test]
    fn parameter_types_prefer_declared_then_inferred_then_text() {
        let p = portal(
            vec![Some(Type::INT8), Some(Type::UNKNOWN), None, None],
            vec![],
            vec![Some(b"1"), Some(b"2"), Some(b"3"), Some(b"4")],
        );
        let values = decode_parameters(&p, &[Type::INT2, Type::INT4, Type::FLOAT8]).unwrap();
        assert_eq!(
            values,
            vec![
                ScalarValue::Int64(Some(1)),
                ScalarValue::Int32(Some(2)),
                ScalarValue::Float64(Some(3.0)),
                ScalarValue::Utf8(Some("4".into())),
            ]
        );
        // No declared types at all (asyncpg, node-postgres): inferred ones.
        let p = portal(vec![], vec![1], vec![Some(&hex("0000002a"))]);
        assert_eq!(decode_parameters(&p, &[Type::INT4]).unwrap(), vec![ScalarValue::Int32(Some(42))]);
    }

    #[test]
    fn rejects_malformed_parameters_with_22p02() {
        let p = portal(vec![Some(Type::INT4), Some(Type::INT4)], vec![0, 1], vec![Some(b"1"), Some(&[0, 0, 1])]);
        let err = decode_parameters(&p, &[]).unwrap_err();
        assert_eq!(err.code(), "22P02");
        let PgWireError::UserError(info) = err else { panic!("not a user error") };
        assert!(info.message.contains("$2"), "{}", info.message);

        let malformed = [
            (Type::INT4, "abc"),
            (Type::INT4, "1.5"),
            (Type::BOOL, "o"),
            (Type::BOOL, ""),
            (Type::FLOAT8, "one"),
            (Type::NUMERIC, "1.2.3"),
            (Type::NUMERIC, ""),
            (Type::NUMERIC, "1e"),
            (Type::NUMERIC, "-"),
            (Type::BYTEA, "\\x0"),
            (Type::BYTEA, "\\xzz"),
            (Type::BYTEA, "a\\9"),
            (Type::DATE, "2024-13-01"),
            (Type::TIME, "25:00:00"),
            (Type::TIMESTAMP, "yesterday"),
            (Type::TIMESTAMPTZ, "2026-01-02 03:04:05 +25:99:00:00"),
            // Four bytes of offset whose second character is two bytes long.
            (Type::TIMESTAMPTZ, "2026-01-02 03:04:05 +aé1"),
            (Type::TIMESTAMPTZ, "2026-01-02 03:04:05 +1é"),
        ];
        for (ty, input) in malformed {
            assert_eq!(code(decode_text_one(ty.clone(), input)), "22P02", "{ty} {input:?}");
        }
        assert_eq!(code(decode_one(Type::TEXT, 0, Some(&[0xff]))), "22021");
        assert_eq!(code(decode_one(Type::TEXT, 1, Some(&[0xff]))), "22021");
        assert_eq!(code(decode_one(Type::NUMERIC, 1, Some(&hex("0002000000000002000c")))), "22P02");
        assert_eq!(code(decode_one(Type::NUMERIC, 1, Some(&hex("00010000000000002710")))), "22P02");
        assert_eq!(code(decode_one(Type::NUMERIC, 1, Some(&hex("0000")))), "22P02");
        assert_eq!(code(decode_one(Type::TIMESTAMP, 1, Some(&hex("00")))), "22P02");

        for (ty, input) in [
            (Type::INT2, "70000"),
            (Type::INT8, "-9223372036854775809"),
            (Type::FLOAT4, "1e39"),
            (Type::OID, "4294967296"),
        ] {
            assert_eq!(code(decode_text_one(ty.clone(), input)), "22003", "{ty} {input:?}");
        }
    }

    #[test]
    fn rejects_wrong_parameter_counts_with_08p01() {
        let p = portal(vec![], vec![], vec![Some(b"1")]);
        assert_eq!(code(decode_parameters(&p, &[Type::INT4, Type::INT4])), "08P01");
        let p = portal(vec![Some(Type::INT4), Some(Type::INT4)], vec![], vec![Some(b"1")]);
        assert_eq!(code(decode_parameters(&p, &[])), "08P01");
        let p = portal(vec![], vec![0, 1, 0], vec![Some(b"1"), Some(b"2")]);
        assert_eq!(code(decode_parameters(&p, &[Type::INT4, Type::INT4])), "08P01");
    }
}

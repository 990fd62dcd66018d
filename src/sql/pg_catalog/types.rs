//! The PostgreSQL types the server sends, as `pg_type` lists them and `format_type` names them.

use datafusion::arrow::datatypes::DataType;

/// A built-in base type; each also has an array type `_name`.
pub struct PgType {
    pub oid: i32,
    pub name: &'static str,
    /// How `format_type` spells it.
    pub sql_name: &'static str,
    pub len: i16,
    pub by_value: bool,
    pub category: &'static str,
    pub align: &'static str,
    pub storage: &'static str,
    pub preferred: bool,
    pub array_oid: i32,
}

const fn base(
    oid: i32,
    name: &'static str,
    sql_name: &'static str,
    len: i16,
    category: &'static str,
    align: &'static str,
    array_oid: i32,
) -> PgType {
    let by_value = len > 0 && len <= 8;
    let storage = if len > 0 {
        "p"
    } else if oid == NUMERIC {
        "m"
    } else {
        "x"
    };
    // The preferred type of its category, which implicit casts lean to.
    let preferred = matches!(oid, 16 | TEXT | 701 | 1184 | 1186);
    PgType { oid, name, sql_name, len, by_value, category, align, storage, preferred, array_oid }
}

impl PgType {
    /// The OID of this type, or of its array type.
    pub fn oid_of(&self, array: bool) -> i32 {
        if array { self.array_oid } else { self.oid }
    }

    /// `typlen` of this type, or of its array type, which like every varlena type has -1.
    pub fn len_of(&self, array: bool) -> i16 {
        if array { -1 } else { self.len }
    }
}

pub const NUMERIC: i32 = 1700;
pub const TEXT: i32 = 25;

/// Every type [`sent_as`] can give a column.
pub const TYPES: &[PgType] = &[
    base(16, "bool", "boolean", 1, "B", "c", 1000),
    base(17, "bytea", "bytea", -1, "U", "i", 1001),
    base(114, "json", "json", -1, "U", "i", 199),
    base(20, "int8", "bigint", 8, "N", "d", 1016),
    base(21, "int2", "smallint", 2, "N", "s", 1005),
    base(23, "int4", "integer", 4, "N", "i", 1007),
    base(TEXT, "text", "text", -1, "S", "i", 1009),
    base(700, "float4", "real", 4, "N", "i", 1021),
    base(701, "float8", "double precision", 8, "N", "d", 1022),
    base(1082, "date", "date", 4, "D", "i", 1182),
    base(1083, "time", "time without time zone", 8, "D", "d", 1183),
    base(1114, "timestamp", "timestamp without time zone", 8, "D", "d", 1115),
    base(1184, "timestamptz", "timestamp with time zone", 8, "D", "d", 1185),
    base(1186, "interval", "interval", 16, "T", "d", 1187),
    base(NUMERIC, "numeric", "numeric", -1, "N", "i", 1231),
];

/// A type by its own OID, or the base type of an array OID (`true` for the array).
pub fn lookup(oid: i32) -> Option<(&'static PgType, bool)> {
    TYPES.iter().find_map(|t| {
        if t.oid == oid {
            Some((t, false))
        } else if t.array_oid == oid {
            Some((t, true))
        } else {
            None
        }
    })
}

/// The type a column of this Arrow type is sent as, and whether as its array type (for a list).
/// Only built-in types, since drivers that meet an unknown OID start catalog introspection
/// this server cannot answer; `None` for what PostgreSQL has no type for (unions, ...). Maps and
/// structs go out as `json`, and lists of lists, maps or structs as arrays of `json`.
pub fn sent_as(dt: &DataType) -> Option<(&'static PgType, bool)> {
    let name = match dt {
        DataType::List(f) | DataType::LargeList(f) => {
            return match sent_as(f.data_type())? {
                (element, false) if element.name != "json" => Some((element, true)),
                _ => named("json").map(|json| (json, true)),
            };
        }
        DataType::Map(..) | DataType::Struct(_) => "json",
        DataType::Dictionary(_, values) => return sent_as(values),
        DataType::Boolean => "bool",
        // Widened so every value fits; Int8 must not go out as postgres-types' 1-byte `"char"`.
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "int2",
        DataType::Int32 | DataType::UInt16 => "int4",
        DataType::Int64 | DataType::UInt32 => "int8",
        DataType::UInt64
        | DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => "numeric",
        DataType::Float16 | DataType::Float32 => "float4",
        DataType::Float64 => "float8",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null => "text",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "bytea",
        DataType::Date32 | DataType::Date64 => "date",
        DataType::Time32(_) | DataType::Time64(_) => "time",
        DataType::Timestamp(_, None) => "timestamp",
        DataType::Timestamp(_, Some(_)) => "timestamptz",
        DataType::Interval(_) | DataType::Duration(_) => "interval",
        _ => return None,
    };
    named(name).map(|t| (t, false))
}

fn named(name: &str) -> Option<&'static PgType> {
    TYPES.iter().find(|t| t.name == name)
}

/// `atttypmod` of a column of this Arrow type, as PostgreSQL's `make_numeric_typmod` builds it for
/// numeric and arrays of numeric: clients derive display precision and scale from it, and -1 means "none".
pub fn type_modifier(dt: &DataType) -> i32 {
    match dt {
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => ((i32::from(*p) << 16) | (i32::from(*s) & 0x7ff)) + 4,
        DataType::List(f) | DataType::LargeList(f) => type_modifier(f.data_type()),
        DataType::Dictionary(_, values) => type_modifier(values),
        _ => -1,
    }
}

/// The type OID and type modifier a column of this Arrow type goes out with.
pub fn column_type(dt: &DataType) -> (i32, i32) {
    let oid = sent_as(dt).map_or(TEXT, |(ty, array)| ty.oid_of(array));
    (oid, type_modifier(dt))
}

/// PostgreSQL's `format_type(oid, typmod)`; `None` for an unknown OID.
pub fn format_type(oid: i32, typmod: Option<i32>) -> Option<String> {
    let (ty, array) = lookup(oid)?;
    let mut name = ty.sql_name.to_string();
    if let Some(typmod) = typmod.filter(|m| ty.oid == NUMERIC && *m >= 4) {
        name = format!("numeric({},{})", ((typmod - 4) >> 16) & 0xffff, (typmod - 4) & 0xffff);
    }
    if array {
        name.push_str("[]");
    }
    Some(name)
}

/// The OID of a type name as SQL writes it (`integer`, `int4`, `pg_catalog.text`, `text[]`).
pub fn parse_type(name: &str) -> Option<i32> {
    let name = name.trim().to_lowercase();
    let name = name.strip_prefix("pg_catalog.").unwrap_or(&name);
    let (base_name, array) = match name.strip_suffix("[]") {
        Some(base_name) => (base_name, true),
        None => (name, false),
    };
    let base_name = base_name.split('(').next().unwrap_or(base_name).trim();
    let alias = match base_name {
        "int" => "int4",
        "boolean" => "bool",
        "decimal" => "numeric",
        "real" => "float4",
        "timestamp with time zone" => "timestamptz",
        other => other,
    };
    let ty = TYPES.iter().find(|t| t.name == alias || t.sql_name == alias)?;
    Some(if array { ty.array_oid } else { ty.oid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, TimeUnit};
    use std::sync::Arc;

    #[test]
    fn column_types_get_builtin_oids_and_numeric_typmods() {
        assert_eq!(column_type(&DataType::Int64), (20, -1));
        assert_eq!(column_type(&DataType::Int8), (21, -1));
        assert_eq!(column_type(&DataType::Utf8), (25, -1));
        assert_eq!(column_type(&DataType::Decimal128(10, 2)), (1700, (10 << 16 | 2) + 4));
        assert_eq!(column_type(&DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))), (1184, -1));
        assert_eq!(column_type(&DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)))), (1009, -1));
        let numerics = DataType::List(Arc::new(Field::new("item", DataType::Decimal128(10, 2), true)));
        assert_eq!(column_type(&numerics), (1231, (10 << 16 | 2) + 4));
    }

    #[test]
    fn format_type_spells_types_as_postgresql() {
        assert_eq!(format_type(1700, Some((10 << 16 | 2) + 4)).as_deref(), Some("numeric(10,2)"));
        assert_eq!(format_type(1700, Some(-1)).as_deref(), Some("numeric"));
        assert_eq!(format_type(1114, None).as_deref(), Some("timestamp without time zone"));
        assert_eq!(format_type(1007, Some(-1)).as_deref(), Some("integer[]"));
        assert_eq!(format_type(99999, None), None);
        assert_eq!(parse_type("pg_catalog.int4"), Some(23));
        assert_eq!(parse_type("integer[]"), Some(1007));
        assert_eq!(parse_type("numeric(10,2)"), Some(1700));
    }
}

//! One emulated relation of `pg_catalog` or `information_schema`: its PostgreSQL name, OID
//! and columns, and how its rows are made. Their columns are PostgreSQL 15's, in its order,
//! so that `SELECT *` and positional clients see what they expect; `oid`, `name`, `"char"`
//! and friends go out as the types the server sends (int4, text).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::error::Result;

use super::oids::schema_oid;
use super::scan::{Column, Relation, Scan};
use super::values::Row;

/// One emulated relation: its PostgreSQL name, OID and columns (`name:type ...`), and how
/// its rows are made.
pub struct View {
    pub name: &'static str,
    pub oid: i32,
    columns: &'static str,
    /// `None` for a relation that is always empty.
    pub(super) rows: Option<Rows>,
}

type Rows = fn(&Scan) -> Result<Vec<Row>>;

pub(super) const fn view(name: &'static str, oid: i32, columns: &'static str, rows: Rows) -> View {
    View { name, oid, columns, rows: Some(rows) }
}

pub(super) const fn empty(name: &'static str, oid: i32, columns: &'static str) -> View {
    View { name, oid, columns, rows: None }
}

/// The Arrow type of a catalog column type: what the server sends for it.
fn arrow_type(name: &str) -> DataType {
    let list = |dt| DataType::List(Arc::new(Field::new("item", dt, true)));
    if let Some(element) = name.strip_suffix("[]") {
        return list(arrow_type(element));
    }
    match name {
        "oid" | "int4" => DataType::Int32,
        "int2" => DataType::Int16,
        "int8" | "xid" => DataType::Int64,
        "float4" => DataType::Float32,
        "float8" => DataType::Float64,
        "bool" => DataType::Boolean,
        "bytea" => DataType::Binary,
        "timestamptz" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        "int2vector" => list(DataType::Int16),
        "oidvector" => list(DataType::Int32),
        _ => DataType::Utf8,
    }
}

impl View {
    /// The view as the relation `schema.name` that `pg_class` and `information_schema` list.
    pub(super) fn relation(&self, schema: &str) -> Relation {
        let columns = self
            .schema()
            .fields()
            .iter()
            .map(|f| Column { name: f.name().clone(), data_type: f.data_type().clone(), nullable: true, comment: None })
            .collect();
        Relation {
            oid: self.oid,
            namespace: schema_oid(schema),
            schema: schema.to_string(),
            name: self.name.to_string(),
            kind: "v",
            columns,
            comment: None,
            options: None,
            rows: None,
            bytes: 0,
        }
    }

    pub(super) fn rows(&self, scan: &Scan) -> Result<Vec<Row>> {
        self.rows.map_or(Ok(Vec::new()), |rows| rows(scan))
    }

    pub fn schema(&self) -> SchemaRef {
        let fields: Vec<Field> = self
            .columns
            .split_whitespace()
            .map(|column| {
                let (name, ty) = column.split_once(':').expect("catalog columns are name:type");
                Field::new(name, arrow_type(ty), true)
            })
            .collect();
        Arc::new(Schema::new(fields))
    }
}

//! `pg_catalog` and `information_schema` relations: views over the metastore, the session,
//! the server's connections and its types and functions, built at every scan.
//!
//! Their columns are PostgreSQL 15's, in its order, so that `SELECT *` and positional
//! clients see what they expect; `oid`, `name`, `"char"` and friends go out as the types the
//! server sends (int4, text). Relations of features bucketsql does not have (indexes,
//! constraints, inheritance, policies, publications, ...) are empty.

use std::cell::OnceCell;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch, new_empty_array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::{ScalarValue, internal_err};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableType, Volatility};
use datafusion::physical_plan::ExecutionPlan;

use super::types::{self, TYPES};
use super::*;
use crate::catalog::metastore::TableMeta;
use crate::sql::activity::{Backend, BackendState, Backends};

/// One emulated relation: its PostgreSQL name, OID and columns (`name:type ...`), and how
/// its rows are made.
pub struct View {
    pub name: &'static str,
    pub oid: i32,
    columns: &'static str,
    /// `None` for a relation that is always empty.
    rows: Option<Rows>,
}

type Rows = fn(&Scan) -> Result<Vec<Row>>;

const fn view(name: &'static str, oid: i32, columns: &'static str, rows: Rows) -> View {
    View { name, oid, columns, rows: Some(rows) }
}

const fn empty(name: &'static str, oid: i32, columns: &'static str) -> View {
    View { name, oid, columns, rows: None }
}

pub const PG_CATALOG_VIEWS: &[View] = &[
    view("pg_namespace", 2615, "oid:oid nspname:name nspowner:oid nspacl:acl[]", pg_namespace),
    view(
        "pg_class",
        1259,
        "oid:oid relname:name relnamespace:oid reltype:oid reloftype:oid relowner:oid relam:oid relfilenode:oid reltablespace:oid relpages:int4 reltuples:float4 relallvisible:int4 reltoastrelid:oid relhasindex:bool relisshared:bool relpersistence:char relkind:char relnatts:int2 relchecks:int2 relhasrules:bool relhastriggers:bool relhassubclass:bool relrowsecurity:bool relforcerowsecurity:bool relispopulated:bool relreplident:char relispartition:bool relrewrite:oid relfrozenxid:xid relminmxid:xid relacl:acl[] reloptions:text[] relpartbound:node",
        pg_class,
    ),
    view(
        "pg_attribute",
        1249,
        "attrelid:oid attname:name atttypid:oid attstattarget:int4 attlen:int2 attnum:int2 attndims:int4 attcacheoff:int4 atttypmod:int4 attbyval:bool attalign:char attstorage:char attcompression:char attnotnull:bool atthasdef:bool atthasmissing:bool attidentity:char attgenerated:char attisdropped:bool attislocal:bool attinhcount:int4 attcollation:oid attacl:acl[] attoptions:text[] attfdwoptions:text[] attmissingval:text",
        pg_attribute,
    ),
    view(
        "pg_type",
        1247,
        "oid:oid typname:name typnamespace:oid typowner:oid typlen:int2 typbyval:bool typtype:char typcategory:char typispreferred:bool typisdefined:bool typdelim:char typrelid:oid typsubscript:regproc typelem:oid typarray:oid typinput:regproc typoutput:regproc typreceive:regproc typsend:regproc typmodin:regproc typmodout:regproc typanalyze:regproc typalign:char typstorage:char typnotnull:bool typbasetype:oid typtypmod:int4 typndims:int4 typcollation:oid typdefaultbin:node typdefault:text typacl:acl[]",
        pg_type,
    ),
    view(
        "pg_database",
        1262,
        "oid:oid datname:name datdba:oid encoding:int4 datlocprovider:char datistemplate:bool datallowconn:bool datconnlimit:int4 datfrozenxid:xid datminmxid:xid dattablespace:oid datcollate:text datctype:text daticulocale:text datcollversion:text datacl:acl[]",
        pg_database,
    ),
    view(
        "pg_settings",
        12104,
        "name:text setting:text unit:text category:text short_desc:text extra_desc:text context:text vartype:text source:text min_val:text max_val:text enumvals:text[] boot_val:text reset_val:text sourcefile:text sourceline:int4 pending_restart:bool",
        pg_settings,
    ),
    view("pg_am", 2601, "oid:oid amname:name amhandler:regproc amtype:char", pg_am),
    view("pg_description", 2609, "objoid:oid classoid:oid objsubid:int4 description:text", pg_description),
    view(
        "pg_roles",
        12000,
        "rolname:name rolsuper:bool rolinherit:bool rolcreaterole:bool rolcreatedb:bool rolcanlogin:bool rolreplication:bool rolconnlimit:int4 rolpassword:text rolvaliduntil:timestamptz rolbypassrls:bool rolconfig:text[] oid:oid",
        pg_roles,
    ),
    view(
        "pg_user",
        12014,
        "usename:name usesysid:oid usecreatedb:bool usesuper:bool userepl:bool usebypassrls:bool passwd:text valuntil:timestamptz useconfig:text[]",
        pg_user,
    ),
    view(
        "pg_authid",
        1260,
        "oid:oid rolname:name rolsuper:bool rolinherit:bool rolcreaterole:bool rolcreatedb:bool rolcanlogin:bool rolreplication:bool rolbypassrls:bool rolconnlimit:int4 rolpassword:text rolvaliduntil:timestamptz",
        pg_authid,
    ),
    view(
        "pg_proc",
        1255,
        "oid:oid proname:name pronamespace:oid proowner:oid prolang:oid procost:float4 prorows:float4 provariadic:oid prosupport:regproc prokind:char prosecdef:bool proleakproof:bool proisstrict:bool proretset:bool provolatile:char proparallel:char pronargs:int2 pronargdefaults:int2 prorettype:oid proargtypes:oidvector proallargtypes:oid[] proargmodes:char[] proargnames:text[] proargdefaults:node protrftypes:oid[] prosrc:text probin:text prosqlbody:node proconfig:text[] proacl:acl[]",
        pg_proc,
    ),
    view(
        "pg_collation",
        3456,
        "oid:oid collname:name collnamespace:oid collowner:oid collprovider:char collisdeterministic:bool collencoding:int4 collcollate:text collctype:text colliculocale:text collversion:text",
        pg_collation,
    ),
    view("pg_tablespace", 1213, "oid:oid spcname:name spcowner:oid spcacl:acl[] spcoptions:text[]", pg_tablespace),
    view(
        "pg_tables",
        12033,
        "schemaname:name tablename:name tableowner:name tablespace:name hasindexes:bool hasrules:bool hastriggers:bool rowsecurity:bool",
        pg_tables,
    ),
    view("pg_views", 12028, "schemaname:name viewname:name viewowner:name definition:text", pg_views),
    view(
        "pg_stat_activity",
        12222,
        "datid:oid datname:name pid:int4 leader_pid:int4 usesysid:oid usename:name application_name:text client_addr:inet client_hostname:text client_port:int4 backend_start:timestamptz xact_start:timestamptz query_start:timestamptz state_change:timestamptz wait_event_type:text wait_event:text state:text backend_xid:xid backend_xmin:xid query_id:int8 query:text backend_type:text",
        pg_stat_activity,
    ),
    view(
        "pg_stat_progress_copy",
        12421,
        "pid:int4 datid:oid datname:name relid:oid command:text type:text bytes_processed:int8 bytes_total:int8 tuples_processed:int8 tuples_excluded:int8",
        pg_stat_progress_copy,
    ),
    empty(
        "pg_extension",
        3079,
        "oid:oid extname:name extowner:oid extnamespace:oid extrelocatable:bool extversion:text extconfig:oid[] extcondition:text[]",
    ),
    empty(
        "pg_index",
        2610,
        "indexrelid:oid indrelid:oid indnatts:int2 indnkeyatts:int2 indisunique:bool indnullsnotdistinct:bool indisprimary:bool indisexclusion:bool indimmediate:bool indisclustered:bool indisvalid:bool indcheckxmin:bool indisready:bool indislive:bool indisreplident:bool indkey:int2vector indcollation:oidvector indclass:oidvector indoption:int2vector indexprs:node indpred:node",
    ),
    empty("pg_attrdef", 2604, "oid:oid adrelid:oid adnum:int2 adbin:node"),
    empty(
        "pg_constraint",
        2606,
        "oid:oid conname:name connamespace:oid contype:char condeferrable:bool condeferred:bool convalidated:bool conrelid:oid contypid:oid conindid:oid conparentid:oid confrelid:oid confupdtype:char confdeltype:char confmatchtype:char conislocal:bool coninhcount:int4 connoinherit:bool conkey:int2[] confkey:int2[] conpfeqop:oid[] conppeqop:oid[] conffeqop:oid[] confdelsetcols:int2[] conexclop:oid[] conbin:node",
    ),
    empty("pg_inherits", 2611, "inhrelid:oid inhparent:oid inhseqno:int4 inhdetachpending:bool"),
    empty(
        "pg_policy",
        3256,
        "oid:oid polname:name polrelid:oid polcmd:char polpermissive:bool polroles:oid[] polqual:node polwithcheck:node",
    ),
    empty(
        "pg_statistic_ext",
        3381,
        "oid:oid stxrelid:oid stxname:name stxnamespace:oid stxowner:oid stxstattarget:int4 stxkeys:int2vector stxkind:char[] stxexprs:node",
    ),
    empty(
        "pg_publication",
        6104,
        "oid:oid pubname:name pubowner:oid puballtables:bool pubinsert:bool pubupdate:bool pubdelete:bool pubtruncate:bool pubviaroot:bool",
    ),
    empty("pg_publication_rel", 6106, "oid:oid prpubid:oid prrelid:oid prqual:node prattrs:int2vector"),
    empty("pg_publication_namespace", 6237, "oid:oid pnpubid:oid pnnspid:oid"),
    empty(
        "pg_trigger",
        2620,
        "oid:oid tgrelid:oid tgparentid:oid tgname:name tgfoid:oid tgtype:int2 tgenabled:char tgisinternal:bool tgconstrrelid:oid tgconstrindid:oid tgconstraint:oid tgdeferrable:bool tginitdeferred:bool tgnargs:int2 tgattr:int2vector tgargs:bytea tgqual:node tgoldtable:name tgnewtable:name",
    ),
    empty(
        "pg_rewrite",
        2618,
        "oid:oid rulename:name ev_class:oid ev_type:char ev_enabled:char is_instead:bool ev_qual:node ev_action:node",
    ),
    empty("pg_enum", 3501, "oid:oid enumtypid:oid enumsortorder:float4 enumlabel:name"),
    empty(
        "pg_range",
        3541,
        "rngtypid:oid rngsubtype:oid rngmultitypid:oid rngcollation:oid rngsubopc:oid rngcanonical:regproc rngsubdiff:regproc",
    ),
    empty(
        "pg_sequence",
        2224,
        "seqrelid:oid seqtypid:oid seqstart:int8 seqincrement:int8 seqmax:int8 seqmin:int8 seqcache:int8 seqcycle:bool",
    ),
    empty(
        "pg_matviews",
        12038,
        "schemaname:name matviewname:name matviewowner:name tablespace:name hasindexes:bool ispopulated:bool definition:text",
    ),
    empty("pg_indexes", 12043, "schemaname:name tablename:name indexname:name tablespace:name indexdef:text"),
    empty(
        "pg_depend",
        2608,
        "classid:oid objid:oid objsubid:int4 refclassid:oid refobjid:oid refobjsubid:int4 deptype:char",
    ),
    empty("pg_foreign_table", 3118, "ftrelid:oid ftserver:oid ftoptions:text[]"),
    empty(
        "pg_partitioned_table",
        3350,
        "partrelid:oid partstrat:char partnatts:int2 partdefid:oid partattrs:int2vector partclass:oidvector partcollation:oidvector partexprs:node",
    ),
    empty("pg_auth_members", 1261, "roleid:oid member:oid grantor:oid admin_option:bool"),
    empty("pg_shdescription", 2396, "objoid:oid classoid:oid description:text"),
    empty(
        "pg_opclass",
        2616,
        "oid:oid opcmethod:oid opcname:name opcnamespace:oid opcowner:oid opcfamily:oid opcintype:oid opcdefault:bool opckeytype:oid",
    ),
    empty(
        "pg_event_trigger",
        3466,
        "oid:oid evtname:name evtevent:name evtowner:oid evtfoid:oid evtenabled:char evttags:text[]",
    ),
];

pub const INFORMATION_SCHEMA_VIEWS: &[View] = &[
    view(
        "tables",
        13425,
        "table_catalog:name table_schema:name table_name:name table_type:text self_referencing_column_name:name reference_generation:text user_defined_type_catalog:name user_defined_type_schema:name user_defined_type_name:name is_insertable_into:text is_typed:text commit_action:text",
        information_schema_tables,
    ),
    view(
        "columns",
        13295,
        "table_catalog:name table_schema:name table_name:name column_name:name ordinal_position:int4 column_default:text is_nullable:text data_type:text character_maximum_length:int4 character_octet_length:int4 numeric_precision:int4 numeric_precision_radix:int4 numeric_scale:int4 datetime_precision:int4 interval_type:text interval_precision:int4 character_set_catalog:name character_set_schema:name character_set_name:name collation_catalog:name collation_schema:name collation_name:name domain_catalog:name domain_schema:name domain_name:name udt_catalog:name udt_schema:name udt_name:name scope_catalog:name scope_schema:name scope_name:name maximum_cardinality:int4 dtd_identifier:name is_self_referencing:text is_identity:text identity_generation:text identity_start:text identity_increment:text identity_maximum:text identity_minimum:text identity_cycle:text is_generated:text generation_expression:text is_updatable:text",
        information_schema_columns,
    ),
    view(
        "schemata",
        13382,
        "catalog_name:name schema_name:name schema_owner:name default_character_set_catalog:name default_character_set_schema:name default_character_set_name:name sql_path:text",
        information_schema_schemata,
    ),
    view(
        "views",
        13483,
        "table_catalog:name table_schema:name table_name:name view_definition:text check_option:text is_updatable:text is_insertable_into:text is_trigger_updatable:text is_trigger_deletable:text is_trigger_insertable_into:text",
        information_schema_views,
    ),
    empty(
        "table_constraints",
        13411,
        "constraint_catalog:name constraint_schema:name constraint_name:name table_catalog:name table_schema:name table_name:name constraint_type:text is_deferrable:text initially_deferred:text enforced:text nulls_distinct:text",
    ),
    empty(
        "key_column_usage",
        13329,
        "constraint_catalog:name constraint_schema:name constraint_name:name table_catalog:name table_schema:name table_name:name column_name:name ordinal_position:int4 position_in_unique_constraint:int4",
    ),
];

/// Catalog relations that are always empty: a query reading one of them (not on the outer
/// side of a join) returns no rows whatever else it says.
pub fn always_empty(name: &str) -> bool {
    PG_CATALOG_VIEWS.iter().any(|v| v.name == name && v.rows.is_none())
}

/// The settings `pg_settings` lists besides those the session set.
const SERVER_SETTINGS: &[&str] = &[
    "client_encoding",
    "datestyle",
    "default_transaction_isolation",
    "integer_datetimes",
    "max_identifier_length",
    "max_index_keys",
    "search_path",
    "server_encoding",
    "server_version",
    "server_version_num",
    "standard_conforming_strings",
    "statement_timeout",
    "timezone",
    "transaction_isolation",
];

/// A value of a catalog row, converted to its column's type when the batch is built.
#[derive(Debug, Clone)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    List(Vec<Value>),
}

pub type Row = Vec<Value>;

macro_rules! row {
    ($($value:expr),* $(,)?) => { vec![$(Value::from($value)),*] };
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::Int(i64::from(i))
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<f64> for Value {
    fn from(f: f64) -> Self {
        Value::Float(f)
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

/// A `timestamptz`: microseconds since the epoch, which the column's type reads as such.
impl From<SystemTime> for Value {
    fn from(time: SystemTime) -> Self {
        let micros = match time.duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_micros() as i64,
            Err(before) => -(before.duration().as_micros() as i64),
        };
        Value::Int(micros)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Self {
        Value::List(items.into_iter().map(Into::into).collect())
    }
}

fn scalar(value: Value, dt: &DataType) -> Result<ScalarValue> {
    Ok(match (value, dt) {
        (Value::Null, dt) => ScalarValue::try_from(dt)?,
        (Value::Bool(b), _) => ScalarValue::Boolean(Some(b)),
        (Value::Int(i), dt) => ScalarValue::Int64(Some(i)).cast_to(dt)?,
        (Value::Float(f), dt) => ScalarValue::Float64(Some(f)).cast_to(dt)?,
        (Value::Text(s), _) => ScalarValue::Utf8(Some(s)),
        (Value::List(items), DataType::List(field)) => {
            let items = items.into_iter().map(|i| scalar(i, field.data_type())).collect::<Result<Vec<_>>>()?;
            ScalarValue::List(ScalarValue::new_list_nullable(&items, field.data_type()))
        }
        (value, dt) => return internal_err!("catalog value {value:?} does not fit a {dt} column"),
    })
}

fn batch(schema: &SchemaRef, rows: Vec<Row>) -> Result<RecordBatch> {
    let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(rows.len()); schema.fields().len()];
    for row in rows {
        if row.len() != columns.len() {
            return internal_err!("catalog row has {} values for {} columns", row.len(), columns.len());
        }
        for ((column, value), field) in columns.iter_mut().zip(row).zip(schema.fields()) {
            column.push(scalar(value, field.data_type())?);
        }
    }
    let arrays = columns
        .into_iter()
        .zip(schema.fields())
        .map(|(values, field)| {
            if values.is_empty() { Ok(new_empty_array(field.data_type())) } else { ScalarValue::iter_to_array(values) }
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), arrays)?)
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
        "bool" => DataType::Boolean,
        "bytea" => DataType::Binary,
        "timestamptz" => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        "int2vector" => list(DataType::Int16),
        "oidvector" => list(DataType::Int32),
        _ => DataType::Utf8,
    }
}

impl View {
    fn rows(&self, scan: &Scan) -> Result<Vec<Row>> {
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

/// A relation as `pg_class`, `pg_attribute` and `information_schema` describe it.
pub struct Relation {
    pub oid: i32,
    pub namespace: i32,
    pub schema: String,
    pub name: String,
    /// `r` for a metastore table, `v` for a catalog view.
    pub kind: &'static str,
    pub columns: Vec<Column>,
    pub comment: Option<String>,
    /// The table's layout as `key=value` storage options: partitioning and bucket spec.
    pub options: Option<Vec<String>>,
    pub rows: Option<u64>,
    pub bytes: u64,
}

pub struct Column {
    pub name: String,
    pub data_type: DataType,
    pub nullable: bool,
    pub comment: Option<String>,
}

impl Relation {
    fn table(meta: &TableMeta) -> Result<Self> {
        let columns = meta
            .columns
            .iter()
            .map(|c| {
                let data_type = c.ty.to_arrow().map_err(|e| DataFusionError::External(Box::new(e)))?;
                Ok(Column { name: c.name.clone(), data_type, nullable: c.nullable, comment: c.comment.clone() })
            })
            .collect::<Result<_>>()?;
        let mut options = Vec::new();
        if !meta.partition_columns.is_empty() {
            options.push(format!("partitioned_by=({})", meta.partition_columns.join(",")));
        }
        if let Some(spec) = &meta.bucket_spec {
            options.push(format!("clustered_by=({})", spec.bucket_columns.join(",")));
            if !spec.sort_columns.is_empty() {
                options.push(format!("sorted_by=({})", spec.sort_columns.join(",")));
            }
            options.push(format!("num_buckets={}", spec.num_buckets));
        }
        Ok(Relation {
            oid: table_oid(meta),
            namespace: schema_oid(&meta.schema),
            schema: meta.schema.clone(),
            name: meta.name.clone(),
            kind: "r",
            columns,
            comment: meta.comment.clone(),
            options: (!options.is_empty()).then_some(options),
            rows: Some(meta.files.iter().map(|f| f.row_count).sum()),
            bytes: meta.files.iter().map(|f| f.byte_size).sum(),
        })
    }

    fn view(schema: &str, view: &View) -> Self {
        let columns = view
            .schema()
            .fields()
            .iter()
            .map(|f| Column { name: f.name().clone(), data_type: f.data_type().clone(), nullable: true, comment: None })
            .collect();
        Relation {
            oid: view.oid,
            namespace: schema_oid(schema),
            schema: schema.to_string(),
            name: view.name.to_string(),
            kind: "v",
            columns,
            comment: None,
            options: None,
            rows: None,
            bytes: 0,
        }
    }

    /// Whether an unqualified name finds it: the search path is `pg_catalog`, `default`.
    pub fn visible(&self) -> bool {
        self.namespace == PG_CATALOG_OID || self.namespace == DEFAULT_SCHEMA_OID
    }

    pub fn qualified_name(&self) -> String {
        if self.visible() { self.name.clone() } else { format!("{}.{}", self.schema, self.name) }
    }
}

/// What one scan of a catalog relation reads, each part loaded when first asked for.
pub struct Scan<'a> {
    metastore: &'a Metastore,
    state: Option<&'a dyn Session>,
    relations: OnceCell<Vec<Relation>>,
    schemas: OnceCell<Vec<String>>,
}

impl<'a> Scan<'a> {
    pub fn new(metastore: &'a Metastore, state: Option<&'a dyn Session>) -> Self {
        Scan { metastore, state, relations: OnceCell::new(), schemas: OnceCell::new() }
    }

    fn load(&self) -> Result<()> {
        if self.relations.get().is_none() {
            let snapshot = Snapshot::load(self.metastore).map_err(|e| DataFusionError::External(Box::new(e)))?;
            let mut relations = Vec::new();
            for (schema, views) in [(PG_CATALOG, PG_CATALOG_VIEWS), (INFORMATION_SCHEMA, INFORMATION_SCHEMA_VIEWS)] {
                relations.extend(views.iter().map(|v| Relation::view(schema, v)));
            }
            for meta in &snapshot.tables {
                relations.push(Relation::table(meta)?);
            }
            let _ = self.schemas.set(snapshot.schemas);
            let _ = self.relations.set(relations);
        }
        Ok(())
    }

    /// Every relation: the catalog views, then the metastore's tables.
    pub fn relations(&self) -> Result<&[Relation]> {
        self.load()?;
        Ok(self.relations.get().expect("loaded"))
    }

    /// Every schema: `pg_catalog`, `information_schema`, then the metastore's.
    pub fn schemas(&self) -> Result<Vec<&str>> {
        self.load()?;
        let metastore = self.schemas.get().expect("loaded").iter().map(String::as_str);
        Ok([PG_CATALOG, INFORMATION_SCHEMA].into_iter().chain(metastore).collect())
    }

    pub fn relation(&self, oid: i32) -> Result<Option<&Relation>> {
        Ok(self.relations()?.iter().find(|r| r.oid == oid))
    }

    fn settings(&self) -> Option<Arc<Settings>> {
        self.state.and_then(|s| s.config().get_extension::<Settings>())
    }

    /// The server's logged-in connections; none outside a session.
    fn backends(&self) -> Vec<Arc<Backend>> {
        self.state.and_then(|s| s.config().get_extension::<Backends>()).map_or_else(Vec::new, |b| b.logged_in())
    }
}

fn pg_namespace(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan.schemas()?.into_iter().map(|s| row![schema_oid(s), s, SUPERUSER_OID, Value::Null]).collect())
}

fn pg_class(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .map(|r| {
            let table = r.kind == "r";
            row![
                r.oid,
                r.name.as_str(),
                r.namespace,
                0,
                0,
                SUPERUSER_OID,
                if table { PARQUET_AM_OID } else { 0 },
                0,
                0,
                0,
                // -1: never counted; tables know their row count exactly.
                r.rows.map_or(-1.0, |n| n as f64),
                0,
                0,
                false,
                false,
                "p",
                r.kind,
                r.columns.len() as i32,
                0,
                false,
                false,
                false,
                false,
                false,
                true,
                if table { "d" } else { "n" },
                false,
                0,
                0,
                0,
                Value::Null,
                r.options.clone(),
                Value::Null,
            ]
        })
        .collect())
}

fn pg_attribute(scan: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in scan.relations()? {
        for (i, c) in r.columns.iter().enumerate() {
            let (oid, typmod) = types::column_type(&c.data_type);
            let (ty, array) = types::lookup(oid).expect("column types are in pg_type");
            let (len, by_value, align, storage) =
                if array { (-1, false, "i", "x") } else { (ty.len, ty.by_value, ty.align, ty.storage) };
            let collation = if ty.oid == types::TEXT { DEFAULT_COLLATION_OID } else { 0 };
            rows.push(row![
                r.oid,
                c.name.as_str(),
                oid,
                -1,
                i32::from(len),
                i as i32 + 1,
                i32::from(array),
                -1,
                typmod,
                by_value,
                align,
                storage,
                "",
                !c.nullable,
                false,
                false,
                "",
                "",
                false,
                true,
                0,
                collation,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]);
        }
    }
    Ok(rows)
}

fn pg_type(_: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for t in TYPES {
        let collation = if t.oid == types::TEXT { DEFAULT_COLLATION_OID } else { 0 };
        let (name, len, by_value, category, align, storage) =
            (t.name, i32::from(t.len), t.by_value, t.category, t.align, t.storage);
        rows.push(row![
            t.oid,
            name,
            PG_CATALOG_OID,
            SUPERUSER_OID,
            len,
            by_value,
            "b",
            category,
            t.preferred,
            true,
            ",",
            0,
            "-",
            0,
            t.array_oid,
            format!("{name}in"),
            format!("{name}out"),
            format!("{name}recv"),
            format!("{name}send"),
            "-",
            "-",
            "-",
            align,
            storage,
            false,
            0,
            -1,
            0,
            collation,
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
        let align = if t.align == "d" { "d" } else { "i" };
        rows.push(row![
            t.array_oid,
            format!("_{name}"),
            PG_CATALOG_OID,
            SUPERUSER_OID,
            -1,
            false,
            "b",
            "A",
            false,
            true,
            ",",
            0,
            "array_subscript_handler",
            t.oid,
            0,
            "array_in",
            "array_out",
            "array_recv",
            "array_send",
            "-",
            "-",
            "array_typanalyze",
            align,
            "x",
            false,
            0,
            -1,
            0,
            collation,
            Value::Null,
            Value::Null,
            Value::Null,
        ]);
    }
    Ok(rows)
}

fn pg_database(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![
        DATABASE_OID,
        DATABASE_NAME,
        SUPERUSER_OID,
        UTF8_ENCODING,
        "c",
        false,
        true,
        -1,
        0,
        0,
        DEFAULT_TABLESPACE_OID,
        "C",
        "C",
        Value::Null,
        Value::Null,
        Value::Null,
    ]])
}

fn pg_settings(scan: &Scan) -> Result<Vec<Row>> {
    let Some(settings) = scan.settings() else {
        return Ok(Vec::new());
    };
    let session: BTreeSet<String> = settings.lock().keys().cloned().collect();
    let names: BTreeSet<String> =
        SERVER_SETTINGS.iter().map(|s| s.to_string()).chain(session.iter().cloned()).collect();
    Ok(names
        .into_iter()
        .filter_map(|name| {
            let value = settings.get(&name)?;
            let source = if session.contains(&name) { "session" } else { "default" };
            Some(row![
                name,
                value,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                "user",
                "string",
                source,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                false,
            ])
        })
        .collect())
}

fn pg_am(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![PARQUET_AM_OID, "parquet", "-", "t"]])
}

fn pg_description(scan: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in scan.relations()? {
        if let Some(comment) = &r.comment {
            rows.push(row![r.oid, PG_CLASS_OID, 0, comment.as_str()]);
        }
        for (i, c) in r.columns.iter().enumerate() {
            if let Some(comment) = &c.comment {
                rows.push(row![r.oid, PG_CLASS_OID, i as i32 + 1, comment.as_str()]);
            }
        }
    }
    Ok(rows)
}

fn pg_roles(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![
        SUPERUSER,
        true,
        true,
        true,
        true,
        true,
        true,
        -1,
        "********",
        Value::Null,
        true,
        Value::Null,
        SUPERUSER_OID
    ]])
}

fn pg_user(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![SUPERUSER, SUPERUSER_OID, true, true, true, true, "********", Value::Null, Value::Null]])
}

fn pg_authid(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![SUPERUSER_OID, SUPERUSER, true, true, true, true, true, true, true, -1, Value::Null, Value::Null]])
}

/// The session's functions: DataFusion's, Spark's and these catalog ones. Their argument and
/// result types depend on the call, so `pg_proc` leaves them unknown (0).
fn pg_proc(scan: &Scan) -> Result<Vec<Row>> {
    let Some(state) = scan.state else {
        return Ok(Vec::new());
    };
    let volatility = |v: Volatility| match v {
        Volatility::Immutable => "i",
        Volatility::Stable => "s",
        Volatility::Volatile => "v",
    };
    let mut functions: Vec<(&str, &str, &str)> = Vec::new();
    functions
        .extend(state.scalar_functions().iter().map(|(n, f)| (n.as_str(), "f", volatility(f.signature().volatility))));
    functions.extend(
        state.aggregate_functions().iter().map(|(n, f)| (n.as_str(), "a", volatility(f.signature().volatility))),
    );
    functions
        .extend(state.window_functions().iter().map(|(n, f)| (n.as_str(), "w", volatility(f.signature().volatility))));
    functions.sort();
    functions.dedup_by_key(|f| f.0);
    Ok(functions
        .into_iter()
        .map(|(name, kind, volatile)| {
            row![
                name_oid(name),
                name,
                PG_CATALOG_OID,
                SUPERUSER_OID,
                12,
                1.0,
                0.0,
                0,
                "-",
                kind,
                false,
                false,
                false,
                false,
                volatile,
                "s",
                0,
                0,
                0,
                Vec::<i32>::new(),
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                name,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
            ]
        })
        .collect())
}

fn pg_collation(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![
        row![
            DEFAULT_COLLATION_OID,
            "default",
            PG_CATALOG_OID,
            SUPERUSER_OID,
            "d",
            true,
            -1,
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null
        ],
        row![950, "C", PG_CATALOG_OID, SUPERUSER_OID, "c", true, -1, "C", "C", Value::Null, Value::Null],
    ])
}

fn pg_tablespace(_: &Scan) -> Result<Vec<Row>> {
    Ok(vec![row![DEFAULT_TABLESPACE_OID, "pg_default", SUPERUSER_OID, Value::Null, Value::Null]])
}

fn pg_tables(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .filter(|r| r.kind == "r")
        .map(|r| row![r.schema.as_str(), r.name.as_str(), SUPERUSER, Value::Null, false, false, false, false])
        .collect())
}

/// The catalog views; their definition is the server's code, not SQL.
fn pg_views(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .filter(|r| r.kind == "v")
        .map(|r| row![r.schema.as_str(), r.name.as_str(), SUPERUSER, Value::Null])
        .collect())
}

/// One row per connection. Every connection acts as the superuser, whatever name it logged
/// in with; an idle one waits for its client, as PostgreSQL's `ClientRead`.
fn pg_stat_activity(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .backends()
        .iter()
        .filter_map(|backend| {
            let login = backend.login()?;
            let statement = backend.statement();
            let waiting = statement.state != BackendState::Active;
            Some(row![
                DATABASE_OID,
                DATABASE_NAME,
                login.pid,
                Value::Null,
                SUPERUSER_OID,
                login.user.as_str(),
                backend.application_name(),
                backend.client.map(|client| client.ip().to_string()),
                Value::Null,
                backend.client.map(|client| i32::from(client.port())),
                backend.started,
                statement.transaction_start(),
                statement.query_start,
                statement.state_change,
                waiting.then_some("Client"),
                waiting.then_some("ClientRead"),
                statement.state.name(),
                Value::Null,
                Value::Null,
                Value::Null,
                statement.query,
                "client backend",
            ])
        })
        .collect())
}

/// One row per running COPY. Its data always comes and goes over the connection (`PIPE`),
/// whose size is not known ahead (`bytes_total` 0), and COPY has no `WHERE` to exclude rows.
fn pg_stat_progress_copy(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .backends()
        .iter()
        .filter_map(|backend| {
            let (login, copy) = (backend.login()?, backend.copy_progress()?);
            Some(row![
                login.pid,
                DATABASE_OID,
                DATABASE_NAME,
                copy.relid,
                copy.command.name(),
                "PIPE",
                copy.bytes() as i64,
                0,
                copy.tuples() as i64,
                0,
            ])
        })
        .collect())
}

fn information_schema_tables(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .map(|r| {
            let (kind, insertable) = if r.kind == "r" { ("BASE TABLE", "YES") } else { ("VIEW", "NO") };
            row![
                DATABASE_NAME,
                r.schema.as_str(),
                r.name.as_str(),
                kind,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                insertable,
                "NO",
                Value::Null,
            ]
        })
        .collect())
}

fn information_schema_columns(scan: &Scan) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for r in scan.relations()? {
        for (i, c) in r.columns.iter().enumerate() {
            let (oid, _) = types::column_type(&c.data_type);
            let (ty, array) = types::lookup(oid).expect("column types are in pg_type");
            let data_type = if array { "ARRAY".to_string() } else { ty.sql_name.to_string() };
            let (precision, radix, scale) = match (array, &c.data_type) {
                (true, _) => (None, None, None),
                (_, DataType::Decimal128(p, s)) => (Some(i32::from(*p)), Some(10), Some(i32::from(*s))),
                _ => match ty.name {
                    "int2" => (Some(16), Some(2), Some(0)),
                    "int4" => (Some(32), Some(2), Some(0)),
                    "int8" => (Some(64), Some(2), Some(0)),
                    "float4" => (Some(24), Some(2), None),
                    "float8" => (Some(53), Some(2), None),
                    _ => (None, None, None),
                },
            };
            let datetime_precision = match ty.name {
                "date" => Some(0),
                "time" | "timestamp" | "timestamptz" | "interval" if !array => Some(6),
                _ => None,
            };
            let udt_name = if array { format!("_{}", ty.name) } else { ty.name.to_string() };
            let updatable = if r.kind == "r" { "YES" } else { "NO" };
            rows.push(row![
                DATABASE_NAME,
                r.schema.as_str(),
                r.name.as_str(),
                c.name.as_str(),
                i as i32 + 1,
                Value::Null,
                if c.nullable { "YES" } else { "NO" },
                data_type,
                Value::Null,
                Value::Null,
                precision,
                radix,
                scale,
                datetime_precision,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                DATABASE_NAME,
                PG_CATALOG,
                udt_name,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                (i + 1).to_string(),
                "NO",
                "NO",
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                Value::Null,
                "NO",
                "NEVER",
                Value::Null,
                updatable,
            ]);
        }
    }
    Ok(rows)
}

fn information_schema_schemata(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .schemas()?
        .into_iter()
        .map(|s| row![DATABASE_NAME, s, SUPERUSER, Value::Null, Value::Null, Value::Null, Value::Null])
        .collect())
}

fn information_schema_views(scan: &Scan) -> Result<Vec<Row>> {
    Ok(scan
        .relations()?
        .iter()
        .filter(|r| r.kind == "v")
        .map(|r| {
            row![DATABASE_NAME, r.schema.as_str(), r.name.as_str(), Value::Null, "NONE", "NO", "NO", "NO", "NO", "NO"]
        })
        .collect())
}

/// `pg_catalog` or `information_schema`.
struct CatalogSchema {
    views: &'static [View],
    metastore: Arc<MetastoreHandle>,
}

impl std::fmt::Debug for CatalogSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.views.iter().map(|v| v.name).collect();
        write!(f, "CatalogSchema({names:?})")
    }
}

pub fn schema(views: &'static [View], metastore: Arc<MetastoreHandle>) -> Arc<dyn SchemaProvider> {
    Arc::new(CatalogSchema { views, metastore })
}

#[async_trait]
impl SchemaProvider for CatalogSchema {
    fn table_names(&self) -> Vec<String> {
        self.views.iter().map(|v| v.name.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.views.iter().find(|v| v.name == name).map(|view| {
            Arc::new(CatalogTable { view, schema: view.schema(), metastore: Arc::clone(&self.metastore) })
                as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.views.iter().any(|v| v.name == name)
    }
}

struct CatalogTable {
    view: &'static View,
    schema: SchemaRef,
    metastore: Arc<MetastoreHandle>,
}

impl std::fmt::Debug for CatalogTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CatalogTable({})", self.view.name)
    }
}

impl CatalogTable {
    fn rows(&self, state: &dyn Session) -> Result<RecordBatch> {
        let scan = Scan::new(&self.metastore.0, Some(state));
        batch(&self.schema, self.view.rows(&scan)?)
    }
}

#[async_trait]
impl TableProvider for CatalogTable {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batch = self.rows(state)?;
        Ok(MemorySourceConfig::try_new_exec(&[vec![batch]], Arc::clone(&self.schema), projection.cloned())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::metastore::{BucketSpec, ColumnMeta, NewTable};
    use crate::catalog::types::SparkType;
    use datafusion::arrow::util::display::array_value_to_string;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn metastore() -> (tempfile::TempDir, Metastore) {
        let dir = tempfile::tempdir().unwrap();
        let store = Metastore::open(&dir.path().join("m.sqlite")).unwrap();
        let column = |name: &str, ty: &str, nullable| ColumnMeta {
            name: name.into(),
            ty: SparkType::parse(ty).unwrap(),
            nullable,
            comment: (name == "k").then(|| "the key".to_string()),
        };
        store
            .create_table(
                &NewTable {
                    schema: DEFAULT_SCHEMA.into(),
                    name: "events".into(),
                    provider: "parquet".into(),
                    location: PathBuf::from("/warehouse/default/events"),
                    external: false,
                    comment: Some("clicks".into()),
                    columns: vec![column("k", "bigint", false), column("amount", "decimal(10,2)", true)],
                    partition_columns: vec![],
                    bucket_spec: Some(BucketSpec {
                        num_buckets: 8,
                        bucket_columns: vec!["k".into()],
                        sort_columns: vec![],
                    }),
                    properties: BTreeMap::new(),
                },
                &[],
            )
            .unwrap();
        (dir, store)
    }

    /// The view's rows, the given columns as text.
    fn rows(view: &View, store: &Metastore, columns: &[&str]) -> Vec<Vec<String>> {
        let schema = view.schema();
        let all = batch(&schema, view.rows(&Scan::new(store, None)).unwrap()).unwrap();
        let arrays: Vec<&ArrayRef> = columns.iter().map(|c| all.column(schema.index_of(c).unwrap())).collect();
        (0..all.num_rows()).map(|row| arrays.iter().map(|a| array_value_to_string(a, row).unwrap()).collect()).collect()
    }

    fn has_row(rows: &[Vec<String>], expected: &[&str]) -> bool {
        rows.iter().any(|r| r == expected)
    }

    fn find(views: &'static [View], name: &str) -> &'static View {
        views.iter().find(|v| v.name == name).unwrap()
    }

    #[test]
    fn every_view_builds_its_declared_columns() {
        let (_dir, store) = metastore();
        for view in PG_CATALOG_VIEWS.iter().chain(INFORMATION_SCHEMA_VIEWS) {
            let rows = view.rows(&Scan::new(&store, None)).unwrap();
            batch(&view.schema(), rows).unwrap_or_else(|e| panic!("{}: {e}", view.name));
        }
    }

    #[test]
    fn pg_class_and_pg_attribute_describe_metastore_tables() {
        let (_dir, store) = metastore();
        let class = rows(
            find(PG_CATALOG_VIEWS, "pg_class"),
            &store,
            &["oid", "relname", "relnamespace", "relkind", "relam", "reltuples", "reloptions"],
        );
        assert!(
            has_row(&class, &["16385", "events", "2200", "r", "2", "0.0", "[clustered_by=(k), num_buckets=8]"]),
            "{class:?}"
        );
        assert!(has_row(&class, &["1259", "pg_class", "11", "v", "0", "-1.0", ""]), "{class:?}");
        let attributes = rows(
            find(PG_CATALOG_VIEWS, "pg_attribute"),
            &store,
            &["attrelid", "attname", "atttypid", "atttypmod", "attnum", "attnotnull"],
        );
        assert!(has_row(&attributes, &["16385", "k", "20", "-1", "1", "true"]), "{attributes:?}");
        assert!(has_row(&attributes, &["16385", "amount", "1700", "655366", "2", "false"]), "{attributes:?}");
        let descriptions =
            rows(find(PG_CATALOG_VIEWS, "pg_description"), &store, &["objoid", "objsubid", "description"]);
        assert_eq!(descriptions, [["16385", "0", "clicks"], ["16385", "1", "the key"]]);
    }

    #[test]
    fn information_schema_lists_tables_and_columns() {
        let (_dir, store) = metastore();
        let tables =
            rows(find(INFORMATION_SCHEMA_VIEWS, "tables"), &store, &["table_schema", "table_name", "table_type"]);
        assert!(has_row(&tables, &["default", "events", "BASE TABLE"]), "{tables:?}");
        assert!(has_row(&tables, &["pg_catalog", "pg_class", "VIEW"]), "{tables:?}");
        let columns = rows(
            find(INFORMATION_SCHEMA_VIEWS, "columns"),
            &store,
            &["table_name", "column_name", "data_type", "numeric_precision", "numeric_scale"],
        );
        assert!(has_row(&columns, &["events", "amount", "numeric", "10", "2"]), "{columns:?}");
        let schemata = rows(find(INFORMATION_SCHEMA_VIEWS, "schemata"), &store, &["schema_name"]);
        assert_eq!(schemata, [["pg_catalog"], ["information_schema"], ["default"]]);
    }
}

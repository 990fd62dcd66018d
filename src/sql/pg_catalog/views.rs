//! The relations of `pg_catalog` and `information_schema`, each with the function that makes
//! its rows. Relations of features bucketsql does not have (indexes, constraints,
//! inheritance, policies, publications, ...) are empty.

use super::information_schema::*;
use super::oids::{INFORMATION_SCHEMA, PG_CATALOG};
use super::pg_catalog_rows::*;
use super::pg_stat::*;
use super::scan::Relation;
use super::view::{View, empty, view};

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
        "pg_stat_statements",
        12600,
        "userid:oid dbid:oid toplevel:bool queryid:int8 query:text calls:int8 total_exec_time:float8 min_exec_time:float8 max_exec_time:float8 mean_exec_time:float8 stddev_exec_time:float8 rows:int8 usename:name exchanges:int8 bytes_shuffled:int8 buckets_pruned:int8",
        pg_stat_statements,
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

/// Both catalog schemas' relations, in the order `pg_class` lists them.
pub(super) fn catalog_relations() -> Vec<Relation> {
    [(PG_CATALOG, PG_CATALOG_VIEWS), (INFORMATION_SCHEMA, INFORMATION_SCHEMA_VIEWS)]
        .into_iter()
        .flat_map(|(schema, views)| views.iter().map(move |view| view.relation(schema)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::change::CatalogChange;
    use crate::catalog::location::Location;
    use crate::catalog::metastore::{DEFAULT_SCHEMA, Metastore};
    use crate::catalog::table::{BucketSpec, ColumnMeta, NewTable};
    use crate::catalog::types::SparkType;
    use crate::sql::pg_catalog::scan::Scan;
    use crate::sql::pg_catalog::values::batch;
    use datafusion::arrow::array::ArrayRef;
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
            .commit(&[CatalogChange::CreateTable {
                table: NewTable {
                    schema: DEFAULT_SCHEMA.into(),
                    name: "events".into(),
                    provider: "parquet".into(),
                    location: Location::Local(PathBuf::from("/warehouse/default/events")),
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
                files: Vec::new(),
            }])
            .unwrap();
        (dir, store)
    }

    /// The view's rows, the given columns as text.
    fn rows(view: &View, store: &Metastore, columns: &[&str]) -> Vec<Vec<String>> {
        let schema = view.schema();
        let all = batch(&schema, view.rows(&Scan::new(store, None, catalog_relations)).unwrap()).unwrap();
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
            let rows = view.rows(&Scan::new(&store, None, catalog_relations)).unwrap();
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

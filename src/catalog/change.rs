//! A change of the catalog as a transaction stages it and the metastore commits it: a table
//! created or dropped, files added or replaced, properties or statistics set.
//!
//! A transaction reads its own changes before they commit: [`CatalogChange::apply`] gives the
//! table as the change leaves it. At COMMIT, [`super::metastore::Metastore::commit`] applies
//! every change of the transaction in one SQLite transaction, after checking that none
//! conflicts with a change another transaction committed since the table was read (the first
//! committer wins, [`ChangeKind::conflicts_with`]).

use std::collections::BTreeSet;

use super::location::Location;
use super::table::{ColumnMeta, DataFile, NewTable, PartitionRepair, STATISTICS_PREFIX, TableMeta, WriteMode};

/// The id a table created in a transaction has until the transaction commits.
pub const UNCOMMITTED_TABLE_ID: i64 = 0;

/// What a change does to a table, as far as conflicts go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// Files added (INSERT INTO, COPY FROM).
    Append,
    /// Files replaced by the same rows, compacted (OPTIMIZE).
    Compact,
    /// Files replaced by others (INSERT OVERWRITE, REFRESH TABLE, MSCK REPAIR TABLE).
    Overwrite,
    /// The table itself (CREATE, DROP, ALTER TABLE).
    Definition,
    /// Statistics of the files (ANALYZE TABLE).
    Statistics,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 5] = [
        ChangeKind::Append,
        ChangeKind::Compact,
        ChangeKind::Overwrite,
        ChangeKind::Definition,
        ChangeKind::Statistics,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ChangeKind::Append => "append",
            ChangeKind::Compact => "compact",
            ChangeKind::Overwrite => "overwrite",
            ChangeKind::Definition => "definition",
            ChangeKind::Statistics => "statistics",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Whether a change of this kind, made without seeing `theirs` (committed in between),
    /// must fail. Appends commute with appends and compactions; statistics invalidate
    /// nothing, but are themselves stale after any change of the files; everything else
    /// conflicts: overwrite against overwrite or append, DDL against writes, a compaction
    /// against any rewrite.
    pub fn conflicts_with(self, theirs: ChangeKind) -> bool {
        use ChangeKind::*;
        !matches!((self, theirs), (_, Statistics) | (Append, Append | Compact) | (Compact, Append))
    }
}

/// The table a change is made to, and the point at which the transaction read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    pub schema: String,
    pub name: String,
    /// `None` for a table created earlier in the same transaction.
    pub id: Option<i64>,
    /// The table's change sequence number when it was read: changes committed after it are
    /// checked for conflicts.
    pub seen: i64,
}

impl TableRef {
    pub fn of(meta: &TableMeta) -> Self {
        TableRef {
            schema: meta.schema.clone(),
            name: meta.name.clone(),
            id: (meta.id != UNCOMMITTED_TABLE_ID).then_some(meta.id),
            seen: meta.change_seq,
        }
    }
}

/// One change of the catalog. File paths are relative to the table's location, where the
/// files are once committed.
#[derive(Debug, Clone)]
pub enum CatalogChange {
    CreateTable {
        table: NewTable,
        files: Vec<DataFile>,
    },
    DropTable {
        table: TableRef,
    },
    Write {
        table: TableRef,
        mode: WriteMode,
        files: Vec<DataFile>,
    },
    /// `replaced` leave the table and `files` join it (OPTIMIZE).
    Rewrite {
        table: TableRef,
        replaced: Vec<DataFile>,
        files: Vec<DataFile>,
    },
    /// The file list becomes what the directory holds (REFRESH TABLE, MSCK REPAIR TABLE).
    Resync {
        table: TableRef,
        found: Vec<DataFile>,
        repair: PartitionRepair,
    },
    SetProperties {
        table: TableRef,
        properties: Vec<(String, String)>,
    },
    UnsetProperties {
        table: TableRef,
        keys: Vec<String>,
    },
    SetStatistics {
        table: TableRef,
        statistics: Vec<(String, String)>,
    },
    /// New columns after the data columns, before the partition columns (ADD COLUMNS).
    AddColumns {
        table: TableRef,
        columns: Vec<ColumnMeta>,
    },
    /// An external table reads another directory, its files and partitions those found there
    /// (SET LOCATION).
    SetLocation {
        table: TableRef,
        location: Location,
        found: Vec<DataFile>,
    },
    /// The table takes the name `to` and reads its files at `location`: a managed table's
    /// new directory in the warehouse, where its files (`files`, relative to it) are linked
    /// until the commit publishes them; an external table's own directory, unchanged
    /// (ALTER TABLE … RENAME TO).
    RenameTable {
        table: TableRef,
        to: String,
        location: Location,
        files: Vec<DataFile>,
    },
}

impl CatalogChange {
    /// The schema and name of the table changed.
    pub fn target(&self) -> (&str, &str) {
        match (self, self.table_ref()) {
            (CatalogChange::CreateTable { table, .. }, _) => (&table.schema, &table.name),
            (_, Some(table)) => (&table.schema, &table.name),
            (_, None) => unreachable!("every change but CREATE TABLE names its table"),
        }
    }

    /// The table changed, unless the change creates it.
    pub fn table_ref(&self) -> Option<&TableRef> {
        match self {
            CatalogChange::CreateTable { .. } => None,
            CatalogChange::DropTable { table }
            | CatalogChange::Write { table, .. }
            | CatalogChange::Rewrite { table, .. }
            | CatalogChange::Resync { table, .. }
            | CatalogChange::SetProperties { table, .. }
            | CatalogChange::UnsetProperties { table, .. }
            | CatalogChange::SetStatistics { table, .. }
            | CatalogChange::AddColumns { table, .. }
            | CatalogChange::SetLocation { table, .. }
            | CatalogChange::RenameTable { table, .. } => Some(table),
        }
    }

    /// Every `(schema, name)` the change affects: its table's, and a rename's new one.
    pub fn names(&self) -> impl Iterator<Item = (&str, &str)> {
        std::iter::once(self.target()).chain(self.renamed_to())
    }

    /// The name a rename gives its table: `(schema, new name)`.
    pub fn renamed_to(&self) -> Option<(&str, &str)> {
        match self {
            CatalogChange::RenameTable { table, to, .. } => Some((&table.schema, to)),
            _ => None,
        }
    }

    pub fn kind(&self) -> ChangeKind {
        match self {
            CatalogChange::Write { mode: WriteMode::Append, .. } => ChangeKind::Append,
            CatalogChange::Write { .. } | CatalogChange::Resync { .. } | CatalogChange::SetLocation { .. } => {
                ChangeKind::Overwrite
            }
            CatalogChange::Rewrite { .. } => ChangeKind::Compact,
            CatalogChange::SetStatistics { .. } => ChangeKind::Statistics,
            CatalogChange::CreateTable { .. }
            | CatalogChange::DropTable { .. }
            | CatalogChange::SetProperties { .. }
            | CatalogChange::UnsetProperties { .. }
            | CatalogChange::AddColumns { .. }
            | CatalogChange::RenameTable { .. } => ChangeKind::Definition,
        }
    }

    /// The table `table` (`None`: there is none) as this change leaves it, for the reads of
    /// the transaction that made the change. The files the change adds are read from under
    /// `staged`, the directory relative to the table where they wait for the commit.
    pub fn apply(&self, table: Option<TableMeta>, staged: &str) -> Option<TableMeta> {
        let at_staging = |files: &[DataFile]| -> Vec<DataFile> {
            files.iter().map(|f| DataFile { path: format!("{staged}{}", f.path), ..f.clone() }).collect()
        };
        if let CatalogChange::CreateTable { table, files } = self {
            let mut meta = new_table_meta(table);
            add_files(&mut meta, at_staging(files));
            return Some(meta);
        }
        let mut meta = table?;
        match self {
            CatalogChange::CreateTable { .. } => unreachable!("handled above"),
            CatalogChange::DropTable { .. } => return None,
            CatalogChange::Write { mode, files, .. } => {
                let written: Vec<&str> = files.iter().map(|f| f.partition.as_str()).collect();
                meta.files.retain(|f| !mode.replaces(&f.partition, &written));
                meta.partitions.retain(|p| !mode.forgets(p, &written));
                add_files(&mut meta, at_staging(files));
            }
            CatalogChange::Rewrite { replaced, files, .. } => {
                meta.files.retain(|f| !replaced.contains(f));
                add_files(&mut meta, at_staging(files));
            }
            CatalogChange::Resync { found, repair, .. } => resync(&mut meta, found, *repair),
            CatalogChange::SetLocation { location, found, .. } => {
                meta.location = location.clone();
                resync(&mut meta, found, PartitionRepair::Sync);
            }
            CatalogChange::SetProperties { properties: pairs, .. }
            | CatalogChange::SetStatistics { statistics: pairs, .. } => {
                meta.properties.extend(pairs.iter().cloned());
            }
            CatalogChange::UnsetProperties { keys, .. } => {
                for key in keys {
                    meta.properties.remove(key);
                }
            }
            CatalogChange::RenameTable { to, location, files, .. } => {
                meta.name = to.clone();
                if *location != meta.location {
                    meta.location = location.clone();
                    meta.files = at_staging(files);
                }
            }
            CatalogChange::AddColumns { columns, .. } => {
                let data_columns =
                    meta.columns.iter().take_while(|c| !meta.partition_columns.contains(&c.name)).count();
                meta.columns.splice(data_columns..data_columns, columns.iter().cloned());
            }
        }
        Some(meta)
    }
}

/// The table's files become those `found` in its directory, and its partitions those `repair`
/// keeps.
fn resync(meta: &mut TableMeta, found: &[DataFile], repair: PartitionRepair) {
    let on_disk: BTreeSet<String> =
        found.iter().filter(|f| !f.partition.is_empty()).map(|f| f.partition.clone()).collect();
    let registered = repair.registered(&meta.partitions.iter().cloned().collect(), &on_disk);
    meta.partitions = registered.iter().cloned().collect();
    meta.files =
        found.iter().filter(|f| f.partition.is_empty() || registered.contains(&f.partition)).cloned().collect();
    files_changed(meta);
}

/// A table as CREATE TABLE describes it, before it has an id or files.
pub fn new_table_meta(table: &NewTable) -> TableMeta {
    TableMeta {
        id: UNCOMMITTED_TABLE_ID,
        schema: table.schema.clone(),
        name: table.name.clone(),
        provider: table.provider.clone(),
        location: table.location.clone(),
        external: table.external,
        comment: table.comment.clone(),
        created_at: 0,
        version: 0,
        change_seq: 0,
        columns: table.columns.clone(),
        partition_columns: table.partition_columns.clone(),
        bucket_spec: table.bucket_spec.clone(),
        properties: table.properties.clone(),
        files: Vec::new(),
        partitions: Vec::new(),
    }
}

fn add_files(meta: &mut TableMeta, files: Vec<DataFile>) {
    for file in &files {
        if !file.partition.is_empty() && !meta.partitions.contains(&file.partition) {
            meta.partitions.push(file.partition.clone());
        }
    }
    meta.partitions.sort();
    meta.files.extend(files);
    files_changed(meta);
}

/// As a commit of files does: the version moves on and the statistics go.
fn files_changed(meta: &mut TableMeta) {
    meta.version += 1;
    meta.properties.retain(|key, _| !key.starts_with(STATISTICS_PREFIX));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChangeKind::*;

    #[test]
    fn appends_commute_and_rewrites_do_not() {
        assert!(!Append.conflicts_with(Append));
        assert!(!Append.conflicts_with(Compact));
        assert!(!Compact.conflicts_with(Append));
        assert!(Append.conflicts_with(Overwrite));
        assert!(Overwrite.conflicts_with(Append));
        assert!(Overwrite.conflicts_with(Overwrite));
        assert!(Compact.conflicts_with(Compact));
        assert!(Definition.conflicts_with(Append));
        assert!(Append.conflicts_with(Definition));
        assert!(Statistics.conflicts_with(Append));
        assert!(!Overwrite.conflicts_with(Statistics));
        for kind in ChangeKind::ALL {
            assert_eq!(ChangeKind::parse(kind.name()), Some(kind));
        }
    }
}

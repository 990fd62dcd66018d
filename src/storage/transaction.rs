//! Transactions: what a session's `BEGIN … COMMIT` stages, reads and publishes.
//!
//! Every write stages its files (in the table's staging directory, see [`super::commit`])
//! and its catalog change. Outside a transaction block the statement is a transaction of its
//! own and commits at once. Inside one, the changes wait here: the block's own reads see them
//! (a table is read as committed, with the block's changes applied in order), other
//! sessions do not. COMMIT publishes them all in one metastore transaction, or none when one
//! conflicts with a commit made since (40001, the first committer wins). ROLLBACK, a closed
//! connection or a server stop drops them, and dropping a staged write deletes its files.
//!
//! READ COMMITTED, PostgreSQL's default, reads what has committed when each statement looks a
//! table up. REPEATABLE READ and SERIALIZABLE pin one snapshot of the metastore at the
//! block's first read and read it until the end; the files it lists are kept until then.
//! SERIALIZABLE is REPEATABLE READ here: conflicts are between writes only.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::commit::{StagedFiles, StagedWrite, prune_empty_dirs, publish, published_path};
use super::existing_files::{ExpectedLayout, discover};
use super::janitor::{FileJanitor, StatementGuard};
use super::object_stores::{BucketClient, ObjectStores};
use super::object_write::ObjectWrite;
use crate::catalog::change::CatalogChange;
use crate::catalog::location::Location;
use crate::catalog::metastore::{Metastore, MetastoreSnapshot};
use crate::catalog::table::{DataFile, TableMeta};
use crate::config::Isolation;
use crate::error::SqlError;

/// What ReadyForQuery reports of a session: PostgreSQL's `I`, `T` and `E`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockStatus {
    Idle,
    InBlock,
    /// A statement of the block failed: only ROLLBACK (or ROLLBACK TO SAVEPOINT) helps.
    Failed,
}

/// Numbers transaction blocks across the server, for the query history.
static NEXT_BLOCK: AtomicU64 = AtomicU64::new(1);

/// An open transaction block.
struct Transaction {
    id: u64,
    isolation: Isolation,
    read_only: bool,
    failed: bool,
    /// Whether a statement has read or written a table yet: SET TRANSACTION must come first.
    used: bool,
    snapshot: Option<PinnedSnapshot>,
    staged: Vec<StagedChange>,
    /// Savepoints, innermost last, with the number of changes staged before each.
    savepoints: Vec<(String, usize)>,
}

/// The snapshot a REPEATABLE READ block reads, and the hold that keeps the files it lists.
struct PinnedSnapshot {
    snapshot: MetastoreSnapshot,
    _files_kept: StatementGuard,
}

/// One change of a block, and the files it wrote.
struct StagedChange {
    change: CatalogChange,
    files: Option<StagedFiles>,
    published: bool,
}

impl StagedChange {
    fn new(change: CatalogChange, files: Option<StagedFiles>) -> Self {
        StagedChange { change, files, published: false }
    }

    /// The change as the metastore commits it: files the block replaces that it had staged
    /// itself (an OPTIMIZE after an INSERT) are named where they will be once published.
    fn to_commit(&self) -> CatalogChange {
        let mut change = self.change.clone();
        if let CatalogChange::Rewrite { replaced, .. } = &mut change {
            for file in replaced {
                if let Some(published) = published_path(&file.path) {
                    file.path = published;
                }
            }
        }
        change
    }

    /// The table as this change leaves it; its new files are read where they are staged.
    fn apply(&self, table: Option<TableMeta>) -> Option<TableMeta> {
        let staged = self.files.as_ref().map(StagedFiles::staged_prefix).unwrap_or_default();
        self.change.apply(table, &staged)
    }
}

/// A block's changes are undone last first, as they were made: a write staged under a table's
/// new name goes before the rename that made the directory.
impl Drop for Transaction {
    fn drop(&mut self) {
        undo_after(&mut self.staged, 0);
    }
}

/// Drops the changes staged after the first `kept`, the latest first.
fn undo_after(staged: &mut Vec<StagedChange>, kept: usize) {
    while staged.len() > kept {
        staged.pop();
    }
}

impl Drop for StagedChange {
    /// A table created by a block that did not commit leaves no directory behind.
    fn drop(&mut self) {
        if let CatalogChange::CreateTable { table, .. } = &self.change
            && !self.published
            && !table.external
            && let Some(location) = table.location.local()
            && let Some(schema_dir) = location.parent()
        {
            drop(self.files.take());
            prune_empty_dirs(location, schema_dir);
        }
    }
}

/// A session's catalog: what it reads (the committed metastore, seen through its open
/// transaction block) and where its writes go.
pub struct SessionCatalog {
    metastore: Arc<Metastore>,
    janitor: Arc<FileJanitor>,
    block: Mutex<Option<Transaction>>,
}

impl std::fmt::Debug for SessionCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionCatalog")
    }
}

impl SessionCatalog {
    pub fn new(metastore: Arc<Metastore>, janitor: Arc<FileJanitor>) -> Self {
        SessionCatalog { metastore, janitor, block: Mutex::new(None) }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Transaction>> {
        self.block.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The clients of the object stores tables live on.
    pub fn stores(&self) -> &Arc<ObjectStores> {
        self.janitor.stores()
    }

    /// The data files at `location` that belong to no write under way and were not retired:
    /// what [`discover`] finds there, less the files the metastore holds as pending or
    /// retired (on object storage they sit at their final keys, not in a staging directory).
    pub async fn discover(
        &self,
        location: &Location,
        expected: &ExpectedLayout<'_>,
    ) -> Result<Vec<DataFile>, SqlError> {
        let found = discover(location, expected, self.stores()).await?;
        let uncommitted: HashSet<Location> =
            self.metastore.pending_files()?.into_iter().chain(self.metastore.retired_files()?).collect();
        Ok(found.into_iter().filter(|file| !uncommitted.contains(&location.join(&file.path))).collect())
    }

    /// A new write to the table at `location`: staged below it on the local file system,
    /// in place on object storage.
    pub fn new_write(&self, location: &Location) -> Result<StagedWrite, SqlError> {
        match location {
            Location::Local(path) => Ok(StagedWrite::local(path)),
            Location::Object(object) => {
                let BucketClient { store, uploads } = self.janitor.stores().client(&object.bucket)?;
                Ok(StagedWrite::in_place(ObjectWrite::new(store, uploads, object.clone(), Arc::clone(&self.metastore))))
            }
        }
    }

    /// Opens a transaction block; `false` when one is open already (which stays as it is).
    pub fn begin(&self, isolation: Isolation, read_only: bool) -> bool {
        let mut block = self.lock();
        if block.is_some() {
            return false;
        }
        *block = Some(Transaction {
            id: NEXT_BLOCK.fetch_add(1, Ordering::Relaxed),
            isolation,
            read_only,
            failed: false,
            used: false,
            snapshot: None,
            staged: Vec::new(),
            savepoints: Vec::new(),
        });
        true
    }

    pub fn status(&self) -> BlockStatus {
        match &*self.lock() {
            None => BlockStatus::Idle,
            Some(t) if t.failed => BlockStatus::Failed,
            Some(_) => BlockStatus::InBlock,
        }
    }

    /// The open block's number, unique in the server's run.
    pub fn transaction_id(&self) -> Option<u64> {
        self.lock().as_ref().map(|t| t.id)
    }

    /// The open block's isolation level and whether it is read-only.
    pub fn modes(&self) -> Option<(Isolation, bool)> {
        self.lock().as_ref().map(|t| (t.isolation, t.read_only))
    }

    /// `SET TRANSACTION`: changes the open block's modes, before it has read anything.
    /// Outside a block it changes nothing, as in PostgreSQL (which only warns).
    pub fn set_modes(&self, isolation: Option<Isolation>, read_only: Option<bool>) -> Result<(), SqlError> {
        let mut block = self.lock();
        let Some(transaction) = block.as_mut() else {
            return Ok(());
        };
        if let Some(isolation) = isolation {
            if transaction.used && isolation != transaction.isolation {
                return Err(SqlError::new("25001", "SET TRANSACTION ISOLATION LEVEL must be called before any query"));
            }
            transaction.isolation = isolation;
        }
        if let Some(read_only) = read_only {
            // A block that has read may become read-only, not read-write again.
            if transaction.used && transaction.read_only && !read_only {
                return Err(SqlError::new("25001", "transaction read-write mode must be set before any query"));
            }
            transaction.read_only = read_only;
        }
        Ok(())
    }

    /// A statement of the open block failed: the block is aborted until ROLLBACK.
    pub fn fail(&self) {
        if let Some(transaction) = self.lock().as_mut() {
            transaction.failed = true;
        }
    }

    /// COMMIT: publishes the block's changes, all or none. A failed block is rolled back
    /// instead, which the answer (`false`) says. Outside a block there is nothing to do.
    pub fn commit(&self) -> Result<bool, SqlError> {
        let Some(mut transaction) = self.lock().take() else {
            return Ok(true);
        };
        if transaction.failed {
            return Ok(false);
        }
        self.publish(std::mem::take(&mut transaction.staged))?;
        Ok(true)
    }

    /// ROLLBACK: the block's changes and their files go.
    pub fn rollback(&self) {
        self.lock().take();
    }

    pub fn savepoint(&self, name: &str) -> Result<(), SqlError> {
        let mut block = self.lock();
        let transaction = in_block(&mut block, "SAVEPOINT")?;
        let staged = transaction.staged.len();
        transaction.savepoints.push((name.to_string(), staged));
        Ok(())
    }

    /// `RELEASE SAVEPOINT name`: forgets it and the savepoints made after it.
    pub fn release(&self, name: &str) -> Result<(), SqlError> {
        let mut block = self.lock();
        let transaction = in_block(&mut block, "RELEASE SAVEPOINT")?;
        let position = savepoint_position(transaction, name)?;
        transaction.savepoints.truncate(position);
        Ok(())
    }

    /// `ROLLBACK TO SAVEPOINT name`: the changes staged since it go, the savepoint stays,
    /// and a failed block works again.
    pub fn rollback_to(&self, name: &str) -> Result<(), SqlError> {
        let mut block = self.lock();
        let transaction = in_block(&mut block, "ROLLBACK TO SAVEPOINT")?;
        let position = savepoint_position(transaction, name)?;
        let (_, staged) = transaction.savepoints[position];
        transaction.savepoints.truncate(position + 1);
        undo_after(&mut transaction.staged, staged);
        transaction.failed = false;
        Ok(())
    }

    /// A write's change and its staged files: staged in the open block, else committed now.
    pub fn write(&self, change: CatalogChange, files: Option<StagedFiles>) -> Result<(), SqlError> {
        let mut block = self.lock();
        match block.as_mut() {
            Some(transaction) => {
                transaction.used = true;
                transaction.staged.push(StagedChange::new(change, files));
                Ok(())
            }
            None => {
                drop(block);
                self.publish(vec![StagedChange::new(change, files)])
            }
        }
    }

    /// Publishes `staged` in one commit; files retired by it go once no reader needs them.
    fn publish(&self, mut staged: Vec<StagedChange>) -> Result<(), SqlError> {
        if staged.is_empty() {
            return Ok(());
        }
        let changes: Vec<CatalogChange> = staged.iter().map(StagedChange::to_commit).collect();
        let mut writes: Vec<StagedFiles> = staged.iter_mut().filter_map(|s| s.files.take()).collect();
        let result = publish(&self.metastore, &mut writes, || self.metastore.commit(&changes));
        for change in &mut staged {
            change.published = result.is_ok();
        }
        // Undone last first, as a block's changes are.
        writes.into_iter().rev().for_each(drop);
        drop(staged);
        result?;
        self.janitor.files_retired()
    }

    pub fn schema_exists(&self, schema: &str) -> Result<bool, SqlError> {
        let mut block = self.lock();
        match self.snapshot(&mut block)? {
            Some(snapshot) => snapshot.schema_exists(schema),
            None => self.metastore.schema_exists(schema),
        }
    }

    pub fn schema_names(&self) -> Result<Vec<String>, SqlError> {
        let mut block = self.lock();
        match self.snapshot(&mut block)? {
            Some(snapshot) => snapshot.schema_names(),
            None => self.metastore.schema_names(),
        }
    }

    /// The tables of `schema`, with those the open block created and without those it dropped.
    pub fn table_names(&self, schema: &str) -> Result<Vec<String>, SqlError> {
        let mut block = self.lock();
        let mut names = match self.snapshot(&mut block)? {
            Some(snapshot) => snapshot.table_names(schema)?,
            None => self.metastore.table_names(schema)?,
        };
        let Some(transaction) = block.as_ref() else {
            return Ok(names);
        };
        let touched: Vec<String> = transaction
            .staged
            .iter()
            .flat_map(|s| s.change.names())
            .filter(|(s, _)| *s == schema)
            .map(|(_, name)| name.to_string())
            .collect();
        drop(block);
        for name in touched {
            let exists = self.table(schema, &name)?.is_some();
            names.retain(|n| *n != name);
            if exists {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    /// Whether the open block has changed the table without committing yet.
    pub fn changed_in_block(&self, schema: &str, name: &str) -> bool {
        self.lock()
            .as_ref()
            .is_some_and(|block| block.staged.iter().any(|s| s.change.names().any(|n| n == (schema, name))))
    }

    /// The table as this session sees it: committed (as of the block's snapshot, or now),
    /// with the open block's changes applied.
    pub fn table(&self, schema: &str, name: &str) -> Result<Option<TableMeta>, SqlError> {
        let mut block = self.lock();
        self.snapshot(&mut block)?;
        let Some(transaction) = block.as_mut() else {
            return self.metastore.table(schema, name);
        };
        transaction.used = true;
        let committed = |name: &str| match &transaction.snapshot {
            Some(pinned) => pinned.snapshot.table(schema, name),
            None => self.metastore.table(schema, name),
        };
        seen_in_block(&transaction.staged, schema, name, &committed)
    }

    /// The open block's snapshot, pinned at its first read when its isolation level asks for
    /// one; `None` when reads see what has committed.
    fn snapshot<'a>(&self, block: &'a mut Option<Transaction>) -> Result<Option<&'a MetastoreSnapshot>, SqlError> {
        let Some(transaction) = block.as_mut() else {
            return Ok(None);
        };
        if transaction.isolation == Isolation::ReadCommitted {
            return Ok(None);
        }
        if transaction.snapshot.is_none() {
            // The hold comes first: no file the snapshot lists is deleted from then on.
            let files_kept = self.janitor.begin_statement();
            transaction.snapshot =
                Some(PinnedSnapshot { snapshot: self.metastore.snapshot()?, _files_kept: files_kept });
            transaction.used = true;
        }
        Ok(transaction.snapshot.as_ref().map(|pinned| &pinned.snapshot))
    }
}

/// The table `schema.name` after `staged`, a block's changes: as committed (read by
/// `committed`) with the block's changes of that name applied in order. A table the block
/// renamed to `name` is read under its earlier name up to the rename; one renamed away is gone.
fn seen_in_block(
    staged: &[StagedChange],
    schema: &str,
    name: &str,
    committed: &dyn Fn(&str) -> Result<Option<TableMeta>, SqlError>,
) -> Result<Option<TableMeta>, SqlError> {
    let (start, table) = match staged.iter().rposition(|s| s.change.renamed_to() == Some((schema, name))) {
        Some(rename) => {
            let before = seen_in_block(&staged[..rename], schema, staged[rename].change.target().1, committed)?;
            (rename + 1, staged[rename].apply(before))
        }
        None => (0, committed(name)?),
    };
    Ok(staged[start..]
        .iter()
        .filter(|s| s.change.target() == (schema, name))
        .fold(table, |table, staged| if staged.change.renamed_to().is_some() { None } else { staged.apply(table) }))
}

fn in_block<'a>(block: &'a mut Option<Transaction>, command: &str) -> Result<&'a mut Transaction, SqlError> {
    block.as_mut().ok_or_else(|| SqlError::new("25P01", format!("{command} can only be used in transaction blocks")))
}

/// The innermost savepoint of that name (PostgreSQL's names may repeat).
fn savepoint_position(transaction: &Transaction, name: &str) -> Result<usize, SqlError> {
    transaction
        .savepoints
        .iter()
        .rposition(|(n, _)| n == name)
        .ok_or_else(|| SqlError::new("3B001", format!("savepoint \"{name}\" does not exist")))
}

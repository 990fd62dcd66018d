//! Transaction control, as PostgreSQL answers it: `BEGIN` / `START TRANSACTION` with their
//! modes, `COMMIT` / `END`, `ROLLBACK`, `SAVEPOINT`, `RELEASE SAVEPOINT`, `ROLLBACK TO
//! SAVEPOINT`, `SET TRANSACTION` and `SET SESSION CHARACTERISTICS AS TRANSACTION`. What a
//! block stages, reads and publishes is [`crate::storage::transaction`]'s.
//!
//! Where PostgreSQL warns and goes on (BEGIN inside a block, COMMIT outside one), this does
//! the same without the warning.

use datafusion::sql::sqlparser::ast::{Statement, TransactionAccessMode, TransactionIsolationLevel, TransactionMode};

use crate::config::{self, Isolation};
use crate::error::SqlError;
use crate::sql::output::Output;
use crate::sql::session::Session;

/// The isolation level and access mode `modes` set, where they set one.
fn modes_of(modes: &[TransactionMode]) -> (Option<Isolation>, Option<bool>) {
    let (mut isolation, mut read_only) = (None, None);
    for mode in modes {
        match mode {
            TransactionMode::IsolationLevel(level) => {
                isolation = Some(match level {
                    TransactionIsolationLevel::ReadUncommitted | TransactionIsolationLevel::ReadCommitted => {
                        Isolation::ReadCommitted
                    }
                    TransactionIsolationLevel::RepeatableRead => Isolation::RepeatableRead,
                    TransactionIsolationLevel::Serializable | TransactionIsolationLevel::Snapshot => {
                        Isolation::Serializable
                    }
                })
            }
            TransactionMode::AccessMode(access) => read_only = Some(*access == TransactionAccessMode::ReadOnly),
        }
    }
    (isolation, read_only)
}

/// `BEGIN [ISOLATION LEVEL …] [READ ONLY | READ WRITE]`; the session's defaults fill in the
/// modes not given.
pub(crate) fn begin(session: &Session, modes: &[TransactionMode]) -> Output {
    let (isolation, read_only) = modes_of(modes);
    let (default_isolation, default_read_only) = session.transaction_modes();
    session.tables.begin(isolation.unwrap_or(default_isolation), read_only.unwrap_or(default_read_only));
    Output::TransactionStart("BEGIN")
}

/// `COMMIT [AND CHAIN]`: a block that failed is rolled back, and says so. With `AND CHAIN`
/// a new block with the same modes begins at once (also after a failed COMMIT's error).
pub(crate) fn commit(session: &Session, chain: bool) -> Result<Output, SqlError> {
    let modes = session.tables.modes();
    let committed = session.tables.commit();
    chain_after(session, chain, modes);
    Ok(Output::TransactionEnd(if committed? { "COMMIT" } else { "ROLLBACK" }))
}

/// `ROLLBACK [AND CHAIN]`.
pub(crate) fn rollback(session: &Session, chain: bool) -> Output {
    let modes = session.tables.modes();
    session.tables.rollback();
    chain_after(session, chain, modes);
    Output::TransactionEnd("ROLLBACK")
}

/// `AND CHAIN`: the block that ended, with its `modes`, is followed by a new one like it.
fn chain_after(session: &Session, chain: bool, modes: Option<(Isolation, bool)>) {
    if let (true, Some((isolation, read_only))) = (chain, modes) {
        session.tables.begin(isolation, read_only);
    }
}

pub(crate) fn savepoint(session: &Session, name: &str) -> Result<Output, SqlError> {
    session.tables.savepoint(name)?;
    Ok(Output::command("SAVEPOINT"))
}

pub(crate) fn release(session: &Session, name: &str) -> Result<Output, SqlError> {
    session.tables.release(name)?;
    Ok(Output::command("RELEASE"))
}

pub(crate) fn rollback_to(session: &Session, name: &str) -> Result<Output, SqlError> {
    session.tables.rollback_to(name)?;
    Ok(Output::command("ROLLBACK"))
}

/// `SET TRANSACTION …` changes the open block; `SET SESSION CHARACTERISTICS AS TRANSACTION
/// …` the defaults of the blocks to come.
pub(crate) fn set_transaction(
    session: &Session,
    modes: &[TransactionMode],
    for_session: bool,
) -> Result<Output, SqlError> {
    let (isolation, read_only) = modes_of(modes);
    if for_session {
        if let Some(isolation) = isolation {
            session.set_variable(config::DEFAULT_TRANSACTION_ISOLATION, isolation.name())?;
        }
        if let Some(read_only) = read_only {
            session.set_variable(config::DEFAULT_TRANSACTION_READ_ONLY, if read_only { "on" } else { "off" })?;
        }
    } else {
        session.tables.set_modes(isolation, read_only)?;
    }
    Ok(Output::command("SET"))
}

/// `SET transaction_isolation = …` is `SET TRANSACTION ISOLATION LEVEL …`, as in PostgreSQL.
pub(crate) fn set_isolation(session: &Session, value: &str) -> Result<Output, SqlError> {
    let isolation = Isolation::setting(config::TRANSACTION_ISOLATION, value)?;
    session.tables.set_modes(Some(isolation), None)?;
    Ok(Output::command("SET"))
}

/// Statements a failed block still runs: those that end it or roll back to a savepoint.
pub(crate) fn ends_failed_block(statement: &Statement) -> bool {
    matches!(statement, Statement::Commit { .. } | Statement::Rollback { .. })
}

/// Statements that change what is stored, which a READ ONLY block refuses; their name for
/// the error.
pub(crate) fn writes(statement: &Statement) -> Option<&'static str> {
    Some(match statement {
        Statement::Insert(_) => "INSERT",
        Statement::CreateTable(_) => "CREATE TABLE",
        Statement::Drop { .. } => "DROP TABLE",
        Statement::Truncate(_) => "TRUNCATE TABLE",
        Statement::OptimizeTable { .. } => "OPTIMIZE",
        Statement::Analyze(_) => "ANALYZE",
        Statement::Msck(_) => "MSCK REPAIR TABLE",
        Statement::AlterTable(_) => "ALTER TABLE",
        Statement::Copy { to: false, .. } => "COPY FROM",
        _ => return None,
    })
}

/// PostgreSQL's refusal of a write in a READ ONLY block.
pub(crate) fn read_only_error(command: &str) -> SqlError {
    SqlError::new("25006", format!("cannot execute {command} in a read-only transaction"))
}

/// PostgreSQL's refusal of a statement in a failed block.
pub(crate) fn failed_block_error() -> SqlError {
    SqlError::new("25P02", "current transaction is aborted, commands ignored until end of transaction block")
}

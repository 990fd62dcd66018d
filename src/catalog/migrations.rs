//! Creates and upgrades the metastore schema from the numbered files in `catalog-migrations/`.
//!
//! The schema version lives in SQLite's `user_version`; each migration runs with its version
//! bump in one transaction, so a crash mid-upgrade leaves the previous version intact.

use rusqlite::Connection;

use crate::error::SqlError;

/// Every migration, in order; the version of migration `i` is `i + 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("../../catalog-migrations/0001_initial.sql"),
    include_str!("../../catalog-migrations/0002_bucketing.sql"),
    include_str!("../../catalog-migrations/0003_transactions.sql"),
    include_str!("../../catalog-migrations/0004_object_uploads.sql"),
];

/// The schema version this binary writes and understands.
pub const CURRENT_VERSION: i64 = MIGRATIONS.len() as i64;

pub fn migrate(conn: &mut Connection) -> Result<(), SqlError> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if found > CURRENT_VERSION {
        return Err(SqlError::new(
            "XX002",
            format!(
                "the metastore has schema version {found}, but this bucketsql understands versions up to {CURRENT_VERSION}: upgrade bucketsql to open this data directory"
            ),
        ));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as i64 + 1;
        let tx = conn.transaction()?;
        tx.execute_batch(sql).map_err(|e| SqlError::internal(format!("metastore migration {version} failed: {e}")))?;
        tx.pragma_update(None, "user_version", version)?;
        tx.commit()?;
        tracing::info!(version, "metastore migrated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_a_new_database_and_is_idempotent() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
        assert_eq!(version, CURRENT_VERSION);
        let default: String = conn.query_row("SELECT name FROM schemas", [], |r| r.get(0)).unwrap();
        assert_eq!(default, "default");
    }

    #[test]
    fn refuses_a_newer_metastore() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", CURRENT_VERSION + 1).unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(err.message.contains("upgrade bucketsql"), "{err}");
    }
}

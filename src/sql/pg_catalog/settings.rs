//! The connection's settings, shared by `SHOW`, `current_setting()`, `set_config()` and
//! `pg_settings`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The connection's settings as `SET` left them; `SHOW`, `current_setting()`,
/// `set_config()` and `pg_settings` all read this one map.
#[derive(Debug, Clone, Default)]
pub struct Settings(pub Arc<Mutex<BTreeMap<String, String>>>);

impl Settings {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A setting's value: the session's own, else the server's or Spark's default.
    pub fn get(&self, name: &str) -> Option<String> {
        let name = name.to_lowercase();
        self.lock().get(&name).cloned().or_else(|| crate::config::default_setting(&name).map(str::to_string))
    }
}

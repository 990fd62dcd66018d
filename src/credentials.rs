//! The users' passwords, salted as SCRAM keeps them. Below both the wire server, whose SCRAM
//! exchange reads them, and the web UI, which checks the passwords browsers send against them.

use std::collections::HashMap;
use std::fmt::{self, Debug};
use std::path::Path;

use anyhow::Context;
use async_trait::async_trait;
use pgwire::api::auth::sasl::scram::{SCRAM_ITERATIONS, gen_salted_password};
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::PgWireResult;

/// The passwords clients must present, kept as PostgreSQL keeps SCRAM secrets: salted once.
pub struct Passwords {
    users: HashMap<String, Password>,
    /// For every user not in `users`: the one `--password`, or else one nobody knows, so
    /// that an unknown user fails the same way a wrong password does.
    others: Password,
}

impl Passwords {
    /// One password for every user name (`--password`).
    pub fn for_everyone(password: &str) -> Self {
        Passwords { users: HashMap::new(), others: salted(password) }
    }

    /// `user:password` lines (`--users-file`); blank lines and `#` comments are skipped.
    pub fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut users = HashMap::new();
        for (number, line) in text.lines().enumerate() {
            if line.trim().is_empty() || line.trim_start().starts_with('#') {
                continue;
            }
            let (user, password) = line
                .split_once(':')
                .with_context(|| format!("{}:{}: expected user:password", path.display(), number + 1))?;
            users.insert(user.to_string(), salted(password));
        }
        anyhow::ensure!(!users.is_empty(), "{} lists no users", path.display());
        Ok(Passwords { users, others: salted(&uuid::Uuid::new_v4().to_string()) })
    }
}

impl Passwords {
    /// Whether `password` is `user`'s: for the web UI, whose browsers send passwords as they are
    /// (HTTP Basic authentication), checked against the same salted secrets SCRAM uses.
    pub fn verify(&self, user: &str, password: &str) -> bool {
        let secret = self.users.get(user).unwrap_or(&self.others);
        let Some(salt) = secret.salt() else { return false };
        let given = gen_salted_password(password, salt, SCRAM_ITERATIONS);
        // Compared in full, so that the time taken does not tell how much matched.
        given.len() == secret.password().len()
            && given.iter().zip(secret.password()).fold(0u8, |differ, (a, b)| differ | (a ^ b)) == 0
    }

    /// Each user has a password of their own (`--users-file`), rather than all one.
    pub fn separates_users(&self) -> bool {
        !self.users.is_empty()
    }
}

/// A password with a fresh random salt (a v4 UUID's 122 random bits).
fn salted(password: &str) -> Password {
    let salt = uuid::Uuid::new_v4().into_bytes().to_vec();
    let salted_password = gen_salted_password(password, &salt, SCRAM_ITERATIONS);
    Password::new(Some(salt), salted_password)
}

/// Names the users only: a salted password is enough to log in with SCRAM.
impl Debug for Passwords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Passwords").field("users", &self.users.keys()).finish_non_exhaustive()
    }
}

#[async_trait]
impl AuthSource for Passwords {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        Ok(self.users.get(user).unwrap_or(&self.others).clone())
    }
}

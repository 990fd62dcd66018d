//! Who is looking: the SQL server's credentials, asked for with HTTP Basic authentication,
//! and what each viewer may see.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use super::html;
use crate::credentials::Passwords;
use crate::sql::history::QueryRecord;

/// The server's credentials, as the UI checks them.
pub struct Access {
    passwords: Option<Arc<Passwords>>,
    admin: Option<String>,
}

/// The signed-in viewer of one request.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// `None` when the server asks for no password.
    pub user: Option<String>,
    /// Sees every user's statements and connections: no users of their own, or the admin.
    pub sees_all: bool,
}

impl Viewer {
    /// Whether the viewer may see statements and connections of `user`.
    pub fn may_see(&self, user: &str) -> bool {
        self.sees_all || self.user.as_deref() == Some(user)
    }

    pub fn may_see_query(&self, record: &QueryRecord) -> bool {
        self.may_see(&record.user)
    }
}

impl Access {
    pub fn new(passwords: Option<Arc<Passwords>>, admin: Option<String>) -> Self {
        Access { passwords, admin }
    }

    /// The viewer whose `Authorization` header this is; `None` if it names no one.
    fn viewer(&self, authorization: Option<&str>) -> Option<Viewer> {
        let Some(passwords) = &self.passwords else {
            return Some(Viewer { user: None, sees_all: true });
        };
        let encoded = authorization?.strip_prefix("Basic ")?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
        let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        if !passwords.verify(user, password) {
            return None;
        }
        let sees_all = !passwords.separates_users() || self.admin.as_deref() == Some(user);
        Some(Viewer { user: Some(user.to_string()), sees_all })
    }
}

/// Lets a request through with its [`Viewer`], or answers 401 with the challenge that makes
/// a browser ask for the user name and password.
pub(super) async fn authenticate(State(access): State<Arc<Access>>, mut request: Request, next: Next) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match access.viewer(authorization) {
        Some(viewer) => {
            request.extensions_mut().insert(viewer);
            next.run(request).await
        }
        None => {
            let mut response =
                html::error_page(StatusCode::UNAUTHORIZED, "Sign in with your bucketsql user name and password.")
                    .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Basic realm=\"bucketsql\""));
            response
        }
    }
}

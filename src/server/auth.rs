//! Who may connect, and how each connection starts.
//!
//! Without passwords every client is trusted, as PostgreSQL's `trust` method does; with them,
//! clients authenticate with SCRAM-SHA-256 (or SCRAM-SHA-256-PLUS, bound to the server
//! certificate, over TLS). Either way each connection is registered for CancelRequests, with a
//! pid unique in the server, and, once logged in, shows in `pg_stat_activity`.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::{AuthSource, DefaultServerParameterProvider, StartupHandler};
use pgwire::api::{
    ClientInfo, ConnectionManager, METADATA_APPLICATION_NAME, METADATA_USER, PgWireConnectionState,
    PidSecretKeyGenerator, RandomPidSecretKeyGenerator,
};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult, SEVERITY_FATAL};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::encoding::user_error;
use crate::credentials::Passwords;
use crate::sql::activity::Login;
use crate::sql::session::Session;

/// How connections authenticate; one for the whole server.
pub struct Authenticator {
    trust: Trust,
    scram: Option<Scram>,
}

type Sasl = SASLAuthStartupHandler<DefaultServerParameterProvider>;

/// libpq refuses a server that offers SCRAM-SHA-256-PLUS on a connection without TLS, so
/// only TLS connections are offered it.
struct Scram {
    plain: Sasl,
    tls: Sasl,
}

impl Authenticator {
    /// Trusts every client when `passwords` is `None`. `tls_cert` (PEM) enables
    /// SCRAM-SHA-256-PLUS, which lets the client check that no proxy sits in between.
    pub fn new(passwords: Option<Arc<Passwords>>, tls_cert: Option<&[u8]>) -> Self {
        let manager = Arc::new(ConnectionManager::new());
        // One counter for every way in: a pid names one connection in `pg_stat_activity`.
        let pids = Arc::new(RandomPidSecretKeyGenerator::default());
        let scram = passwords.map(|passwords| {
            let source: Arc<dyn AuthSource> = passwords;
            let handler = |cert: Option<&[u8]>| {
                let mut scram = ScramAuth::new(Arc::clone(&source));
                if let Some(cert) = cert
                    && let Err(e) = scram.configure_certificate(cert)
                {
                    tracing::warn!("SCRAM channel binding is off: {e}");
                }
                SASLAuthStartupHandler::new(Arc::new(DefaultServerParameterProvider::default()))
                    .with_scram(scram)
                    .with_connection_manager(Arc::clone(&manager))
                    .with_pid_secret_key_generator(Arc::clone(&pids) as Arc<dyn PidSecretKeyGenerator>)
            };
            Scram { plain: handler(None), tls: handler(tls_cert) }
        });
        Authenticator { trust: Trust { manager, pids }, scram }
    }

    pub fn connection_manager(&self) -> &Arc<ConnectionManager> {
        &self.trust.manager
    }
}

/// PostgreSQL's `trust` method, with pgwire's default startup parameters.
struct Trust {
    manager: Arc<ConnectionManager>,
    pids: Arc<RandomPidSecretKeyGenerator>,
}

impl NoopStartupHandler for Trust {
    fn connection_manager(&self) -> Option<Arc<ConnectionManager>> {
        Some(Arc::clone(&self.manager))
    }

    fn pid_secret_key_generator(&self) -> &dyn PidSecretKeyGenerator {
        self.pids.as_ref()
    }
}

/// One connection's startup: the settings of its `options` startup parameter, then
/// authentication, after which the connection's backend shows who logged in.
pub struct Startup {
    auth: Arc<Authenticator>,
    session: Arc<Session>,
}

impl Startup {
    pub fn new(auth: Arc<Authenticator>, session: Arc<Session>) -> Self {
        Startup { auth, session }
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(startup) = &message
            && let Some(options) = startup.parameters.get("options")
        {
            apply_options(&self.session, options).map_err(fatal)?;
        }
        let result = match &self.auth.scram {
            Some(scram) if client.is_secure() => scram.tls.on_startup(client, message).await,
            Some(scram) => scram.plain.on_startup(client, message).await,
            None => self.auth.trust.on_startup(client, message).await,
        };
        if result.is_ok() && matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            let metadata = client.metadata();
            let text = |key| metadata.get(key).cloned().unwrap_or_default();
            self.session.backend.logged_in(Login {
                pid: client.pid_and_secret_key().0,
                user: text(METADATA_USER),
                application_name: text(METADATA_APPLICATION_NAME),
            });
        }
        result.map_err(|error| match error {
            // pgwire names the user of the SCRAM exchange, which libpq leaves empty.
            PgWireError::InvalidPassword(_) => {
                PgWireError::InvalidPassword(client.metadata().get(METADATA_USER).cloned().unwrap_or_default())
            }
            error => fatal(error),
        })
    }
}

/// pgwire answers an error that is not FATAL with ReadyForQuery, even during startup, where
/// that would let the client skip authentication; so every startup error ends the connection.
fn fatal(error: PgWireError) -> PgWireError {
    if error.is_fatal() {
        return error;
    }
    let mut info = ErrorInfo::from(error);
    info.severity = SEVERITY_FATAL.to_string();
    PgWireError::UserError(Box::new(info))
}

/// `-c name=value` and `--name=value` words (libpq's `options`, `PGOPTIONS`), applied as `SET`s.
fn apply_options(session: &Session, options: &str) -> PgWireResult<()> {
    let mut words = options.split_whitespace();
    while let Some(word) = words.next() {
        let setting = match word {
            "-c" => words.next().unwrap_or_default(),
            _ => word.strip_prefix("-c").or_else(|| word.strip_prefix("--")).unwrap_or_default(),
        };
        let (name, value) = setting
            .split_once('=')
            .ok_or_else(|| user_error("42601", format!("invalid command-line argument for server process: {word}")))?;
        session.set_variable(&name.replace('-', "_"), value).map_err(|e| user_error(e.code, e.message))?;
    }
    Ok(())
}

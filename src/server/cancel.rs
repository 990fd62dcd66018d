//! CancelRequests: the key checked, the backend's running statement is stopped.
//!
//! pgwire races a CancelRequest only against `do_query`, and a cancel that comes as `do_query`
//! ends is lost there; a query's rows are also computed afterwards, while pgwire drains the
//! lazy row stream `do_query` returned. So a CancelRequest also fires the backend's statement
//! signal, which stays fired: planning, the row streams and COPY TO watch it, and end with
//! SQLSTATE 57014.

use std::sync::Arc;

use async_trait::async_trait;
use futures::Stream;
use futures::future::{BoxFuture, FutureExt, Shared};
use pgwire::api::ConnectionManager;
use pgwire::api::cancel::CancelHandler;
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::cancel::CancelRequest;

use crate::sql::activity::{Backend, Backends};
use crate::sql::interrupt::until;

/// Serves CancelRequests for every connection of the server.
pub struct StatementCancel {
    manager: Arc<ConnectionManager>,
    backends: Arc<Backends>,
}

impl StatementCancel {
    pub fn new(manager: Arc<ConnectionManager>, backends: Arc<Backends>) -> Self {
        StatementCancel { manager, backends }
    }
}

#[async_trait]
impl CancelHandler for StatementCancel {
    async fn on_cancel_request(&self, request: CancelRequest) {
        // The manager knows the keys: a request whose key is wrong stops nothing.
        if self.manager.cancel(request.pid, &request.secret_key).await {
            self.backends.cancel_statement(request.pid);
        }
    }
}

/// Resolves when the client cancels the running statement.
#[derive(Clone)]
pub struct Interrupt(Shared<BoxFuture<'static, ()>>);

impl Interrupt {
    /// The signal of the statement `backend` runs.
    pub fn of(backend: &Backend) -> Self {
        Interrupt(backend.statement_cancellation().cancelled_owned().boxed().shared())
    }

    /// `items` until the client cancels, then the 57014 error.
    pub fn guard<T: Send + 'static>(
        &self,
        items: impl Stream<Item = PgWireResult<T>> + Send + 'static,
    ) -> impl Stream<Item = PgWireResult<T>> + Send + 'static {
        until(items, self.0.clone().map(|()| Err(PgWireError::QueryCanceled)))
    }
}

//! CancelRequests for queries whose rows are still being computed.
//!
//! pgwire races a CancelRequest only against `do_query`, but a query's rows are computed
//! afterwards, while pgwire drains the lazy row stream `do_query` returned. So the row
//! streams watch the connection's cancel signal too, and end with SQLSTATE 57014.

use std::future::pending;
use std::sync::Arc;

use futures::Stream;
use futures::future::{BoxFuture, FutureExt, Shared};
use pgwire::api::{ClientInfo, ConnectionHandle};
use pgwire::error::{PgWireError, PgWireResult};

use crate::sql::interrupt::until;

/// Resolves when the client cancels the running statement.
#[derive(Clone)]
pub struct Interrupt(Shared<BoxFuture<'static, ()>>);

impl Interrupt {
    /// Takes the connection's cancel signal over from pgwire.
    ///
    /// Call it last in `do_query`, with no await after it: it drops the signal pgwire races
    /// `do_query` against, which pgwire would read as a cancel were `do_query` still running.
    pub async fn take<C: ClientInfo>(client: &C) -> Self {
        let receiver = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let cancelled = async move {
            // The sender is dropped, not fired, when the next statement takes the signal.
            if let Some(receiver) = receiver
                && receiver.await.is_ok()
            {
                return;
            }
            pending().await
        };
        Interrupt(cancelled.boxed().shared())
    }

    /// For output sent while `do_query` still runs (a COPY TO): pgwire's own race against
    /// `do_query` cancels it there, so the signal is left to pgwire and this never fires.
    pub fn left_to_pgwire() -> Self {
        Interrupt(pending().boxed().shared())
    }

    /// `items` until the client cancels, then the 57014 error.
    pub fn guard<T: Send + 'static>(
        &self,
        items: impl Stream<Item = PgWireResult<T>> + Send + 'static,
    ) -> impl Stream<Item = PgWireResult<T>> + Send + 'static {
        until(items, self.0.clone().map(|()| Err(PgWireError::QueryCanceled)))
    }
}

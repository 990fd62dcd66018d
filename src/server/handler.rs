//! The pgwire handlers of one connection: simple and extended query protocol over the
//! connection's own [`Session`].

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::{Either, select};
use futures::{Sink, SinkExt, StreamExt, stream};
use pgwire::api::copy::{send_copy_both_response, send_copy_in_response, send_copy_out_response};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{
    ExtendedQueryHandler, SimpleQueryHandler, send_execution_response, send_query_response, send_ready_for_query,
};
use pgwire::api::results::{FieldInfo, QueryResponse, Response, Tag};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, Type};
use pgwire::api::{ConnectionHandle, PgWireConnectionState};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::response::{EmptyQueryResponse, TransactionStatus};
use pgwire::messages::simplequery::Query;

use super::auth::{Authenticator, Startup};
use super::cancel::{Interrupt, StatementCancel};
use super::copy::{CopyState, copy_out_response, send_copy_out};
use super::encoding::{arrow_type, decode_parameters, encode_batch, field_infos, pg_type, user_error};
use crate::error::SqlError;
use crate::sql::activity::{Backend, BackendState};
use crate::sql::output::{Output, Prepared};
use crate::sql::session::Session;
use crate::sql::statement;
use crate::storage::transaction::BlockStatus;

/// Everything pgwire asks of one connection.
pub struct ConnectionHandlers {
    /// The connection's row in `pg_stat_activity`, which the message loop marks idle.
    pub(super) backend: Arc<Backend>,
    /// Whose transaction block the message loop reports in ReadyForQuery.
    pub(super) session: Arc<Session>,
    pub(super) handler: Arc<QueryHandler>,
    pub(super) startup: Arc<Startup>,
    pub(super) cancel: Arc<StatementCancel>,
    pub(super) copy: Arc<CopyState>,
}

impl ConnectionHandlers {
    pub fn new(session: Session, auth: &Arc<Authenticator>) -> Self {
        let session = Arc::new(session);
        let copy = Arc::new(CopyState::new(Arc::clone(&session)));
        ConnectionHandlers {
            backend: Arc::clone(&session.backend),
            session: Arc::clone(&session),
            startup: Arc::new(Startup::new(Arc::clone(auth), Arc::clone(&session))),
            cancel: Arc::new(StatementCancel::new(
                Arc::clone(auth.connection_manager()),
                Arc::clone(&session.engine.backends),
            )),
            copy: Arc::clone(&copy),
            handler: Arc::new(QueryHandler {
                parser: Arc::new(StatementParser { session: Arc::clone(&session) }),
                session,
                copy,
            }),
        }
    }
}

impl ConnectionHandlers {
    /// ReadyForQuery's `I`, `T` or `E`.
    pub(super) fn transaction_status(&self) -> TransactionStatus {
        transaction_status(&self.session)
    }
}

fn transaction_status(session: &Session) -> TransactionStatus {
    match session.tables.status() {
        BlockStatus::Idle => TransactionStatus::Idle,
        BlockStatus::InBlock => TransactionStatus::Transaction,
        BlockStatus::Failed => TransactionStatus::Error,
    }
}

pub struct QueryHandler {
    session: Arc<Session>,
    parser: Arc<StatementParser>,
    copy: Arc<CopyState>,
}

fn to_pgwire(e: SqlError) -> PgWireError {
    user_error(e.code, e.message)
}

/// Turns a statement's output into pgwire's response, encoding rows in `format`. Rows end
/// early with 57014 when the client cancels (the statement's stream watches for it), and so
/// does a COPY TO (by `interrupt`).
fn respond(output: Output, format: &Format, interrupt: &Interrupt, copy: &CopyState) -> PgWireResult<Response> {
    Ok(match output {
        Output::Rows { schema, stream } => {
            let fields = Arc::new(field_infos(&schema, format)?);
            let encoder_fields = Arc::clone(&fields);
            let batches = stream.map(|batch| batch.map_err(|e| to_pgwire(SqlError::from(e))));
            let rows = batches.flat_map(move |batch| {
                let rows = batch.and_then(|b| encode_batch(&b, &encoder_fields));
                match rows {
                    Ok(rows) => stream::iter(rows.into_iter().map(Ok).collect::<Vec<_>>()),
                    Err(e) => stream::iter(vec![Err(e)]),
                }
            });
            Response::Query(QueryResponse::new(fields, rows))
        }
        Output::Command { tag: command, rows } => {
            let mut tag = Tag::new(command);
            if let Some(rows) = rows {
                // PostgreSQL's INSERT tag carries an oid before the count: `INSERT 0 3`.
                if command == "INSERT" {
                    tag = tag.with_oid(0);
                }
                tag = tag.with_rows(rows);
            }
            Response::Execution(tag)
        }
        Output::TransactionStart(tag) => Response::TransactionStart(Tag::new(tag)),
        Output::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(tag)),
        Output::CopyIn(copy_in) => copy.start(copy_in).map_err(to_pgwire)?,
        Output::CopyOut(copy_out) => copy_out_response(copy_out, interrupt)?,
    })
}

#[async_trait]
impl SimpleQueryHandler for QueryHandler {
    /// pgwire's own, except that ReadyForQuery reports the session's transaction block,
    /// which pgwire cannot follow from the responses alone (a COMMIT that fails ends the
    /// block; ROLLBACK TO SAVEPOINT revives a failed one).
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if !matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            return Err(PgWireError::NotReadyForQuery);
        }
        client.set_state(PgWireConnectionState::QueryInProgress);
        let cancel = match client.session_extensions().get::<Arc<ConnectionHandle>>() {
            Some(handle) => Some(handle.start_query().await),
            None => None,
        };
        let responses = match cancel {
            Some(cancel) => match select(SimpleQueryHandler::do_query(self, client, &query.query), cancel).await {
                Either::Left((responses, _)) => responses,
                Either::Right(_) => Err(PgWireError::QueryCanceled),
            },
            None => SimpleQueryHandler::do_query(self, client, &query.query).await,
        }?;
        let idle = || self.session.backend.ready(BackendState::idle(self.session.tables.status()));
        for response in responses {
            // An error ends the query string, and a client may look at pg_stat_activity as
            // soon as it reads the error: the backend is idle before the error goes out.
            if matches!(response, Response::Error(_)) {
                idle();
            }
            send_response(client, response).await?;
        }
        // A COPY FROM STDIN answers ReadyForQuery once its data is in.
        if !matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            idle();
            client.set_state(PgWireConnectionState::ReadyForQuery);
            let status = transaction_status(&self.session);
            client.set_transaction_status(status);
            send_ready_for_query(client, status).await?;
        }
        Ok(())
    }

    /// Runs the query's statements one after the other, each answered in full (its rows
    /// sent) before the next starts, as PostgreSQL runs them: no statement runs while an
    /// earlier one's rows are still being read, and an error stops the rest. What is left for
    /// `on_query` to send: an EmptyQueryResponse, a COPY FROM STDIN's start, or the error.
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let statements = match statement::parse_query(&self.session, query).await {
            Ok(statements) if statements.is_empty() => {
                // Only comments or semicolons: PostgreSQL answers EmptyQueryResponse.
                return Ok(vec![Response::EmptyQuery]);
            }
            Ok(statements) => statements,
            Err(e) => return self.stopped_by(to_pgwire(e)),
        };
        for (text, statement) in statements {
            let output = statement::execute_statement(&self.session, &text, &statement).await;
            let interrupt = Interrupt::of(&self.session.backend);
            let response = match output {
                Ok(Output::CopyOut(copy)) => match copy_out_response(copy, &interrupt) {
                    Ok(response) => send_copy_out(client, response).await,
                    Err(e) => Err(e),
                },
                output => {
                    output.map_err(to_pgwire).and_then(|o| respond(o, &Format::UnifiedText, &interrupt, &self.copy))
                }
            };
            match response {
                // A COPY FROM STDIN ends the query's turn: its data comes next.
                Ok(copy_in @ Response::CopyIn(_)) => return Ok(vec![copy_in]),
                Ok(response) => send_response(client, response).await?,
                Err(e) => return self.stopped_by(e),
            }
        }
        Ok(Vec::new())
    }
}

/// Sends one response of a simple query, as pgwire's `on_query` sends it.
async fn send_response<C>(client: &mut C, response: Response) -> PgWireResult<()>
where
    C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    match response {
        Response::EmptyQuery => {
            client.feed(PgWireBackendMessage::EmptyQueryResponse(EmptyQueryResponse::new())).await?
        }
        Response::Query(results) => send_query_response(client, results, true).await?,
        Response::Execution(tag) | Response::TransactionStart(tag) | Response::TransactionEnd(tag) => {
            send_execution_response(client, tag).await?
        }
        Response::Error(e) => client.feed(PgWireBackendMessage::ErrorResponse((*e).into())).await?,
        Response::CopyIn(copy) => {
            send_copy_in_response(client, copy).await?;
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        }
        Response::CopyOut(copy) => send_copy_out_response(client, copy).await?,
        Response::CopyBoth(copy) => {
            send_copy_both_response(client, copy).await?;
            client.set_state(PgWireConnectionState::CopyInProgress(false));
        }
    }
    Ok(())
}

impl QueryHandler {
    /// The answer to a query string that `error` stopped: a failed statement fails the
    /// transaction block it ran in, whether it failed running or answering.
    fn stopped_by(&self, error: PgWireError) -> PgWireResult<Vec<Response>> {
        self.session.tables.fail();
        match error {
            PgWireError::UserError(info) => Ok(vec![Response::Error(info)]),
            other => Err(other),
        }
    }
}

pub struct StatementParser {
    session: Arc<Session>,
}

#[async_trait]
impl QueryParser for StatementParser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let declared: Vec<_> =
            types.iter().map(|t| t.as_ref().filter(|t| **t != Type::UNKNOWN).and_then(arrow_type)).collect();
        let prepared = statement::prepare(&self.session, sql, &declared).await.map_err(to_pgwire)?;
        Ok(prepared.map(Arc::new))
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        stmt.parameter_types
            .iter()
            .map(|t| match t {
                Some(dt) => pg_type(dt),
                None => Ok(Type::UNKNOWN),
            })
            .collect()
    }

    fn get_result_schema(&self, stmt: &Self::Statement, format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        match &stmt.result_schema {
            Some(schema) => field_infos(schema, format.unwrap_or(&Format::UnifiedText)),
            None => Ok(Vec::new()),
        }
    }
}

#[async_trait]
impl ExtendedQueryHandler for QueryHandler {
    type Statement = Arc<Prepared>;
    type QueryParser = StatementParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: pgwire::api::store::PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let prepared: &Arc<Prepared> = &portal.statement.statement;
        let types = self.parser.get_parameter_types(prepared)?;
        let params = decode_parameters(portal, &types)?;
        let output = statement::execute_prepared(&self.session, prepared, params).await.map_err(to_pgwire)?;
        let interrupt = Interrupt::of(&self.session.backend);
        if let Output::CopyOut(copy) = output {
            return send_copy_out(client, copy_out_response(copy, &interrupt)?).await;
        }
        respond(output, &portal.result_column_format, &interrupt, &self.copy)
    }
}

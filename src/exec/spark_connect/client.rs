//! The Spark Connect client: statements as SQL plans over gRPC, their rows back as Arrow
//! batches, EXPLAIN through `AnalyzePlan`, settings through `Config`, and `Interrupt` for a
//! statement given up on.
//!
//! One HTTP/2 channel per server, opened at the first call and reopened by tonic after it
//! breaks, so a statement after Spark came back finds it again. Each bucketsql session has
//! its own Spark session (its settings are its own); the catalog is Spark's shared one.

use std::collections::{HashMap, VecDeque};
use std::io::Cursor;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::record_batch::RecordBatch;
use futures::StreamExt;
use futures::stream::BoxStream;
use tonic::client::Grpc;
use tonic::codec::Streaming;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use uuid::Uuid;

use super::errors::{Stage, could_not_connect, deepest_cause, status_error};
use super::proto::{self, ExplainMode, Plan, SparkConnectServiceClient, UserContext};
use super::url::SparkConnectUrl;
use crate::error::SqlError;

/// How long opening the connection may take before a statement fails with 08001.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP/2 pings find a Spark that went away while a long statement waits for its rows.
const KEEP_ALIVE: Duration = Duration::from_secs(20);
/// The largest response accepted: Spark cuts its Arrow batches at
/// `spark.connect.grpc.arrow.maxBatchSize` (4 MiB), which gRPC's default limit would refuse
/// once framed.
const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// What Spark's logs and UI show as the client.
const CLIENT_TYPE: &str = concat!("bucketsql/", env!("CARGO_PKG_VERSION"));

pub struct SparkConnect {
    url: SparkConnectUrl,
    channel: OnceLock<Channel>,
    /// What each table was registered in Spark's catalog as, by its quoted qualified name;
    /// held while a statement brings Spark's registrations up to date.
    registered: tokio::sync::Mutex<HashMap<String, Registration>>,
}

/// A table as Spark's catalog has it: the table (a dropped and recreated table is another),
/// the DDL it was registered with, and the version of its files Spark last refreshed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub table_id: i64,
    pub ddl: String,
    pub files_version: i64,
}

/// A statement's rows as Spark sends them.
pub struct SparkRows {
    pub schema: SchemaRef,
    pub batches: BoxStream<'static, Result<RecordBatch, SqlError>>,
}

impl SparkConnect {
    pub fn new(url: SparkConnectUrl) -> Arc<Self> {
        Arc::new(SparkConnect { url, channel: OnceLock::new(), registered: tokio::sync::Mutex::new(HashMap::new()) })
    }

    pub fn url(&self) -> &SparkConnectUrl {
        &self.url
    }

    /// The generated client on the server's channel, once the channel is connected: a server
    /// that cannot be reached fails here, with 08001, before any call.
    async fn client(&self) -> Result<SparkConnectServiceClient<Channel>, SqlError> {
        let channel = match self.channel.get() {
            Some(channel) => channel,
            None => {
                let endpoint = self.endpoint()?;
                self.channel.get_or_init(|| endpoint.connect_lazy())
            }
        };
        Grpc::new(channel.clone()).ready().await.map_err(|e| self.unreachable(&e))?;
        Ok(SparkConnectServiceClient::new(channel.clone()).max_decoding_message_size(MAX_RESPONSE_BYTES))
    }

    fn endpoint(&self) -> Result<Endpoint, SqlError> {
        let invalid = |e: tonic::transport::Error| could_not_connect(&self.url, e);
        let mut endpoint = Endpoint::from_shared(self.url.endpoint())
            .map_err(invalid)?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEP_ALIVE)
            .keep_alive_while_idle(true);
        if let Some(agent) = &self.url.user_agent {
            endpoint = endpoint.user_agent(agent.as_str()).map_err(invalid)?;
        }
        if self.url.use_ssl {
            let host = self.url.host.trim_start_matches('[').trim_end_matches(']');
            endpoint =
                endpoint.tls_config(ClientTlsConfig::new().with_native_roots().domain_name(host)).map_err(invalid)?;
        }
        Ok(endpoint)
    }

    /// A call's request, with the URL's token as a bearer token.
    fn request<T>(&self, message: T) -> Result<tonic::Request<T>, SqlError> {
        let mut request = tonic::Request::new(message);
        if let Some(token) = &self.url.token {
            let value = MetadataValue::try_from(format!("Bearer {token}"))
                .map_err(|_| SqlError::invalid_parameter("the Spark Connect token is not valid header text"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }

    fn user_context(&self) -> Option<UserContext> {
        let user = self.url.user_id.clone().unwrap_or_else(|| "bucketsql".to_string());
        Some(UserContext { user_id: user.clone(), user_name: user, extensions: Vec::new() })
    }

    /// A call's response, or its failure as a SQL error.
    fn answer<T>(&self, response: Result<tonic::Response<T>, tonic::Status>) -> Result<T, SqlError> {
        response.map(tonic::Response::into_inner).map_err(|status| status_error(&status, &self.url, Stage::Connecting))
    }

    fn unreachable(&self, e: &tonic::transport::Error) -> SqlError {
        could_not_connect(&self.url, deepest_cause(e).unwrap_or_else(|| e.to_string()))
    }

    /// Runs `sql` in Spark session `session_id` and streams its rows. Dropping the stream
    /// before its end interrupts the operation on Spark.
    pub async fn execute(self: &Arc<Self>, session_id: &str, sql: String) -> Result<SparkRows, SqlError> {
        let operation_id = Uuid::new_v4().to_string();
        let message = proto::ExecutePlanRequest {
            session_id: session_id.to_string(),
            user_context: self.user_context(),
            plan: Some(Plan::sql(sql)),
            client_type: Some(CLIENT_TYPE.to_string()),
            operation_id: Some(operation_id.clone()),
            ..proto::ExecutePlanRequest::default()
        };
        let request = self.request(message)?;
        let responses = self.answer(self.client().await?.execute_plan(request).await)?;
        let mut operation = Operation {
            responses,
            pending: VecDeque::new(),
            guard: InterruptOnDrop {
                client: Arc::clone(self),
                session_id: session_id.to_string(),
                operation_id,
                finished: false,
            },
        };
        // The first batch carries the schema; a statement that returns no batch has no columns.
        let schema = match operation.next_batch().await? {
            Some(batch) => {
                let schema = batch.schema();
                operation.pending.push_front(batch);
                schema
            }
            None => Arc::new(Schema::empty()),
        };
        let batches = futures::stream::unfold(Some(operation), |operation| async move {
            let mut operation = operation?;
            match operation.next_batch().await {
                Ok(Some(batch)) => Some((Ok(batch), Some(operation))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        });
        Ok(SparkRows { schema, batches: batches.boxed() })
    }

    /// Runs a statement whose rows are not wanted (DDL, REFRESH TABLE).
    pub async fn run(self: &Arc<Self>, session_id: &str, sql: String) -> Result<(), SqlError> {
        let mut rows = self.execute(session_id, sql).await?;
        while let Some(batch) = rows.batches.next().await {
            batch?;
        }
        Ok(())
    }

    /// Spark's EXPLAIN of `sql` in `mode`.
    pub async fn explain(&self, session_id: &str, sql: String, mode: ExplainMode) -> Result<String, SqlError> {
        use proto::analyze_plan_request::{Analyze, Explain};
        use proto::analyze_plan_response::Result as Analysis;
        let message = proto::AnalyzePlanRequest {
            session_id: session_id.to_string(),
            user_context: self.user_context(),
            client_type: Some(CLIENT_TYPE.to_string()),
            analyze: Some(Analyze::Explain(Explain { plan: Some(Plan::sql(sql)), explain_mode: mode as i32 })),
            ..proto::AnalyzePlanRequest::default()
        };
        let request = self.request(message)?;
        let response = self.answer(self.client().await?.analyze_plan(request).await)?;
        match response.result {
            Some(Analysis::Explain(explain)) => Ok(explain.explain_string),
            _ => Ok(String::new()),
        }
    }

    /// Sets and unsets settings of Spark session `session_id`.
    pub async fn configure(
        &self,
        session_id: &str,
        set: Vec<(String, String)>,
        unset: Vec<String>,
    ) -> Result<(), SqlError> {
        use proto::config_request::operation::OpType;
        use proto::config_request::{Operation, Set, Unset};
        let set = (!set.is_empty()).then(|| {
            let pairs = set.into_iter().map(|(key, value)| proto::KeyValue { key, value: Some(value) }).collect();
            OpType::Set(Set { pairs, silent: None })
        });
        let unset = (!unset.is_empty()).then_some(OpType::Unset(Unset { keys: unset }));
        for operation in set.into_iter().chain(unset) {
            let message = proto::ConfigRequest {
                session_id: session_id.to_string(),
                user_context: self.user_context(),
                operation: Some(Operation { op_type: Some(operation) }),
                client_type: Some(CLIENT_TYPE.to_string()),
                ..proto::ConfigRequest::default()
            };
            let request = self.request(message)?;
            self.answer(self.client().await?.config(request).await)?;
        }
        Ok(())
    }

    async fn interrupt(&self, session_id: String, operation_id: String) -> Result<(), SqlError> {
        use proto::interrupt_request::{Interrupt, InterruptType};
        let message = proto::InterruptRequest {
            session_id,
            user_context: self.user_context(),
            client_type: Some(CLIENT_TYPE.to_string()),
            interrupt_type: InterruptType::OperationId as i32,
            interrupt: Some(Interrupt::OperationId(operation_id)),
            ..proto::InterruptRequest::default()
        };
        let request = self.request(message)?;
        self.answer(self.client().await?.interrupt(request).await)?;
        Ok(())
    }

    /// Ends Spark session `session_id` (its settings and temporary state) when the bucketsql
    /// session that used it closes.
    pub async fn release_session(&self, session_id: String) -> Result<(), SqlError> {
        let message = proto::ReleaseSessionRequest {
            session_id,
            user_context: self.user_context(),
            client_type: Some(CLIENT_TYPE.to_string()),
            ..proto::ReleaseSessionRequest::default()
        };
        let request = self.request(message)?;
        self.answer(self.client().await?.release_session(request).await)?;
        Ok(())
    }

    /// The tables registered in Spark's catalog, locked for the caller to bring up to date.
    pub async fn registrations(&self) -> tokio::sync::MutexGuard<'_, HashMap<String, Registration>> {
        self.registered.lock().await
    }
}

/// One running ExecutePlan: its response stream and the batches decoded but not yet taken.
struct Operation {
    responses: Streaming<proto::ExecutePlanResponse>,
    pending: VecDeque<RecordBatch>,
    guard: InterruptOnDrop,
}

impl Operation {
    async fn next_batch(&mut self) -> Result<Option<RecordBatch>, SqlError> {
        use proto::execute_plan_response::ResponseType;
        loop {
            if let Some(batch) = self.pending.pop_front() {
                return Ok(Some(batch));
            }
            if self.guard.finished {
                return Ok(None);
            }
            let response = self.responses.message().await.map_err(|status| {
                self.guard.finished = true;
                status_error(&status, &self.guard.client.url, Stage::Answering)
            })?;
            match response {
                Some(proto::ExecutePlanResponse { response_type: Some(ResponseType::ArrowBatch(batch)), .. }) => {
                    self.pending.extend(decode(batch.data)?)
                }
                Some(_) => {}
                None => self.guard.finished = true,
            }
        }
    }
}

/// The record batches of one Arrow IPC stream.
fn decode(data: bytes::Bytes) -> Result<Vec<RecordBatch>, SqlError> {
    let reader = StreamReader::try_new(Cursor::new(data), None)?;
    Ok(reader.collect::<Result<Vec<_>, _>>()?)
}

/// Interrupts an operation on Spark when its rows are given up on before their end.
struct InterruptOnDrop {
    client: Arc<SparkConnect>,
    session_id: String,
    operation_id: String,
    finished: bool,
}

impl Drop for InterruptOnDrop {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (client, session_id, operation_id) =
            (Arc::clone(&self.client), self.session_id.clone(), self.operation_id.clone());
        runtime.spawn(async move {
            if let Err(e) = client.interrupt(session_id, operation_id).await {
                tracing::warn!(error = %e, "could not interrupt an operation on Spark");
            }
        });
    }
}

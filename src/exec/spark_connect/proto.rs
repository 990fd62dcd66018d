//! The messages of Spark Connect's `spark.connect.SparkConnectService` that this client sends
//! and reads, declared with prost. Field numbers and names follow Spark 4's protocol; only the
//! fields used here are declared, and prost skips the others a server sends. Messages keep
//! their protocol names so that each can be found in Spark's documentation.

use std::collections::HashMap;

/// The RPC paths of the service.
pub const EXECUTE_PLAN: &str = "/spark.connect.SparkConnectService/ExecutePlan";
pub const ANALYZE_PLAN: &str = "/spark.connect.SparkConnectService/AnalyzePlan";
pub const CONFIG: &str = "/spark.connect.SparkConnectService/Config";
pub const INTERRUPT: &str = "/spark.connect.SparkConnectService/Interrupt";
pub const RELEASE_SESSION: &str = "/spark.connect.SparkConnectService/ReleaseSession";

#[derive(Clone, PartialEq, prost::Message)]
pub struct UserContext {
    #[prost(string, tag = "1")]
    pub user_id: String,
    #[prost(string, tag = "2")]
    pub user_name: String,
}

/// A plan whose root is a SQL text: Spark parses, analyses and runs it as `spark.sql` does.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Plan {
    #[prost(oneof = "plan::OpType", tags = "1")]
    pub op_type: Option<plan::OpType>,
}

pub mod plan {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum OpType {
        #[prost(message, tag = "1")]
        Root(super::Relation),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Relation {
    #[prost(oneof = "relation::RelType", tags = "10")]
    pub rel_type: Option<relation::RelType>,
}

pub mod relation {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum RelType {
        #[prost(message, tag = "10")]
        Sql(super::Sql),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Sql {
    #[prost(string, tag = "1")]
    pub query: String,
}

impl Plan {
    pub fn sql(query: String) -> Self {
        Plan { op_type: Some(plan::OpType::Root(Relation { rel_type: Some(relation::RelType::Sql(Sql { query })) })) }
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecutePlanRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(message, optional, tag = "3")]
    pub plan: Option<Plan>,
    #[prost(string, optional, tag = "4")]
    pub client_type: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub operation_id: Option<String>,
}

/// One of an operation's responses; those that carry no rows (metrics, progress, the end of
/// the results) are skipped.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecutePlanResponse {
    #[prost(oneof = "execute_plan_response::ResponseType", tags = "2")]
    pub response_type: Option<execute_plan_response::ResponseType>,
}

pub mod execute_plan_response {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum ResponseType {
        #[prost(message, tag = "2")]
        ArrowBatch(super::ArrowBatch),
    }
}

/// Rows as an Arrow IPC stream: a schema message and record batches.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ArrowBatch {
    #[prost(bytes = "bytes", tag = "2")]
    pub data: bytes::Bytes,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AnalyzePlanRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(string, optional, tag = "3")]
    pub client_type: Option<String>,
    #[prost(message, optional, tag = "5")]
    pub explain: Option<Explain>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Explain {
    #[prost(message, optional, tag = "1")]
    pub plan: Option<Plan>,
    #[prost(enumeration = "ExplainMode", tag = "2")]
    pub explain_mode: i32,
}

/// `AnalyzePlanRequest.Explain.ExplainMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ExplainMode {
    Unspecified = 0,
    Simple = 1,
    Extended = 2,
    Codegen = 3,
    Cost = 4,
    Formatted = 5,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct AnalyzePlanResponse {
    #[prost(message, optional, tag = "3")]
    pub explain: Option<ExplainResult>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ExplainResult {
    #[prost(string, tag = "1")]
    pub explain_string: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(message, optional, tag = "3")]
    pub operation: Option<ConfigOperation>,
    #[prost(string, optional, tag = "4")]
    pub client_type: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigOperation {
    #[prost(oneof = "config_operation::OpType", tags = "1, 6")]
    pub op_type: Option<config_operation::OpType>,
}

pub mod config_operation {
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum OpType {
        #[prost(message, tag = "1")]
        Set(super::ConfigSet),
        #[prost(message, tag = "6")]
        Unset(super::ConfigUnset),
    }
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigSet {
    #[prost(message, repeated, tag = "1")]
    pub pairs: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigUnset {
    #[prost(string, repeated, tag = "1")]
    pub keys: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InterruptRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(string, optional, tag = "3")]
    pub client_type: Option<String>,
    /// `INTERRUPT_TYPE_OPERATION_ID`.
    #[prost(int32, tag = "4")]
    pub interrupt_type: i32,
    #[prost(string, tag = "6")]
    pub operation_id: String,
}

pub const INTERRUPT_TYPE_OPERATION_ID: i32 = 3;

#[derive(Clone, PartialEq, prost::Message)]
pub struct InterruptResponse {}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReleaseSessionRequest {
    #[prost(string, tag = "1")]
    pub session_id: String,
    #[prost(message, optional, tag = "2")]
    pub user_context: Option<UserContext>,
    #[prost(string, optional, tag = "3")]
    pub client_type: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct ReleaseSessionResponse {}

/// `google.rpc.Status`, the details of a failed call.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.ErrorInfo`: Spark puts a failure's `sqlState` and `errorClass` in its metadata.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ErrorInfo {
    #[prost(string, tag = "1")]
    pub reason: String,
    #[prost(string, tag = "2")]
    pub domain: String,
    #[prost(map = "string, string", tag = "3")]
    pub metadata: HashMap<String, String>,
}

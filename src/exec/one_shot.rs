//! A stream already under way, as the one partition of a plan: how an operator that started
//! on its input hands the rest of it to one of DataFusion's operators.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::LexOrdering;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use parking_lot::Mutex;

/// A one-partition plan whose execution yields `stream` (once; after that, no rows).
pub(crate) fn one_shot_plan(stream: SendableRecordBatchStream) -> Result<Arc<dyn ExecutionPlan>> {
    let schema = stream.schema();
    let source = OneShotStream { schema: Arc::clone(&schema), stream: Mutex::new(Some(stream)) };
    let plan =
        StreamingTableExec::try_new(schema, vec![Arc::new(source)], None, Vec::<LexOrdering>::new(), false, None)?;
    Ok(Arc::new(plan))
}

struct OneShotStream {
    schema: SchemaRef,
    stream: Mutex<Option<SendableRecordBatchStream>>,
}

impl fmt::Debug for OneShotStream {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("OneShotStream")
    }
}

impl PartitionStream for OneShotStream {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        self.stream.lock().take().unwrap_or_else(|| empty(Arc::clone(&self.schema)))
    }
}

/// A stream of no rows.
pub(crate) fn empty(schema: SchemaRef) -> SendableRecordBatchStream {
    Box::pin(datafusion::physical_plan::EmptyRecordBatchStream::new(schema))
}

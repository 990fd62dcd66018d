//! A map task's output for one partition, in a file of its own because the map side
//! (`map_output`) keeps it and the readers (`reader`) take it.

use std::collections::VecDeque;

use datafusion::arrow::array::RecordBatch;
use datafusion::execution::memory_pool::MemoryReservation;

use super::spill::SpilledSegments;

/// One map task's output for one partition: batches held in memory (reserved until read),
/// then segments spilled to the map task's file.
pub(super) struct MapPart {
    batches: VecDeque<RecordBatch>,
    reservation: MemoryReservation,
    spilled: Option<SpilledSegments>,
}

impl MapPart {
    pub(super) fn new(
        batches: VecDeque<RecordBatch>,
        reservation: MemoryReservation,
        spilled: Option<SpilledSegments>,
    ) -> Self {
        MapPart { batches, reservation, spilled }
    }

    /// The next batch held in memory; its memory goes back to the pool.
    pub(super) fn pop(&mut self) -> Option<RecordBatch> {
        let batch = self.batches.pop_front()?;
        self.reservation.shrink(batch.get_array_memory_size().min(self.reservation.size()));
        Some(batch)
    }

    pub(super) fn take_spilled(&mut self) -> Option<SpilledSegments> {
        self.spilled.take()
    }

    /// A copy for a reader other than the last: the same batches and spilled segments, whose
    /// memory and file stay with this part until the last reader takes it.
    pub(super) fn copy(&self) -> Self {
        MapPart {
            batches: self.batches.clone(),
            reservation: self.reservation.new_empty(),
            spilled: self.spilled.as_ref().map(SpilledSegments::copy),
        }
    }
}

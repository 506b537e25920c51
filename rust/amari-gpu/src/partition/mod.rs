//! Partitioners: turn a workload, the chunk grid and the device models into a [`Plan`].
//! Pure functions of their inputs, so they are tested and benchmarked without a GPU.

use crate::error::Result;
use crate::model::DeviceModel;
use crate::plan::{Plan, Strategy};
use crate::workload::Workload;

/// Decides a plan for `workload` cut into chunks of `chunk_items` items over `models`
/// (one per healthy device) with `strategy`.
pub fn plan(workload: &Workload, chunk_items: u64, models: &[DeviceModel], strategy: Strategy) -> Result<Plan> {
    let _ = (workload, chunk_items, models, strategy);
    todo!("implemented by the partitioner work")
}

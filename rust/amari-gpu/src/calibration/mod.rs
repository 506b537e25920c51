//! Calibration: what each device is measured to do and how the figures are kept. Transfer
//! rates, launch latency and each family's kernel rate are measured by `crate::calibrate`;
//! [`families`] names the reference kernel of each family, [`concurrency`] measures the
//! gain of devices that share hardware, [`cache`] keeps the figures on disk, and
//! [`context`] drives it all for a context and turns the figures into device models.

pub(crate) mod cache;
pub(crate) mod concurrency;
mod context;
pub(crate) mod families;

//! Calibration: what each device is measured to do and how the figures are kept.
//! [`measure`] runs every micro-benchmark on a device ([`transfers`]: transfer rates, launch
//! latency, timestamp cost; [`rates`]: each family's kernel rate, arithmetic peak, streaming
//! bandwidth); [`families`] names the reference kernel of each family, [`concurrency`]
//! measures the gain of devices that share hardware, [`cache`] keeps the figures on disk,
//! and [`context`] drives it all for a context and turns the figures into device models.

pub(crate) mod cache;
pub(crate) mod concurrency;
mod context;
pub(crate) mod families;
mod host;
pub(crate) mod measure;
mod rates;
mod transfers;

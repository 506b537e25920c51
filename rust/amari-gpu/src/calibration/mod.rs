//! Calibration: what each device is measured to do and how the figures are kept.
//! [`measure`] runs every micro-benchmark on a device ([`transfers`]: transfer rates, launch
//! latency, timestamp cost; [`rates`]: each family's kernel rate, arithmetic peak, streaming
//! bandwidth); [`families`] names the reference kernel of each family, [`concurrency`]
//! measures the gain of devices that share hardware, [`cache`] keeps the figures on disk,
//! [`context`] drives it all for a context and turns the figures into device models, and
//! [`demand`] measures only what a call's plan needs, when it first needs it. [`limits`]
//! measures each device's roofline (bandwidth and arithmetic issue rates, [`host_peak`] on
//! the host). [`dtypes`] measures each device's float64 rate relative to float32 when a plan
//! of float64 work first needs it.

pub(crate) mod cache;
pub(crate) mod concurrency;
mod context;
mod demand;
pub(crate) mod dtypes;
pub(crate) mod families;
mod host;
mod host_peak;
pub mod limits;
pub(crate) mod measure;
mod rates;
mod transfers;

//! The one error type of the core. Every fallible public function returns
//! [`Result`]; the Python layer maps each variant onto its exception class.

use thiserror::Error;

/// Everything that can go wrong in the core, grouped by what the caller can do about it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum Error {
    /// No adapter matched the request (or the machine has none at all).
    #[error("{0}")]
    NoAdapter(String),
    /// A device stopped answering, was lost, or failed a step of a computation.
    #[error("device {device} failed: {reason}")]
    DeviceLost {
        /// Context-wide id of the device.
        device: usize,
        /// What the driver (or the watchdog) reported.
        reason: String,
    },
    /// Every device of the context has failed; the message says why each one did.
    #[error("{0}")]
    NoHealthyDevice(String),
    /// A device could not allocate what a step needed.
    #[error("device {device} is out of memory: {reason}")]
    OutOfMemory {
        /// Context-wide id of the device.
        device: usize,
        /// What the driver reported.
        reason: String,
    },
    /// An array argument has the wrong shape.
    #[error("{argument}: expected shape {expected}, got {actual}")]
    Shape {
        /// Name of the offending argument.
        argument: String,
        /// Human-readable expected shape, e.g. `(N, 8)`.
        expected: String,
        /// The shape that was passed.
        actual: String,
    },
    /// Two operands whose leading dimensions (all but the last) do not broadcast together by
    /// numpy's rules.
    #[error("{argument}: expected leading dimensions that broadcast with {other}'s {lead}, got shape {actual}")]
    Broadcast {
        /// Name of the offending argument.
        argument: String,
        /// Name of the operand it must broadcast with.
        other: String,
        /// That operand's leading dimensions, e.g. `(5,)`.
        lead: String,
        /// The offending argument's shape.
        actual: String,
    },
    /// The host could not allocate an array whose size comes from the call's arguments.
    #[error("{argument}: cannot allocate {bytes} bytes of host memory")]
    HostOutOfMemory {
        /// The argument (or derived array) the allocation was for.
        argument: String,
        /// Bytes asked for.
        bytes: u128,
    },
    /// The call was cancelled from outside (Ctrl-C, a progress callback that raised).
    #[error("the call was cancelled")]
    Cancelled,
    /// The context was closed; no call can run on it any more.
    #[error("the context is closed")]
    Closed,
    /// A bug: code that should not fail panicked. The message says where.
    #[error("internal error (please report it): {0}")]
    Internal(String),
    /// A user's kernel (`map_rows`) does not compile or does not match its arrays; the
    /// message gives the line and column in the user's source and naga's text, or says
    /// which part of `row`'s signature does not match.
    #[error("{0}")]
    KernelCompile(String),
    /// Any other invalid argument (unknown backend name, adapter index out of range...).
    #[error("{argument}: {message}")]
    InvalidArgument {
        /// Name of the offending argument.
        argument: String,
        /// What was expected and what came.
        message: String,
    },
}

/// Shorthand used throughout the crate.
pub type Result<T> = std::result::Result<T, Error>;

/// `dims` written as a Python tuple, `(3,)` or `(2, 4)`: a shape in an error's text as the
/// caller of the Python API wrote it.
pub(crate) fn shape_text(dims: &[usize]) -> String {
    let items: Vec<String> = dims.iter().map(usize::to_string).collect();
    let comma = if dims.len() == 1 { "," } else { "" };
    format!("({}{comma})", items.join(", "))
}

impl Error {
    /// Rows of a flat row-major array named `argument` with `width` words per row; a shape
    /// error saying `expected` (the shape the caller wanted, e.g. "(N, 8)") when its length
    /// is not a multiple of `width`. The one width check of every entry point.
    pub(crate) fn rows<T>(
        argument: &str,
        data: &[T],
        width: usize,
        expected: &str,
    ) -> Result<usize> {
        if width == 0 || !data.len().is_multiple_of(width) {
            return Err(Error::Shape {
                argument: argument.into(),
                expected: expected.into(),
                actual: format!("{} floats, not a multiple of {width}", data.len()),
            });
        }
        Ok(data.len() / width)
    }

    /// The [`Error::Internal`] for a panic caught at a boundary: `what` panicked, with the
    /// panic's message.
    pub fn from_panic(what: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        Error::Internal(format!("{what} panicked: {message}"))
    }

    /// Builds an [`Error::InvalidArgument`].
    pub fn invalid(argument: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            argument: argument.into(),
            message: message.into(),
        }
    }

    /// The message given when the machine has no usable adapter, with the ways to get one.
    pub fn no_adapter_hint(what: &str) -> Self {
        Error::NoAdapter(format!(
            "{what}. Install a GPU driver with Vulkan, Metal, DX12 or OpenGL ES 3.1 support, \
             or, on a machine without a GPU, Mesa's software rasterisers \
             (Debian/Ubuntu: `apt-get install mesa-vulkan-drivers libegl-mesa0`)"
        ))
    }
}

//! One entry per Fisher operation for host and resident operands: the kind of the operand
//! picks the host implementation (through the engine) or the resident one (where the rows
//! live, the numpy path's checks and errors read there); the result goes by the rule of
//! [`Destination`]. Both implementations check their own operands (in the same words).
//! The `*_shapes` checks take the operands' shapes as the caller gave them (a DeviceArray's
//! logical shape included); a binding runs them before it takes `out` or runs anything.

use crate::context::MultiGpuContext;
use crate::error::{Error, Result};
use crate::plan::{Plan, Strategy};
use crate::resident::{Destination, Operand, Outcome, ResidentArray};

use crate::dtype::as_f64_mut;

use super::categorical::{fisher_categorical_logits, fisher_categorical_probs};
use super::checks::{matrix, matrix_in, two_axes, value_words, vector};
use super::host_maps::Value;
use super::gaussian::{check_gaussian_operands, fisher_gaussian_diag};
use super::information::fisher_information as host_information;
use super::resident::fisher_information_resident;
use super::resident_maps::{fisher_categorical_resident, fisher_gaussian_resident};

/// The empirical Fisher matrix of (N, `p`) `scores`, host rows or a resident array (of `p`
/// words a row), with optional host (N,) `weights`: the row-major P × P float64 matrix and
/// the plan (None when the rows were reduced where they live).
pub fn fisher_information_of(
    ctx: &MultiGpuContext,
    scores: Operand<'_>,
    p: usize,
    weights: Option<&[f32]>,
    strategy: Option<Strategy>,
) -> Result<(Vec<f64>, Option<Plan>)> {
    match scores {
        Operand::Host(data) => {
            host_information(ctx, data, p, weights, strategy).map(|f| (f.matrix, Some(f.plan)))
        }
        Operand::Resident(array) => {
            width("scores", array, p)?;
            Ok((fisher_information_resident(ctx, array, weights)?, None))
        }
    }
}

/// The shapes of a `fisher_information` call as the caller gave them: (N, P) `scores`
/// (`dims`) and, when given, (N,) weights (`weights`). Returns (N, P).
pub fn information_shapes(
    scores: Operand<'_>,
    dims: &[usize],
    weights: Option<&[usize]>,
) -> Result<(usize, usize)> {
    let (n, p) = matrix("scores", scores, dims)?;
    if let Some(weights) = weights {
        vector("weights", weights, n)?;
    }
    Ok((n, p))
}

/// The shape of a `fisher_categorical` call's (N, K) `values` (`dims`, as the caller gave
/// them), probabilities or (when `logits`) logits. Returns (N, K).
pub fn categorical_shapes(
    values: Operand<'_>,
    dims: &[usize],
    logits: bool,
) -> Result<(usize, usize)> {
    matrix(if logits { "logits" } else { "probs" }, values, dims)
}

/// The shapes of a `fisher_gaussian` call's `mean` and `var` as the caller gave them
/// (`dims`): each (N, D), `var` of `mean`'s shape. Returns both, as [`fisher_gaussian`]
/// takes them.
pub fn gaussian_shapes(
    (mean, var): (Operand<'_>, Operand<'_>),
    [mean_dims, var_dims]: [&[usize]; 2],
) -> Result<[(usize, usize); 2]> {
    // Host operands beside a float64 DeviceArray are float64 (the binding checks it).
    let host_words = match (mean, var) {
        (Operand::Resident(a), _) | (_, Operand::Resident(a)) => value_words(a),
        _ => 1,
    };
    let shapes = [
        matrix_in("mean", mean, mean_dims, host_words)?,
        matrix_in("var", var, var_dims, host_words)?,
    ];
    same_shapes(shapes)?;
    Ok(shapes)
}

/// `diag(p) - p p^T` of (N, `k`) `values`, probabilities or (when `logits`) logits, host
/// rows or a resident array, into `out` (N × K × K words, or a resident array of K rows per
/// sample).
pub fn fisher_categorical(
    ctx: &MultiGpuContext,
    values: Operand<'_>,
    (k, logits): (usize, bool),
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    match values {
        Operand::Host(data) => host_categorical(ctx, data, (k, logits), host_out(out)?, strategy),
        Operand::Resident(array) => {
            width(if logits { "logits" } else { "probs" }, array, k)?;
            resident_out(ctx, out, |target| {
                fisher_categorical_resident(ctx, array, logits, target)
            })
        }
    }
}

/// [`fisher_categorical`] of host float64 `values`, computed in float64 on the devices that
/// run it, into `out` (the words of N × K × K float64 values).
pub fn fisher_categorical_f64(
    ctx: &MultiGpuContext,
    values: &[f64],
    call: (usize, bool),
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    host_categorical(ctx, values, call, f64_out(out)?, strategy)
}

/// The shape (N, W) of a host float64 operand named `argument` (`dims`, as the caller gave
/// it) of `fisher_categorical` or `fisher_gaussian`.
pub fn host_shape_f64(argument: &str, dims: &[usize]) -> Result<(usize, usize)> {
    two_axes(argument, dims)
}

/// `diag(p) - p p^T` of host (N, `k`) probabilities or logits into host `out`.
fn host_categorical<T: Value>(
    ctx: &MultiGpuContext,
    data: &[T],
    (k, logits): (usize, bool),
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let plan = if logits {
        fisher_categorical_logits(ctx, data, k, out, strategy)?
    } else {
        fisher_categorical_probs(ctx, data, k, out, strategy)?
    };
    Ok(Outcome {
        plan: Some(plan),
        array: None,
    })
}

/// The Fisher matrices of N diagonal Gaussians from `mean` and `var` of the same shape
/// (N, D) (`shapes`, as the caller gave them), each host rows or a resident array, into
/// `out` (N × 2D × 2D words, or a resident array of 2D rows per sample with the sharding of
/// a resident `var`, else of `mean`).
pub fn fisher_gaussian(
    ctx: &MultiGpuContext,
    (mean, var): (Operand<'_>, Operand<'_>),
    shapes: [(usize, usize); 2],
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let d = same_shapes(shapes)?;
    match (mean, var) {
        (Operand::Host(mean), Operand::Host(var)) => {
            host_gaussian(ctx, (mean, var), d, host_out(out)?, strategy)
        }
        _ => resident_out(ctx, out, |target| {
            fisher_gaussian_resident(ctx, mean, var, target)
        }),
    }
}

/// [`fisher_gaussian`] of host float64 `mean` and `var` (`shapes` as the caller gave them),
/// computed in float64 on the devices that run it, into `out` (the words of N × 2D × 2D
/// float64 values).
pub fn fisher_gaussian_f64(
    ctx: &MultiGpuContext,
    operands: (&[f64], &[f64]),
    shapes: [(usize, usize); 2],
    out: Destination<'_>,
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let d = same_shapes(shapes)?;
    host_gaussian(ctx, operands, d, f64_out(out)?, strategy)
}

/// The Gaussians' Fisher matrices of host `mean` and `var` into host `out`.
fn host_gaussian<T: Value>(
    ctx: &MultiGpuContext,
    (mean, var): (&[T], &[T]),
    d: usize,
    out: &mut [T],
    strategy: Option<Strategy>,
) -> Result<Outcome> {
    let plan = fisher_gaussian_diag(ctx, mean, var, d, out, strategy)?;
    Ok(Outcome {
        plan: Some(plan),
        array: None,
    })
}

/// The checks of [`fisher_gaussian`] on host `mean` and `var` that need no context and no
/// `out` (a cluster's driver runs them on the whole call before it splits it).
pub fn check_gaussian<T: Value>(mean: &[T], var: &[T], shapes: [(usize, usize); 2]) -> Result<()> {
    let d = same_shapes(shapes)?;
    check_gaussian_operands(mean, var, d)
}

/// Refuses a `var` of another shape than `mean`'s (`shapes`, as the caller gave them);
/// returns D.
fn same_shapes(shapes: [(usize, usize); 2]) -> Result<usize> {
    let [(n, d), (rows, cols)] = shapes;
    if (rows, cols) != (n, d) {
        return Err(Error::Shape {
            argument: "var".into(),
            expected: format!("({n}, {d})"),
            actual: format!("({rows}, {cols})"),
        });
    }
    Ok(d)
}

/// Refuses a resident array of another width (in values) than the caller's `cols`.
fn width(argument: &str, array: &ResidentArray, cols: usize) -> Result<()> {
    let words = value_words(array);
    if array.cols() != cols * words {
        return Err(Error::Shape {
            argument: argument.into(),
            expected: format!("(N, {cols})"),
            actual: format!("({}, {})", array.rows(), array.cols() / words),
        });
    }
    Ok(())
}

/// The host words of a call on host operands (a resident `out` needs a resident operand).
fn host_out(out: Destination<'_>) -> Result<&mut [f32]> {
    match out {
        Destination::Host(out) => Ok(out),
        Destination::Resident(_) => Err(Error::invalid(
            "out",
            "expected a numpy array or None (a DeviceArray out is taken when an operand is a \
             DeviceArray), got DeviceArray",
        )),
    }
}

/// The float64 values of a float64 call's host `out` (the words of a float64 array, which
/// are 8-byte aligned).
fn f64_out(out: Destination<'_>) -> Result<&mut [f64]> {
    as_f64_mut(host_out(out)?)
        .ok_or_else(|| Error::Internal("a float64 out whose words are not float64 values".into()))
}

/// Runs a resident map (`run` takes the resident `out`, or makes a new array when None)
/// into `out`: host words get the new array's rows gathered.
fn resident_out(
    ctx: &MultiGpuContext,
    out: Destination<'_>,
    run: impl FnOnce(Option<&ResidentArray>) -> Result<Option<ResidentArray>>,
) -> Result<Outcome> {
    let missing = || Error::Internal("a resident map without an out made no array".into());
    match out {
        Destination::Resident(target) => Ok(Outcome {
            plan: None,
            array: run(target)?,
        }),
        Destination::Host(out) => {
            let array = run(None)?.ok_or_else(missing)?;
            if out.len() != array.rows() * array.cols() {
                return Err(Error::Shape {
                    argument: "out".into(),
                    expected: format!("{} floats (the result's)", array.rows() * array.cols()),
                    actual: format!("{} floats", out.len()),
                });
            }
            ctx.gather(&array, out)?;
            Ok(Outcome::default())
        }
    }
}

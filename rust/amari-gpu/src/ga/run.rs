//! The geometric-algebra entry points that run on a context: shape checks naming the
//! operand, broadcast of a single multivector, then a run through the engine over host
//! operands or where resident operands live (one entry, [`check`], for both). Host operands
//! and resident arrays are the engine's words in the call's dtype (two per float64 value).

use super::algebra::Algebra;
use super::cl3::{geometric_cl3_kernel, CL3_BLADES};
use super::codegen::Broadcast;
use super::kernels::kernel;
use super::operation::Operation;
use super::sandwich_map::{matrix, matrix_f64};
use crate::context::MultiGpuContext;
use crate::dtype::Dtype;
use crate::error::{shape_text, Error, Result};
use crate::plan::{Plan, Strategy};
use crate::resident::{Destination, Operand, Ready};

/// The multivectors of operand `name`, of `words` words each, whose shape as the caller gave
/// it is `shape` (a host array's before it became rows, a DeviceArray's logical shape): the
/// one width check of every geometric-algebra entry point, in the caller's shape. Host rows
/// may be more than the caller's (a broadcast copy), never of another width; a resident
/// array holds exactly the rows and width its shape says. `words` counts values; a host
/// operand holds them as words of `dtype`.
fn rows(
    name: &str,
    operand: Operand<'_>,
    shape: &[usize],
    (words, dtype): (usize, Dtype),
) -> Result<usize> {
    let Some((&last, lead)) = shape.split_last().filter(|&(&last, _)| last == words) else {
        return Err(Error::Shape {
            argument: name.into(),
            expected: format!("(..., {words})"),
            actual: shape_text(shape),
        });
    };
    match operand {
        Operand::Host(data) => Error::rows(name, data, dtype.words_of(last), &shape_text(shape)),
        Operand::Resident(array) if array.dtype() != dtype => Err(Error::invalid(
            name,
            format!(
                "expected a DeviceArray of {dtype} (the dtype the call computes in), got one \
                 of {}",
                array.dtype()
            ),
        )),
        Operand::Resident(array)
            if (array.rows(), array.cols()) == (lead.iter().product(), dtype.words_of(last)) =>
        {
            Ok(array.rows())
        }
        Operand::Resident(array) => Err(Error::Shape {
            argument: name.into(),
            expected: format!(
                "{} (the DeviceArray's rows and row width)",
                shape_text(shape)
            ),
            actual: format!("{} rows of {}", array.rows(), array.cols()),
        }),
    }
}

/// The shapes of operands as a caller of the Rust API passes them: flat host rows of
/// `dtype` values are (N, `values`), or `(len,)` (refused by [`rows`]) when not a whole number
/// of rows; a resident array is (rows, cols).
fn own_shapes(operands: &[Operand<'_>], values: &[usize], dtype: Dtype) -> Vec<Vec<usize>> {
    let own = |(operand, &values): (&Operand<'_>, &usize)| match *operand {
        Operand::Host(data) => match data.len().checked_div(dtype.words_of(values)) {
            Some(n) if n * dtype.words_of(values) == data.len() => vec![n, values],
            _ => vec![data.len() * 4 / dtype.bytes()],
        },
        Operand::Resident(array) => vec![array.rows(), array.cols() * 4 / array.dtype().bytes()],
    };
    operands.iter().zip(values).map(own).collect()
}

/// Values per row of each of `n` operands of `op`.
fn widths(algebra: &Algebra, op: Operation, n: usize) -> Vec<usize> {
    (0..n).map(|slot| op.input_words(slot, algebra)).collect()
}

/// The items of a call of `op` on `operands` and which operand, if any, is broadcast:
/// operands are batches of equal length, or one of a product's two operands is a single
/// multivector applied to every row of the other.
pub fn shape(algebra: &Algebra, op: Operation, operands: &[&[f32]]) -> Result<(usize, Broadcast)> {
    let operands: Vec<Operand<'_>> = operands.iter().map(|d| Operand::Host(d)).collect();
    let shapes = own_shapes(&operands, &widths(algebra, op, operands.len()), Dtype::F32);
    shape_of(algebra, op, &operands, &shapes, Dtype::F32)
}

/// [`shape`] of host or resident operands whose shapes as the caller gave them are `shapes`.
fn shape_of(
    algebra: &Algebra,
    op: Operation,
    operands: &[Operand<'_>],
    shapes: &[Vec<usize>],
    dtype: Dtype,
) -> Result<(usize, Broadcast)> {
    op.check(algebra)?;
    op.check_dtype(dtype)?;
    let names = op.operands();
    if operands.len() != names.len() {
        return Err(Error::invalid(
            "operands",
            format!(
                "{} takes {} operands, got {}",
                op.name(),
                names.len(),
                operands.len()
            ),
        ));
    }
    if shapes.len() != operands.len() {
        return Err(Error::invalid(
            "shapes",
            format!(
                "expected one shape per operand ({}), got {}",
                operands.len(),
                shapes.len()
            ),
        ));
    }
    let counts = names
        .iter()
        .zip(operands.iter().zip(shapes))
        .enumerate()
        .map(|(slot, (name, (data, shape)))| {
            rows(name, *data, shape, (op.input_words(slot, algebra), dtype))
        })
        .collect::<Result<Vec<_>>>()?;
    // The caller's leading dimensions (all but the words) broadcast by numpy's rules; the
    // rows are then the broadcast's, or one multivector (the count rule below).
    if let [a, b] = shapes {
        let (lead, other) = (&a[..a.len() - 1], &b[..b.len() - 1]);
        let mut pairs = lead.iter().rev().zip(other.iter().rev());
        if !pairs.all(|(&x, &y)| x == y || x == 1 || y == 1) {
            return Err(Error::Broadcast {
                argument: names[1].into(),
                other: names[0].into(),
                lead: shape_text(lead),
                actual: shape_text(b),
            });
        }
    }
    if let (Operation::SandwichBlades(_), [n, m]) = (op, &counts[..]) {
        if *n != 1 {
            return Err(Error::invalid(
                "r",
                format!(
                    "expected one rotor of shape ({},) with blades= (its map is built once \
                     per call), got a batch of {n} for {m} rows: call once per rotor, or pass \
                     x's rows with every blade",
                    algebra.blades()
                ),
            ));
        }
    }
    match counts[..] {
        [n] => Ok((n, Broadcast::None)),
        [n, m] if n == m => Ok((n, Broadcast::None)),
        [1, m] => Ok((m, Broadcast::Left)),
        [n, 1] => Ok((n, Broadcast::Right)),
        [n, m] => {
            let words = op.input_words(1, algebra);
            Err(Error::Shape {
                argument: names[1].into(),
                expected: format!("({n}, {words}) or ({words},)"),
                actual: format!("({m}, {words})"),
            })
        }
        _ => Err(Error::Internal(
            "an operation of one or two operands".into(),
        )),
    }
}

/// `op` in `algebra`, computing in `dtype`, on operands of 2ⁿ values per multivector (see
/// [`shape`] for broadcasting), host rows or resident arrays (words of `dtype`) whose shapes as the caller gave them are `shapes` (errors speak of those): the
/// operands checked, and what runs it into `out` (items × `op.output_words(algebra)`
/// values) by the rule of every map operation: over host operands through the planner, or,
/// when an operand is resident, where its rows live (host operands uploaded to match).
pub fn check<'a>(
    algebra: &Algebra,
    op: Operation,
    operands: &'a [Operand<'a>],
    shapes: &[Vec<usize>],
    dtype: Dtype,
) -> Result<Ready<'a>> {
    let (items, broadcast) = shape_of(algebra, op, operands, shapes, dtype)?;
    let broadcast = bound_whole(op, items, broadcast);
    let one_rotor = broadcast.is_map(op);
    let kernel = kernel(algebra, op, broadcast, dtype);
    let algebra = *algebra;
    Ok(Ready::new(move |ctx, out, strategy| {
        let mut bound = operands.to_vec();
        let mut map;
        if one_rotor {
            let words = dtype.words_of(algebra.blades());
            let r = rotor(ctx, bound[0], words)?;
            map = match dtype {
                Dtype::F64 => matrix_f64(&algebra, &r),
                Dtype::F32 => matrix(&algebra, &r),
                // float16 rows: the float32 map of the widened rotor (exact), as the float32
                // sandwich builds it from those values.
                Dtype::F16 => {
                    let mut wide = vec![0.0f32; algebra.blades()];
                    crate::host::f16::widen(crate::host::simd::dispatched(), &r, &mut wide);
                    matrix(&algebra, &wide)
                }
            };
            // Rows of some blades: the map's rows and columns of those blades (the whole map
            // when the rows hold every blade).
            if let Operation::SandwichBlades(blades) = op {
                map = match dtype {
                    Dtype::F64 => blades.restrict::<f64>(&map, algebra.blades())?,
                    Dtype::F32 | Dtype::F16 => blades.restrict::<f32>(&map, algebra.blades())?,
                };
            }
            bound[0] = Operand::Host(&map);
        }
        let named: Vec<(&str, Operand<'_>)> =
            op.operands().iter().copied().zip(bound).collect();
        ctx.run_map_to(&kernel, &named, items, out, strategy)
    }))
}

/// The broadcast the kernel of `op` runs with over `items` items of operands that broadcast
/// as `broadcast`: one rotor for every row (a lone row beside it included, so a row's bits
/// never depend on the batch it came in) is the linear map of `sandwich_map`, bound in the
/// rotor's place.
pub(crate) fn bound_whole(op: Operation, items: usize, broadcast: Broadcast) -> Broadcast {
    let lone = items == 1 && broadcast == Broadcast::None;
    if matches!(op, Operation::Sandwich | Operation::SandwichBlades(_)) && lone {
        Broadcast::Left
    } else {
        broadcast
    }
}

/// The words of a single multivector operand (`words` of them), read back if resident.
fn rotor(ctx: &MultiGpuContext, operand: Operand<'_>, words: usize) -> Result<Vec<f32>> {
    match operand {
        Operand::Host(data) => data
            .get(..words)
            .map(<[f32]>::to_vec)
            .ok_or_else(|| Error::Internal("a single rotor holds one multivector".into())),
        Operand::Resident(array) => {
            let mut r = vec![0.0f32; words];
            ctx.gather(array, &mut r)?;
            Ok(r)
        }
    }
}

/// [`check`] and run on host operands into host words (float32): returns the plan.
pub fn apply(
    ctx: &MultiGpuContext,
    algebra: &Algebra,
    op: Operation,
    operands: &[&[f32]],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    apply_in(ctx, (algebra, op, Dtype::F32), operands, out, strategy)
}

/// [`apply`] computing in `dtype`: operands and `out` hold words of it (two per float64
/// value, see `crate::dtype`).
pub fn apply_in(
    ctx: &MultiGpuContext,
    (algebra, op, dtype): (&Algebra, Operation, Dtype),
    operands: &[&[f32]],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let operands: Vec<Operand<'_>> = operands.iter().map(|d| Operand::Host(d)).collect();
    let shapes = own_shapes(&operands, &widths(algebra, op, operands.len()), dtype);
    let ready = check(algebra, op, &operands, &shapes, dtype)?;
    let ran = ready.run(ctx, Destination::Host(out), strategy)?;
    ran.plan
        .ok_or_else(|| Error::Internal("a run over host operands has a plan".into()))
}

/// `out[i] = a[i] b[i]` in Cl(3,0) for flat row-major batches of shape (N, 8).
pub fn geometric_product_cl3(
    ctx: &MultiGpuContext,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    strategy: Option<Strategy>,
) -> Result<Plan> {
    let operands = [Operand::Host(a), Operand::Host(b)];
    let shapes = own_shapes(&operands, &[CL3_BLADES; 2], Dtype::F32);
    let n = rows("a", operands[0], &shapes[0], (CL3_BLADES, Dtype::F32))?;
    let nb = rows("b", operands[1], &shapes[1], (CL3_BLADES, Dtype::F32))?;
    if nb != n {
        return Err(Error::Shape {
            argument: "b".into(),
            expected: format!("({n}, {CL3_BLADES}) like a"),
            actual: format!("({nb}, {CL3_BLADES})"),
        });
    }
    if out.len() != a.len() {
        return Err(Error::Shape {
            argument: "out".into(),
            expected: format!("({n}, {CL3_BLADES})"),
            actual: format!("{} floats", out.len()),
        });
    }
    ctx.run_map(&geometric_cl3_kernel(), &[a, b], out, n, strategy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(shapes: &[Vec<usize>], data: &[&[f32]]) -> String {
        let pga = Algebra::new(3, 0, 1).unwrap();
        let op = Operation::parse("geometric_product", 0).unwrap();
        let operands: Vec<Operand<'_>> = data.iter().map(|d| Operand::Host(d)).collect();
        let checked = check(&pga, op, &operands, shapes, Dtype::F32).map(drop);
        checked.map_or_else(|error| error.to_string(), |()| "accepted".into())
    }

    #[test]
    fn operands_are_checked_in_the_callers_shapes() {
        let (row, two, three) = ([0.0f32; 16], [0.0f32; 32], [0.0f32; 48]);
        // 2 x 16 x 1 words are two whole rows of 16: the caller's shape is what is refused.
        assert_eq!(
            text(&[vec![2, 16, 1], vec![16]], &[&two, &row]),
            "a: expected shape (..., 16), got (2, 16, 1)"
        );
        assert_eq!(
            text(&[vec![], vec![16]], &[&row[..1], &row]),
            "a: expected shape (..., 16), got ()"
        );
        // A wrong width is named before leading dimensions that do not broadcast.
        assert_eq!(
            text(&[vec![2, 16], vec![3, 15]], &[&two, &three[..45]]),
            "b: expected shape (..., 16), got (3, 15)"
        );
        assert_eq!(
            text(&[vec![2, 16], vec![3, 16]], &[&two, &three]),
            "b: expected leading dimensions that broadcast with a's (2,), got shape (3, 16)"
        );
        assert_eq!(
            text(&[vec![2, 1, 16], vec![3, 16]], &[&two, &three]),
            "b: expected shape (2, 16) or (16,), got (3, 16)"
        );
        assert_eq!(
            text(&[vec![3, 16], vec![1, 1, 16]], &[&three, &row]),
            "accepted"
        );
    }
}

//! The float types tropical values come in (float32 and float64): what the products, the
//! shortest paths and their checks need of one, so that each is written once over both. A
//! value travels through the engine as the words of its dtype (`crate::dtype`).

use std::borrow::Cow;
use std::fmt::{Debug, Display, LowerExp};
use std::ops::{Add, Neg};

use crate::dtype::{self, Dtype};

/// A float type tropical values are held and computed in.
pub trait Scalar:
    bytemuck::Pod
    + Send
    + Sync
    + Default
    + PartialOrd
    + Debug
    + Display
    + LowerExp
    + Neg<Output = Self>
    + Add<Output = Self>
    + 'static
{
    /// The dtype of the kernels that compute in it.
    const DTYPE: Dtype;
    /// +inf.
    const INFINITY: Self;
    /// −inf.
    const NEG_INFINITY: Self;
    /// +0.0.
    const ZERO: Self;
    /// The largest finite value.
    const MAX: f64;
    /// The finite range as messages name it.
    const RANGE: &'static str;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// Whether the value is finite.
    fn is_finite(self) -> bool;
    /// The type's own `min` (`f32::min`, `f64::min`).
    fn fmin(self, other: Self) -> Self;
    /// The value in float64 (exact).
    fn to_f64(self) -> f64;
    /// `v` rounded to this type.
    fn from_f64(v: f64) -> Self;
    /// Values as the engine's 4-byte words.
    fn words(values: &[Self]) -> &[f32];
    /// Values as the engine's 4-byte words, to be written.
    fn words_mut(values: &mut [Self]) -> &mut [f32];
    /// The engine's words as values: in place when aligned for the type, else copied.
    fn values(words: &[f32]) -> Cow<'_, [Self]>;
    /// Runs `write` on the engine's words as values: in place when aligned for the type,
    /// else on values beside them that are then stored into `words`.
    fn with_values_mut(words: &mut [f32], write: impl FnOnce(&mut [Self]));
}

impl Scalar for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const INFINITY: f32 = f32::INFINITY;
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const ZERO: f32 = 0.0;
    const MAX: f64 = f32::MAX as f64;
    const RANGE: &'static str = "±3.4e38";
    fn is_nan(self) -> bool {
        f32::is_nan(self)
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
    fn fmin(self, other: f32) -> f32 {
        f32::min(self, other)
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn words(values: &[f32]) -> &[f32] {
        values
    }
    fn words_mut(values: &mut [f32]) -> &mut [f32] {
        values
    }
    fn values(words: &[f32]) -> Cow<'_, [f32]> {
        Cow::Borrowed(words)
    }
    fn with_values_mut(words: &mut [f32], write: impl FnOnce(&mut [f32])) {
        write(words)
    }
}

impl Scalar for f64 {
    const DTYPE: Dtype = Dtype::F64;
    const INFINITY: f64 = f64::INFINITY;
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const ZERO: f64 = 0.0;
    const MAX: f64 = f64::MAX;
    const RANGE: &'static str = "±1.8e308";
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
    fn fmin(self, other: f64) -> f64 {
        f64::min(self, other)
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn words(values: &[f64]) -> &[f32] {
        dtype::f64_words(values)
    }
    fn words_mut(values: &mut [f64]) -> &mut [f32] {
        dtype::f64_words_mut(values)
    }
    fn values(words: &[f32]) -> Cow<'_, [f64]> {
        match dtype::as_f64(words) {
            Some(v) => Cow::Borrowed(v),
            None => Cow::Owned((0..words.len() / 2).map(|i| dtype::read_f64(words, i)).collect()),
        }
    }
    fn with_values_mut(words: &mut [f32], write: impl FnOnce(&mut [f64])) {
        if let Some(values) = dtype::as_f64_mut(words) {
            return write(values);
        }
        // Words of a chunk are only 4-byte aligned: the values are written beside them.
        let mut values = vec![0.0f64; words.len() / 2];
        write(&mut values);
        for (i, &v) in values.iter().enumerate() {
            dtype::write_f64(words, i, v);
        }
    }
}

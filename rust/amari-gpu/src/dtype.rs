//! The element types a kernel computes in, and how their values ride on the engine's 4-byte
//! words. The executor, staging, chunks, resident shards and pools move `f32`-sized words and
//! never look inside them: a float32 value is one word, a float64 value two (its bytes in
//! memory order), float16 values two to a word (the lower-addressed one in the low half). A kernel's [`Dtype`] (see `Kernel::dtype`) says what its words mean; a
//! device runs a dtype only when its adapter offers the shader feature that dtype needs.
//!
//! Words are carried as `f32` only because that is the engine's slice type: copies move their
//! bits unchanged, and nothing reads a non-float32 word as a float32 value.

use crate::error::{Error, Result};

/// An element type of kernel data, by numpy's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Dtype {
    /// IEEE binary16, two values per word.
    F16,
    /// IEEE binary32, one value per word (every kernel's type until it says otherwise).
    #[default]
    F32,
    /// IEEE binary64, two words per value.
    F64,
}

impl Dtype {
    /// Every dtype, narrowest first.
    pub const ALL: [Dtype; 3] = [Dtype::F16, Dtype::F32, Dtype::F64];

    /// Bytes per value.
    pub fn bytes(self) -> usize {
        match self {
            Dtype::F16 => 2,
            Dtype::F32 => 4,
            Dtype::F64 => 8,
        }
    }

    /// numpy's name: "float16", "float32" or "float64".
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "float16",
            Dtype::F32 => "float32",
            Dtype::F64 => "float64",
        }
    }

    /// The dtype of numpy's name `name`; an error naming `argument` otherwise.
    pub fn parse(argument: &str, name: &str) -> Result<Dtype> {
        Dtype::ALL
            .into_iter()
            .find(|d| d.name() == name)
            .ok_or_else(|| {
                Error::invalid(
                    argument,
                    format!("expected one of \"float16\", \"float32\", \"float64\", got {name:?}"),
                )
            })
    }

    /// 4-byte words holding `elements` values: float16 values pack two to a word, so their
    /// count must be even (a kernel's rows are laid out so that it is).
    pub fn words(self, elements: usize) -> Result<usize> {
        match self {
            Dtype::F16 if !elements.is_multiple_of(2) => Err(Error::invalid(
                "elements",
                format!(
                    "float16 values pack two to a 4-byte word: expected an even count, got \
                     {elements}"
                ),
            )),
            Dtype::F16 => Ok(elements / 2),
            Dtype::F32 => Ok(elements),
            Dtype::F64 => elements.checked_mul(2).ok_or_else(|| {
                Error::invalid(
                    "elements",
                    format!("{elements} float64 values exceed the address space"),
                )
            }),
        }
    }

    /// The wgpu feature a device needs to run kernels of this dtype (empty for float32).
    /// On Vulkan, wgpu's `SHADER_F16` also turns on `VK_KHR_16bit_storage` (16-bit values in
    /// storage buffers), which float16 storage needs; nothing more is asked for.
    pub fn feature(self) -> wgpu::Features {
        match self {
            Dtype::F16 => wgpu::Features::SHADER_F16,
            Dtype::F32 => wgpu::Features::empty(),
            Dtype::F64 => wgpu::Features::SHADER_F64,
        }
    }

    /// The feature's name as wgpu spells it, for messages.
    pub fn feature_name(self) -> &'static str {
        match self {
            Dtype::F16 => "SHADER_F16",
            Dtype::F32 => "none",
            Dtype::F64 => "SHADER_F64",
        }
    }

    /// The dtypes an adapter offering `features` runs (float32 always), narrowest first.
    pub fn supported_by(features: wgpu::Features) -> Vec<Dtype> {
        Dtype::ALL
            .into_iter()
            .filter(|d| features.contains(d.feature()))
            .collect()
    }

    /// The dtype a kernel of this dtype computes and accumulates in: float16 is storage
    /// only, its values widened to float32 on load and rounded once to float16 at the store.
    pub fn compute(self) -> Dtype {
        match self {
            Dtype::F16 => Dtype::F32,
            other => other,
        }
    }

    /// 4-byte words of `values` values whose count is known to suit the dtype (an even
    /// count for float16, which [`Dtype::words`] checks).
    pub fn words_of(self, values: usize) -> usize {
        values * self.bytes() / 4
    }

    /// The WGSL scalar type.
    pub fn wgsl(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }

    /// The WGSL `enable` line a source of this dtype starts with ("" when none is needed:
    /// naga takes `f64` under `SHADER_F64` without a directive).
    pub fn wgsl_enable(self) -> &'static str {
        match self {
            Dtype::F16 => "enable f16;\n",
            Dtype::F32 | Dtype::F64 => "",
        }
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// float64 values as the engine's words (always possible: 8-byte alignment is 4-byte
/// alignment).
pub fn f64_words(values: &[f64]) -> &[f32] {
    bytemuck::cast_slice(values)
}

/// float64 values as the engine's words, to be written.
pub fn f64_words_mut(values: &mut [f64]) -> &mut [f32] {
    bytemuck::cast_slice_mut(values)
}

/// float16 values (as their bits) as the engine's words: an error unless their count is even
/// and the slice 4-byte aligned (a numpy float16 array of even length is, when its buffer
/// is; callers copy otherwise).
pub fn f16_words(values: &[u16]) -> Result<&[f32]> {
    Dtype::F16.words(values.len())?;
    if values.is_empty() {
        // No rows: numpy's pointer of an empty float16 array need not be 4-byte aligned.
        return Ok(&[]);
    }
    bytemuck::try_cast_slice(values)
        .map_err(|e| Error::invalid("float16 values", format!("not viewable as words: {e}")))
}

/// float16 values (as their bits) as the engine's words, to be written: the conditions of
/// [`f16_words`].
pub fn f16_words_mut(values: &mut [u16]) -> Result<&mut [f32]> {
    Dtype::F16.words(values.len())?;
    if values.is_empty() {
        // No rows: numpy's pointer of an empty float16 array need not be 4-byte aligned.
        return Ok(&mut []);
    }
    bytemuck::try_cast_slice_mut(values)
        .map_err(|e| Error::invalid("float16 values", format!("not viewable as words: {e}")))
}

/// float64 value `index` of `words` (two words each, in memory order: a float64 array's
/// bytes seen as words). Words of a chunk or a binding are only 4-byte aligned, so the value
/// is assembled from its two words (a bit copy, one unaligned 8-byte load once compiled)
/// rather than read through an `f64` pointer.
#[inline(always)]
pub fn read_f64(words: &[f32], index: usize) -> f64 {
    bytemuck::cast([words[2 * index], words[2 * index + 1]])
}

/// Writes float64 `value` as value `index` of `words`.
#[inline(always)]
pub fn write_f64(words: &mut [f32], index: usize, value: f64) {
    let [lo, hi]: [f32; 2] = bytemuck::cast(value);
    words[2 * index] = lo;
    words[2 * index + 1] = hi;
}

/// float16 value `index` of `words` as its bits (two values per word, the lower-addressed
/// one in the low half).
#[inline(always)]
pub fn read_f16_bits(words: &[f32], index: usize) -> u16 {
    let word = words[index / 2].to_bits();
    (word >> (16 * (index % 2))) as u16
}

/// Whether `words` may be read as `f64`s in place (8-byte aligned): host kernels that want
/// wide loads check this and take [`read_f64`] otherwise.
pub fn f64_aligned(words: &[f32]) -> bool {
    (words.as_ptr() as usize).is_multiple_of(std::mem::align_of::<f64>())
}

/// `words` as `f64`s when they are 8-byte aligned and even in count, else `None`.
pub fn as_f64(words: &[f32]) -> Option<&[f64]> {
    bytemuck::try_cast_slice(words).ok()
}

/// `words` as `f64`s to be written, when 8-byte aligned and even in count, else `None`.
pub fn as_f64_mut(words: &mut [f32]) -> Option<&mut [f64]> {
    bytemuck::try_cast_slice_mut(words).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_count_values_per_dtype() {
        assert_eq!(Dtype::F32.words(5), Ok(5));
        assert_eq!(Dtype::F64.words(5), Ok(10));
        assert_eq!(Dtype::F16.words(6), Ok(3));
        let odd = Dtype::F16.words(5).unwrap_err().to_string();
        assert!(odd.contains("even count, got 5"), "{odd}");
        assert!(Dtype::F64.words(usize::MAX).is_err());
    }

    #[test]
    fn names_are_numpys_and_parse_back() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::parse("dtype", d.name()), Ok(d));
        }
        let bad = Dtype::parse("dtype", "complex64").unwrap_err().to_string();
        assert!(bad.starts_with("dtype: expected one of"), "{bad}");
        assert!(bad.contains("\"complex64\""), "{bad}");
    }

    #[test]
    fn features_say_which_dtypes_a_device_runs() {
        assert_eq!(
            Dtype::supported_by(wgpu::Features::empty()),
            vec![Dtype::F32]
        );
        let both = wgpu::Features::SHADER_F64 | wgpu::Features::SHADER_F16;
        assert_eq!(Dtype::supported_by(both), Dtype::ALL.to_vec());
    }

    #[test]
    fn f64_values_round_trip_through_unaligned_words() {
        let values = [1.0f64 / 3.0, -0.0, f64::MIN_POSITIVE / 4.0, f64::INFINITY];
        // One word in front puts the values at a 4-byte (not 8-byte) offset.
        let mut words = vec![0.0f32; 1 + 2 * values.len()];
        for (i, &v) in values.iter().enumerate() {
            write_f64(&mut words[1..], i, v);
        }
        for (i, &v) in values.iter().enumerate() {
            assert_eq!(read_f64(&words[1..], i).to_bits(), v.to_bits());
        }
        assert_eq!(f64_words(&values).len(), 8);
        let aligned = f64_words(&values);
        assert!(f64_aligned(aligned));
        assert_eq!(as_f64(aligned), Some(&values[..]));
    }

    #[test]
    fn f16_words_need_an_even_count() {
        // Backed by words, so the values are 4-byte aligned whatever the stack does.
        let backing = [0xc000_3c00u32, 0x0001_7bff];
        let bits: &[u16] = bytemuck::cast_slice(&backing);
        assert_eq!(bits, [0x3c00, 0xc000, 0x7bff, 0x0001]);
        let words = f16_words(bits).unwrap();
        assert_eq!(words.len(), 2);
        for (i, &b) in bits.iter().enumerate() {
            assert_eq!(read_f16_bits(words, i), b);
        }
        assert!(f16_words(&bits[..3]).is_err());
    }
}

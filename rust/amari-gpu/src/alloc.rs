//! Host allocations whose size comes from a call's arguments: checked and fallible, so
//! that a request too large for the machine is an [`Error::HostOutOfMemory`] naming the
//! array and the bytes asked, never an abort of the process.

use crate::error::{Error, Result};

/// `len` default values (zeros), or the error naming `argument` when the bytes cannot be
/// allocated (or do not even fit in an address).
pub fn zeroed<T: Clone + Default>(argument: &str, len: usize) -> Result<Vec<T>> {
    let bytes = len as u128 * std::mem::size_of::<T>() as u128;
    let too_big = || Error::HostOutOfMemory {
        argument: argument.to_string(),
        bytes,
    };
    if bytes > isize::MAX as u128 {
        return Err(too_big());
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| too_big())?;
    v.resize(len, T::default());
    Ok(v)
}

/// `a * b` as a length, or the error naming `argument` when it does not fit in memory.
pub fn product(argument: &str, factors: &[usize], word_bytes: usize) -> Result<usize> {
    let mut n: u128 = 1;
    for &f in factors {
        n = n.saturating_mul(f as u128);
    }
    if n.saturating_mul(word_bytes as u128) > isize::MAX as u128 {
        return Err(Error::HostOutOfMemory {
            argument: argument.to_string(),
            bytes: n.saturating_mul(word_bytes as u128),
        });
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_requests_are_errors_naming_the_bytes() {
        let e = zeroed::<f32>("out", usize::MAX / 2).unwrap_err();
        assert!(e.to_string().contains("out: cannot allocate"), "{e}");
        assert!(product("out", &[usize::MAX, 2], 4).is_err());
        assert_eq!(zeroed::<f32>("out", 3).unwrap(), vec![0.0; 3]);
        assert_eq!(product("out", &[3, 5], 4).unwrap(), 15);
    }
}

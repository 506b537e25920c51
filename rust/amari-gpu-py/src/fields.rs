//! `fields!`: a dict of a core value's fields under their own names, so each result that
//! crosses to Python lists its fields once here (the stubs' TypedDicts describe them).

/// `fields!(py, value; a, b, c; "extra" => expr, ...)`: a `PyDict` with `value.a`,
/// `value.b`, ... under `"a"`, `"b"`, ..., then the extra entries. Evaluates to
/// `PyResult<Bound<PyDict>>`.
macro_rules! fields {
    ($py:expr, $value:expr; $($field:ident),* $(,)? $(; $($key:literal => $extra:expr),* $(,)?)?) => {{
        let d = pyo3::types::PyDict::new($py);
        (|| -> pyo3::PyResult<_> {
            $( d.set_item(stringify!($field), &$value.$field)?; )*
            $($( d.set_item($key, $extra)?; )*)?
            Ok(d)
        })()
    }};
}

pub(crate) use fields;

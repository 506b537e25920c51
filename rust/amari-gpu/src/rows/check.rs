//! Checks of a `map_rows` kernel before anything reaches a device: parameter names, the
//! user's WGSL parsed by naga, `row`'s signature against the arrays passed, and the
//! wrapped module validated. Every WGSL error names the line and column in the user's
//! source with naga's text; a signature that does not match says which part.

use naga::{ArraySize, Module, Scalar, TypeInner};

use super::wrap::{self, Column};
use crate::error::{Error, Result};

fn compile_error(message: String) -> Error {
    Error::KernelCompile(message)
}

/// Parameter names are WGSL identifiers the wrapper does not use itself.
pub fn param_names(names: &[String]) -> Result<()> {
    for (k, name) in names.iter().enumerate() {
        let mut chars = name.chars();
        let identifier = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !identifier || name == "_" || name.starts_with("__") {
            return Err(Error::invalid(
                "params",
                format!("expected names that are WGSL identifiers, got {name:?}"),
            ));
        }
        if name.starts_with("amari_") {
            return Err(Error::invalid(
                "params",
                format!("names starting with amari_ are the wrapper's own, got {name:?}"),
            ));
        }
        if names[..k].contains(name) {
            return Err(Error::invalid(
                "params",
                format!("expected distinct names, got {name:?} twice"),
            ));
        }
    }
    Ok(())
}

/// Where in `text` (the generated module) a naga error is, as the user sees it: "line L,
/// column C of source" when it falls in the user's `user_lines` lines, else a note that it
/// is in the wrapper (which only a clash with the user's names can cause).
fn place(location: Option<naga::SourceLocation>, user_lines: usize) -> String {
    match location {
        Some(at) if (at.line_number as usize) <= user_lines => {
            format!(
                "line {}, column {} of source",
                at.line_number, at.line_position
            )
        }
        Some(_) => "the code map_rows wraps row in (params and names starting with amari_ \
                    are its own)"
            .into(),
        None => "source".into(),
    }
}

/// Parses `text`; a parse error names its place in the user's source.
fn parse(text: &str, user_lines: usize) -> Result<Module> {
    naga::front::wgsl::parse_str(text).map_err(|e| {
        compile_error(format!(
            "WGSL error at {}: {}\n{}",
            place(e.location(text), user_lines),
            e.message(),
            e.emit_to_string_with_path(text, "source")
        ))
    })
}

/// `ty` as WGSL would spell it, for the types `row` may take and return.
fn describe(module: &Module, ty: naga::Handle<naga::Type>) -> String {
    match &module.types[ty].inner {
        TypeInner::Array {
            base,
            size: ArraySize::Constant(n),
            ..
        } => match module.types[*base].inner {
            TypeInner::Scalar(Scalar::F32) => format!("array<f32, {n}>"),
            _ => format!("an array of {n} non-f32 elements"),
        },
        TypeInner::Array { .. } => "an array without a constant length".into(),
        TypeInner::Scalar(s) => format!("a scalar ({s:?})"),
        other => format!("{other:?}")
            .split(['{', ' ', '('])
            .next()
            .map_or_else(|| "another type".into(), |k| format!("a {k}")),
    }
}

/// Checks that `row` exists, takes one `array<f32, C>` per array with its columns, and
/// returns `array<f32, out_cols>`.
fn signature(module: &Module, columns: &[Column], out_cols: usize) -> Result<()> {
    let Some((_, row)) = module
        .functions
        .iter()
        .find(|(_, f)| f.name.as_deref() == Some("row"))
    else {
        return Err(compile_error(
            "source: expected a function `fn row(...) -> array<f32, out_cols>`, found none".into(),
        ));
    };
    if row.arguments.len() != columns.len() {
        return Err(compile_error(format!(
            "row: expected one parameter per array ({} arrays passed), got {} parameters",
            columns.len(),
            row.arguments.len()
        )));
    }
    for (k, (arg, column)) in row.arguments.iter().zip(columns).enumerate() {
        let got = describe(module, arg.ty);
        let want = format!("array<f32, {}>", column.cols);
        if got != want {
            let name = arg.name.as_deref().unwrap_or("?");
            let shape = if column.broadcast {
                format!("({},)", column.cols)
            } else {
                format!("(N, {})", column.cols)
            };
            return Err(compile_error(format!(
                "row: parameter {} ({name}) must be {want} for array {k} of shape {shape}, \
                 but is {got}",
                k + 1
            )));
        }
    }
    let want = format!("array<f32, {out_cols}>");
    match &row.result {
        None => Err(compile_error(format!(
            "row: must return {want} (out_cols={out_cols}), but returns nothing"
        ))),
        Some(result) => {
            let got = describe(module, result.ty);
            if got == want {
                Ok(())
            } else {
                Err(compile_error(format!(
                    "row: must return {want} (out_cols={out_cols}), but returns {got}"
                )))
            }
        }
    }
}

/// The wrapped module's text, after every check: `source` parsed with the `params`
/// struct beside it, `row`'s signature, then the whole module parsed and validated.
pub fn checked_module(
    source: &str,
    columns: &[Column],
    params: &[String],
    out_cols: usize,
) -> Result<String> {
    param_names(params)?;
    let user_lines = source.lines().count();
    let mut probe = String::from(source);
    probe.push('\n');
    probe.push_str(&wrap::params_struct(params));
    signature(&parse(&probe, user_lines)?, columns, out_cols)?;
    let text = wrap::module(source, columns, params, out_cols);
    let module = parse(&text, user_lines)?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .map_err(|e| {
        compile_error(format!(
            "WGSL error at {}: {}\n{}",
            place(e.location(&text), user_lines),
            e.as_inner(),
            e.emit_to_string_with_path(&text, "source")
        ))
    })?;
    Ok(text)
}

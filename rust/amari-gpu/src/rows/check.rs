//! Checks of a `map_rows` kernel before anything reaches a device: parameter names, the
//! user's WGSL parsed by naga, `row`'s signature against the arrays passed, the wrapped
//! module validated, and what validation lets through but a device would not take: the
//! user's own resources, overrides and entry points (which fail at pipeline or bind-group
//! creation) and more private memory per row than [`MAX_PRIVATE_BYTES`]. Every error names
//! the line and column in the user's source; a signature that does not match says which
//! part.

use naga::{AddressSpace, ArraySize, Module, Scalar, Span, TypeInner};

use super::wrap::{self, Column};
use crate::dtype::Dtype;
use crate::error::{Error, Result};

fn compile_error(message: String) -> Error {
    Error::KernelCompile(message)
}

/// Private memory a kernel may declare per row (per invocation): its `var`s in functions,
/// its module-scope `var<private>`s and the copies of the rows map_rows passes to `row`,
/// summed. 16 KiB (4,096 f32s) is what every backend takes: D3D's FXC compiler holds
/// indexable arrays in at most 4,096 registers of one word each, and a GPU spills private
/// arrays to scratch memory of a size per invocation that drivers bound. On a CPU adapter
/// (llvmpipe, lavapipe) each is a stack array per SIMD lane and thread, so an unbounded
/// one grows the process until the system kills it.
pub const MAX_PRIVATE_BYTES: u64 = 16 * 1024;

/// "line L, column C of source" of `span` in `text`, when it is in the user's lines.
fn user_place(span: Span, text: &str, user_lines: usize) -> Option<String> {
    if !span.is_defined() || span.to_range().is_none_or(|r| r.end > text.len()) {
        return None;
    }
    let at = span.location(text);
    ((at.line_number as usize) <= user_lines).then(|| {
        format!(
            "line {}, column {} of source",
            at.line_number, at.line_position
        )
    })
}

/// Where the user's entry point `name` is defined (naga keeps no span for entry points):
/// the first `fn name` in the user's lines.
fn entry_place(text: &str, name: &str, user_lines: usize) -> String {
    let needle = format!("fn {name}");
    text.lines()
        .take(user_lines)
        .enumerate()
        .find_map(|(k, line)| {
            line.find(&needle)
                .map(|c| format!("line {}, column {} of source", k + 1, c + 1))
        })
        .unwrap_or_else(|| "source".into())
}

/// Refuses what validation accepts but a device would not (or would run wrong): a global
/// the user declares other than a `var<private>` (a resource with its own binding, a
/// uniform, storage, texture, sampler or atomic: map_rows binds only its own arrays; a
/// `var<workgroup>`: rows are independent, and which rows share a workgroup changes with
/// the split), an `override` (its value is never given, so the pipeline cannot be made),
/// an entry point of the user's, and more private memory per row than
/// [`MAX_PRIVATE_BYTES`].
fn declarations(module: &Module, text: &str, user_lines: usize) -> Result<()> {
    let globals = &module.global_variables;
    for (handle, global) in globals.iter() {
        let Some(at) = user_place(globals.get_span(handle), text, user_lines) else {
            continue;
        };
        let name = global.name.as_deref().unwrap_or("?");
        let what = match global.space {
            AddressSpace::Private if global.binding.is_none() => continue,
            AddressSpace::WorkGroup => {
                "a var<workgroup>: each row is computed alone, and which rows share a \
                 workgroup changes with how the call is split, so shared memory is not \
                 allowed"
            }
            _ if global.binding.is_some() => {
                "a resource with its own @group/@binding: map_rows binds only the arrays it \
                 passes to row and params"
            }
            _ => {
                "a resource (uniform, storage, texture or sampler): map_rows binds only the \
                 arrays it passes to row and params"
            }
        };
        return Err(compile_error(format!(
            "WGSL error at {at}: `{name}` is {what}; pass data as arrays of map_rows or as \
             params, and keep module-scope variables var<private>"
        )));
    }
    if let Some((handle, constant)) = module.overrides.iter().next() {
        let at = user_place(module.overrides.get_span(handle), text, user_lines)
            .unwrap_or_else(|| "source".into());
        let name = constant.name.as_deref().unwrap_or("?");
        return Err(compile_error(format!(
            "WGSL error at {at}: `override {name}` is not allowed: map_rows gives no \
             pipeline constants; use a const, or a params value"
        )));
    }
    for entry in &module.entry_points {
        if entry.name != wrap::ENTRY {
            return Err(compile_error(format!(
                "WGSL error at {}: `{}` is an entry point; source defines fn row (and helper \
                 functions), and map_rows makes the entry point",
                entry_place(text, &entry.name, user_lines),
                entry.name
            )));
        }
    }
    private_memory(module, text, user_lines)
}

/// Checks the private memory per row against [`MAX_PRIVATE_BYTES`]; past it, the error
/// names the user's largest declaration (or the rows passed to `row`, when the wrapper's
/// copies of them are what is too large).
fn private_memory(module: &Module, text: &str, user_lines: usize) -> Result<()> {
    let mut layouter = naga::proc::Layouter::default();
    // A type too large to lay out (over 4 GiB) is far past the bound anyway.
    let size = |layouter: &naga::proc::Layouter, ty| u64::from(layouter[ty].size);
    if layouter.update(module.to_ctx()).is_err() {
        return Err(compile_error(format!(
            "source: a type is too large to lay out; a kernel may use at most \
             {MAX_PRIVATE_BYTES} bytes of private memory per row"
        )));
    }
    // (bytes, place in the user's source, name) of every declaration.
    let mut declared: Vec<(u64, Option<String>, String)> = Vec::new();
    for (handle, global) in module.global_variables.iter() {
        if global.space == AddressSpace::Private {
            declared.push((
                size(&layouter, global.ty),
                user_place(module.global_variables.get_span(handle), text, user_lines),
                global.name.clone().unwrap_or_default(),
            ));
        }
    }
    let functions = module
        .functions
        .iter()
        .map(|(_, f)| f)
        .chain(module.entry_points.iter().map(|e| &e.function));
    for function in functions {
        for (handle, local) in function.local_variables.iter() {
            declared.push((
                size(&layouter, local.ty),
                user_place(function.local_variables.get_span(handle), text, user_lines),
                local.name.clone().unwrap_or_default(),
            ));
        }
    }
    let total: u64 = declared.iter().map(|d| d.0).sum();
    if total <= MAX_PRIVATE_BYTES {
        return Ok(());
    }
    let culprit = declared
        .iter()
        .filter(|d| d.1.is_some())
        .max_by_key(|d| d.0);
    let copies: u64 = declared.iter().filter(|d| d.1.is_none()).map(|d| d.0).sum();
    let head = match culprit {
        Some((bytes, Some(at), name)) if *bytes >= copies => {
            format!("WGSL error at {at}: `var {name}` takes {bytes} bytes")
        }
        _ => format!(
            "source: the copies of the rows map_rows passes to row take {copies} bytes (4 \
             per column of every array, 8 in float64)"
        ),
    };
    Err(compile_error(format!(
        "{head}, and the kernel {total} bytes of private memory per row in all; at most \
         {MAX_PRIVATE_BYTES} are allowed (its var declarations, module-scope var<private>s \
         and the rows passed to row, summed). Use smaller arrays, or pass wide data as \
         more rows"
    )))
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
            TypeInner::Scalar(Scalar::F64) => format!("array<f64, {n}>"),
            _ => format!("an array of {n} elements neither f32 nor f64"),
        },
        TypeInner::Array { .. } => "an array without a constant length".into(),
        TypeInner::Scalar(s) => format!("a scalar ({s:?})"),
        other => format!("{other:?}")
            .split(['{', ' ', '('])
            .next()
            .map_or_else(|| "another type".into(), |k| format!("a {k}")),
    }
}

/// How `row`'s parameter `ty` (an array) spells its element type: `amari_float` when the
/// user wrote the wrapper's alias, else the scalar's own name. naga gives an alias a type
/// of its own, so `array<amari_float, C>` and `array<f32, C>` are different types to a
/// call: the wrapper declares each row it passes in the parameter's own spelling.
fn element_spelling(module: &Module, ty: naga::Handle<naga::Type>, dtype: Dtype) -> &'static str {
    match module.types[ty].inner {
        TypeInner::Array { base, .. }
            if module.types[base].name.as_deref() == Some(wrap::ELEMENT) =>
        {
            wrap::ELEMENT
        }
        _ => dtype.wgsl(),
    }
}

/// Checks that `row` exists, takes one `array<T, C>` per array with its columns, and
/// returns `array<T, out_cols>`, `T` the rows' element type (`dtype`'s). Returns how each
/// parameter spells `T` ([`element_spelling`]).
fn signature(
    module: &Module,
    columns: &[Column],
    out_cols: usize,
    dtype: Dtype,
) -> Result<Vec<&'static str>> {
    let t = dtype.wgsl();
    // A mismatch in the element type alone: say why the rows have this dtype.
    let hint = |got: &str| {
        let other = if t == "f64" { "f32" } else { "f64" };
        if got.starts_with(&format!("array<{other},")) {
            format!(
                " (the rows are {dtype}: write the element type as amari_float, which the \
                 wrapper declares as {t}, or pass dtype= to compute in the dtype the kernel \
                 is written for)"
            )
        } else {
            String::new()
        }
    };
    let Some((_, row)) = module
        .functions
        .iter()
        .find(|(_, f)| f.name.as_deref() == Some("row"))
    else {
        return Err(compile_error(
            "source: expected a function `fn row(...) -> array<amari_float, out_cols>`, found none"
                .into(),
        ));
    };
    if row.arguments.len() != columns.len() {
        return Err(compile_error(format!(
            "row: expected one parameter per array ({} arrays passed), got {} parameters",
            columns.len(),
            row.arguments.len()
        )));
    }
    let mut spellings = Vec::with_capacity(columns.len());
    for (k, (arg, column)) in row.arguments.iter().zip(columns).enumerate() {
        spellings.push(element_spelling(module, arg.ty, dtype));
        let got = describe(module, arg.ty);
        let want = format!("array<{t}, {}>", column.cols);
        if got != want {
            let name = arg.name.as_deref().unwrap_or("?");
            let shape = if column.broadcast {
                format!("({},)", column.cols)
            } else {
                format!("(N, {})", column.cols)
            };
            return Err(compile_error(format!(
                "row: parameter {} ({name}) must be {want} for array {k} of shape {shape}, \
                 but is {got}{}",
                k + 1,
                hint(&got)
            )));
        }
    }
    let want = format!("array<{t}, {out_cols}>");
    match &row.result {
        None => Err(compile_error(format!(
            "row: must return {want} (out_cols={out_cols}), but returns nothing"
        ))),
        Some(result) => {
            let got = describe(module, result.ty);
            if got == want {
                Ok(spellings)
            } else {
                Err(compile_error(format!(
                    "row: must return {want} (out_cols={out_cols}), but returns {got}{}",
                    hint(&got)
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
    (params, dtype): (&[String], Dtype),
    out_cols: usize,
) -> Result<String> {
    param_names(params)?;
    let user_lines = source.lines().count();
    let mut probe = String::from(source);
    probe.push('\n');
    probe.push_str(&wrap::params_struct(params, dtype));
    let spellings = signature(&parse(&probe, user_lines)?, columns, out_cols, dtype)?;
    let text = wrap::module(source, columns, (params, dtype, &spellings), out_cols);
    let module = parse(&text, user_lines)?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        // f64 where the rows are float64: the kernel is planned only on SHADER_F64 devices.
        if dtype == Dtype::F64 {
            naga::valid::Capabilities::FLOAT64
        } else {
            naga::valid::Capabilities::empty()
        },
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
    declarations(&module, &text, user_lines)?;
    Ok(text)
}

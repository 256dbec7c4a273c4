//! The launch plan: the validated manifest evaluated for one size.
//!
//! Buffer lengths, defines, grid and block dimensions, shared memory and scalar arguments are
//! expressions over the size's parameters; here they become the numbers a run uses
//! ([`Plan`]), with an error naming the field when a value is out of range at either size. A
//! repeated launch becomes one planned launch per step, its expressions evaluated with `step`.

use super::error::{join_keys, FieldErrors, ManifestError, Problem};
use super::validate::Params;
use super::{
    ArgSpec, BufferSpec, CheckSpec, Define, LaunchSpec, Plan, PlannedArg, PlannedLaunch,
    SourceSpec, STEP,
};
use crate::apps::expr::{EvalError, Expr};
use crate::apps::words::ElemType;
use crate::apps::Size;
use crate::backend::{KernelArg, LaunchConfig};

type R<T> = Result<T, ManifestError>;

/// The value of `expr` at `size`; an unknown name lists the parameters of that size.
pub(super) fn eval(
    expr: &Expr,
    field: &str,
    size: Size,
    params: &Params,
    errors: &FieldErrors,
) -> R<i64> {
    expr.eval(params).map_err(|e| match e {
        EvalError::UnknownParameter(name) => errors.err(
            field,
            Problem::UnknownParameter {
                name,
                size,
                known: join_keys(params.keys()),
            },
        ),
        other => errors.bad_value(field, format!("{other} at size {size} in '{expr}'")),
    })
}

/// Everything the manifest says, evaluated for `size` with its `params`.
pub(super) fn plan(
    size: Size,
    params: &Params,
    buffers: &[BufferSpec],
    launches: &[LaunchSpec],
    check: &CheckSpec,
    source: &SourceSpec,
    errors: &FieldErrors,
) -> R<Plan> {
    let planner = Planner {
        size,
        params,
        errors,
    };
    let defines = source
        .defines
        .iter()
        .map(|(name, value)| {
            let field = format!("source.defines.{name}");
            let value = match value {
                Define::Size(expr) => planner.eval(expr, &field)?.to_string(),
                Define::Flag => "1".to_string(),
                Define::Text(text) => text.clone(),
            };
            Ok((name.clone(), value))
        })
        .collect::<R<Vec<_>>>()?;
    let lengths = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let n = eval(
                &b.length,
                &format!("buffers[{i}].length"),
                size,
                params,
                errors,
            )?;
            Ok(n as usize)
        })
        .collect::<R<Vec<_>>>()?;
    let mut planned = Vec::new();
    for launch in launches {
        let Some(repeat) = &launch.repeat else {
            planned.push(planner.launch(launch)?);
            continue;
        };
        let steps = planner.eval(repeat, &format!("{}.repeat", launch.field))?;
        let mut stepped = params.clone();
        for step in 0..steps {
            stepped.insert(STEP.to_string(), step);
            let planner = Planner {
                params: &stepped,
                ..planner
            };
            planned.push(planner.launch(launch)?);
        }
    }
    let check = planner.launch(&check.launch)?;
    Ok(Plan {
        lengths,
        defines,
        launches: planned,
        check,
    })
}

/// Evaluates launches for one size.
#[derive(Clone, Copy)]
struct Planner<'a> {
    size: Size,
    params: &'a Params,
    errors: &'a FieldErrors,
}

impl Planner<'_> {
    fn eval(&self, expr: &Expr, field: &str) -> R<i64> {
        eval(expr, field, self.size, self.params, self.errors)
    }

    fn launch(&self, spec: &LaunchSpec) -> R<PlannedLaunch> {
        let grid = self.dims(spec, &spec.grid, "grid")?;
        let block = self.dims(spec, &spec.block, "block")?;
        let shared_field = format!("{}.shared_bytes", spec.field);
        let shared = self.eval(&spec.shared_bytes, &shared_field)?;
        let shared_bytes = u32::try_from(shared).map_err(|_| {
            self.errors.bad_value(
                &shared_field,
                format!("{shared} bytes at size {} is out of range", self.size),
            )
        })?;
        let args = spec
            .args
            .iter()
            .enumerate()
            .map(|(i, a)| self.arg(a, &format!("{}.args[{i}]", spec.field)))
            .collect::<R<Vec<_>>>()?;
        Ok(PlannedLaunch {
            field: spec.field.clone(),
            kernel: spec.kernel.clone(),
            config: LaunchConfig {
                grid,
                block,
                shared_bytes,
                cooperative: spec.cooperative,
            },
            args,
        })
    }

    /// A grid or block: three dimensions of 1 to `u32::MAX`.
    fn dims(&self, spec: &LaunchSpec, exprs: &[Expr; 3], key: &str) -> R<(u32, u32, u32)> {
        let field = format!("{}.{key}", spec.field);
        let mut out = [1u32; 3];
        for (i, e) in exprs.iter().enumerate() {
            let v = self.eval(e, &field)?;
            out[i] = u32::try_from(v).ok().filter(|v| *v >= 1).ok_or_else(|| {
                self.errors.bad_value(
                    &field,
                    format!(
                        "{key} dimension {i} is {v} at size {} (must be 1 to {})",
                        self.size,
                        u32::MAX
                    ),
                )
            })?;
        }
        Ok((out[0], out[1], out[2]))
    }

    fn arg(&self, arg: &ArgSpec, field: &str) -> R<PlannedArg> {
        Ok(match arg {
            ArgSpec::Buffer(b) => PlannedArg::Buffer(*b),
            ArgSpec::Float(x) => PlannedArg::Scalar(KernelArg::F32(*x as f32)),
            ArgSpec::Int { ty, value } => {
                let v = self.eval(value, field)?;
                PlannedArg::Scalar(self.int_scalar(*ty, v, field)?)
            }
        })
    }

    /// An integer argument `v` as a kernel scalar of type `ty` (a bare integer: 32 bits,
    /// signed or unsigned).
    fn int_scalar(&self, ty: ElemType, v: i64, field: &str) -> R<KernelArg> {
        let out_of_range = || {
            self.errors.bad_value(
                field,
                format!("{v} at size {} does not fit {ty}", self.size),
            )
        };
        Ok(match ty {
            ElemType::I32 if v > i32::MAX as i64 => {
                KernelArg::U32(u32::try_from(v).map_err(|_| out_of_range())?)
            }
            ElemType::I32 => KernelArg::I32(i32::try_from(v).map_err(|_| out_of_range())?),
            ElemType::U32 => KernelArg::U32(u32::try_from(v).map_err(|_| out_of_range())?),
            ElemType::U64 => KernelArg::U64(u64::try_from(v).map_err(|_| out_of_range())?),
            ElemType::F32 => KernelArg::F32(v as f32),
        })
    }
}

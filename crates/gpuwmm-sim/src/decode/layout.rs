//! Where a kernel's symbols live: module-scope variables, kernel parameters, `.shared` and
//! `.local` variables of a body, and the labels of a body. Kept apart from instruction decoding
//! because it runs once per function, before any instruction is looked at.

use super::{ModuleSymbols, Symbol};
use crate::device::BackendError;
use crate::vars::{parse_var, VarDecl, VarSpace};
use gpuwmm_ptx::{self as ptx, Function, Statement};
use std::collections::HashMap;

/// Module-scope variable declarations of a module, in order.
pub fn module_vars(module: &ptx::Module) -> Result<Vec<VarDecl>, BackendError> {
    let mut vars = Vec::new();
    for item in &module.items {
        if let ptx::Item::Directive(text) = item {
            if let Some(v) = parse_var(text).map_err(BackendError::BadModule)? {
                vars.push(v);
            }
        }
    }
    Ok(vars)
}

pub(super) fn align_up(x: u64, a: u64) -> u64 {
    let a = a.max(1);
    x.div_ceil(a) * a
}

/// Lays out module-scope shared variables; `globals` maps global/const variable names to the
/// addresses the backend allocated for them.
pub fn module_symbols(vars: &[VarDecl], globals: &HashMap<String, u64>) -> ModuleSymbols {
    let mut out = ModuleSymbols::default();
    for v in vars {
        match v.space {
            VarSpace::Global | VarSpace::Const => {
                if let Some(&a) = globals.get(&v.name) {
                    out.symbols.insert(v.name.clone(), Symbol::Global(a));
                }
            }
            VarSpace::Shared if v.len.is_none() => {
                out.dynamic_shared.push((v.name.clone(), v.align))
            }
            VarSpace::Shared => {
                let at = align_up(out.shared_bytes, v.align);
                out.symbols.insert(v.name.clone(), Symbol::Shared(at));
                out.shared_bytes = at + v.bytes();
            }
            VarSpace::Local | VarSpace::Param => {}
        }
    }
    out
}

pub(super) fn layout_params(
    f: &Function,
    symbols: &mut HashMap<String, Symbol>,
) -> Result<(Vec<(u64, u64)>, u64), BackendError> {
    let mut params = Vec::new();
    let mut at = 0;
    for p in &f.params {
        let v = parse_var(&p.decl)
            .map_err(BackendError::BadModule)?
            .ok_or_else(|| BackendError::BadModule(format!("bad parameter '{}'", p.decl)))?;
        at = align_up(at, v.align);
        symbols.insert(p.name.clone(), Symbol::Param(at));
        params.push((at, v.bytes()));
        at += v.bytes();
    }
    Ok((params, at))
}

pub(super) struct BodyLayout {
    pub(super) static_shared: u64,
    pub(super) dynamic_offset: u64,
    pub(super) local_bytes: u64,
}

pub(super) fn layout_body(
    body: &[Statement],
    module: &ModuleSymbols,
    symbols: &mut HashMap<String, Symbol>,
) -> Result<BodyLayout, BackendError> {
    let mut shared = module.shared_bytes;
    let mut local = 0;
    let mut dynamic = module.dynamic_shared.clone();
    for s in body {
        let Statement::Directive(text) = s else {
            continue;
        };
        let Some(v) = parse_var(text).map_err(BackendError::BadModule)? else {
            continue;
        };
        match v.space {
            VarSpace::Shared if v.len.is_none() => dynamic.push((v.name.clone(), v.align)),
            VarSpace::Shared => {
                let at = align_up(shared, v.align);
                symbols.insert(v.name.clone(), Symbol::Shared(at));
                shared = at + v.bytes();
            }
            VarSpace::Local => {
                let at = align_up(local, v.align);
                symbols.insert(v.name.clone(), Symbol::Local(at));
                local = at + v.bytes();
            }
            _ => {}
        }
    }
    let dynamic_offset = align_up(shared, 16);
    for (name, _) in dynamic {
        symbols.insert(name, Symbol::Shared(dynamic_offset));
    }
    Ok(BodyLayout {
        static_shared: shared,
        dynamic_offset,
        local_bytes: align_up(local, 8),
    })
}

pub(super) fn collect_labels(body: &[Statement]) -> HashMap<String, u32> {
    let mut labels = HashMap::new();
    let mut index = 0u32;
    for s in body {
        match s {
            Statement::Label(l) => {
                labels.insert(l.clone(), index);
            }
            Statement::Instruction(_) => index += 1,
            _ => {}
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(text: &str) -> VarDecl {
        parse_var(text).unwrap().unwrap()
    }

    #[test]
    fn shared_variables_are_laid_out_at_their_alignment_and_globals_at_their_address() {
        let vars = [
            decl(".shared .align 4 .b8 small[3];"),
            decl(".shared .align 16 .b8 wide[32];"),
            decl(".extern .shared .align 16 .b8 dynamic[];"),
            decl(".global .u32 counter;"),
        ];
        let globals = HashMap::from([("counter".to_string(), 0x1000)]);
        let m = module_symbols(&vars, &globals);
        assert_eq!(m.symbols["small"], Symbol::Shared(0));
        assert_eq!(m.symbols["wide"], Symbol::Shared(16));
        assert_eq!(m.shared_bytes, 48);
        assert_eq!(m.dynamic_shared, vec![("dynamic".to_string(), 16)]);
        assert_eq!(m.symbols["counter"], Symbol::Global(0x1000));
    }

    #[test]
    fn labels_count_instructions_only() {
        let module = ptx::parse(
            ".version 8.8\n.target sm_70\n.address_size 64\n.visible .entry k()\n{\n\
             .reg .b32 %r<2>;\nTOP:\nmov.u32 %r1, 1;\nNEXT:\nbra TOP;\n}\n",
        )
        .unwrap();
        let body = module.kernels().next().unwrap().body.as_deref().unwrap();
        let labels = collect_labels(body);
        assert_eq!(labels["TOP"], 0);
        assert_eq!(labels["NEXT"], 1);
    }
}

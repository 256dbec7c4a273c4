//! PTX IR to the simulator's decoded form ([`Kernel`]).
//!
//! Decoding happens once per `load_module`: register names become dense slots (nested `{ }`
//! scopes with their own `.reg` declarations get fresh slots), labels become instruction indices,
//! symbols become constant addresses in their state space, and every opcode with its modifiers
//! becomes an [`Op`]. Anything the interpreter does not implement is rejected here, as
//! [`BackendError::Unsupported`] naming the instruction and its PTX line, so nothing executes
//! silently wrong.
//!
//! This file holds the program being built (kernels, device functions, call sites) and the
//! dispatch from opcode to instruction family; each family decodes in its own file. The decoder
//! only records an access's or a fence's qualifiers: what they mean for the memory models is
//! decided next to the model, in [`super::ptx_model`].

mod atomics;
mod control;
mod convert;
mod float;
mod half;
mod int;
mod intrinsics;
mod layout;
mod memory;
mod operands;
mod sync;
#[cfg(test)]
mod testing;

pub use self::layout::{module_symbols, module_vars};

use self::layout::{align_up, collect_labels, layout_body, layout_params};
use self::operands::{harmless, ty_of};
use self::sync::fence;
use super::isa::*;
use super::vars::{parse_var, VarSpace};
use crate::device::BackendError;
use gpuwmm_ptx::{self as ptx, Function, Instruction, Operand, Statement};
use std::collections::HashMap;

/// A kernel ready to run.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    pub code: Vec<Inst>,
    /// Call sites of `Op::Call`.
    pub calls: Vec<CallSite>,
    /// Constants wider than 32 bits (`Src::Const`).
    pub consts: Vec<u64>,
    /// Register slots per thread (the last one is the `_` sink).
    pub nregs: u32,
    /// Byte offset and size of each parameter in the parameter buffer.
    pub params: Vec<(u64, u64)>,
    pub param_bytes: u64,
    /// Static shared memory (module- and kernel-scope variables).
    pub static_shared: u64,
    /// Where dynamic (`.extern .shared`) memory starts.
    pub dynamic_shared_offset: u64,
    /// Bytes of `.local` memory per thread.
    pub local_bytes: u64,
    /// The source line of each instruction with line information, by PTX line (as
    /// [`origin_of`] writes it): what a `trap` or a hang names.
    pub origins: HashMap<u32, String>,
}

/// What a symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symbol {
    /// A global or const variable at this (global) address.
    Global(u64),
    /// Offset in the block's shared memory.
    Shared(u64),
    /// Offset in the thread's local memory.
    Local(u64),
    /// Offset in the parameter buffer.
    Param(u64),
    /// A device function's formal parameter or result: offset in the thread's local memory.
    CallParam(u64),
}

/// Module-scope symbols, shared by all kernels of a module.
#[derive(Debug, Clone, Default)]
pub struct ModuleSymbols {
    pub symbols: HashMap<String, Symbol>,
    /// Bytes of module-scope `.shared` variables.
    pub shared_bytes: u64,
    /// Module-scope unsized `.extern .shared` arrays (dynamic shared memory).
    pub dynamic_shared: Vec<(String, u64)>,
}

/// Why one instruction could not be decoded.
enum Why {
    Unsupported,
    Bad(String),
}

type R<T> = Result<T, Why>;

fn bad<T>(msg: impl Into<String>) -> R<T> {
    Err(Why::Bad(msg.into()))
}

/// A `.func` call site, resolved at decode time. Call parameters live in the calling thread's
/// local memory; offsets below are local-memory offsets.
#[derive(Debug, Clone, PartialEq)]
pub struct CallSite {
    /// Entry of the callee in `Kernel::code`.
    pub target: u32,
    /// (callee formal, caller argument, bytes) copied on the call.
    pub args: Vec<(u64, u64, u64)>,
    /// (caller result, callee `func_retval0`, bytes) copied on return.
    pub ret: Option<(u64, u64, u64)>,
}

/// Marks a `.param` address as a call parameter (in the thread's local memory) rather than a
/// kernel parameter.
pub const CALL_PARAM: u64 = 1 << 62;

/// Where a device function's formal parameters and result live.
#[derive(Debug, Clone)]
struct Frame {
    params: Vec<(String, u64, u64)>,
    ret: Option<(String, u64, u64)>,
}

/// Code and per-thread storage shared by a kernel and the device functions it calls.
struct Program<'m> {
    module: &'m ptx::Module,
    code: Vec<Inst>,
    calls: Vec<CallSite>,
    consts: Vec<u64>,
    next_reg: Reg,
    /// Bytes of local memory allocated so far (depots and call parameters).
    local: u64,
    frames: HashMap<String, Frame>,
    entries: HashMap<String, u32>,
    /// Call sites whose callee is not decoded yet.
    pending: Vec<(usize, String)>,
    origins: HashMap<u32, String>,
}

/// Decodes one kernel and the device functions it calls.
pub fn decode_kernel(
    f: &Function,
    ptx_module: &ptx::Module,
    module: &ModuleSymbols,
) -> Result<Kernel, BackendError> {
    check_recursion(f, ptx_module)?;
    let body = f.body.as_deref().unwrap_or(&[]);
    let mut symbols = module.symbols.clone();
    let (params, param_bytes) = layout_params(f, &mut symbols)?;
    let layout = layout_body(body, module, &mut symbols)?;
    let mut p = Program {
        module: ptx_module,
        code: Vec::new(),
        calls: Vec::new(),
        consts: Vec::new(),
        next_reg: 0,
        local: layout.local_bytes,
        frames: HashMap::new(),
        entries: HashMap::new(),
        pending: Vec::new(),
        origins: HashMap::new(),
    };
    decode_body(&mut p, f, symbols.clone(), false)?;
    while let Some((site, callee)) = p.pending.pop() {
        let entry = match p.entries.get(&callee) {
            Some(&e) => e,
            None => decode_function(&mut p, &callee, &module.symbols)?,
        };
        p.calls[site].target = entry;
    }
    let sink = p.next_reg;
    for inst in &mut p.code {
        replace_sink(&mut inst.op, sink);
    }
    Ok(Kernel {
        name: f.name.clone(),
        code: p.code,
        calls: p.calls,
        consts: p.consts,
        nregs: sink + 1,
        params,
        param_bytes,
        static_shared: layout.static_shared,
        dynamic_shared_offset: layout.dynamic_offset,
        local_bytes: align_up(p.local, 8),
        origins: p.origins,
    })
}

/// Decodes the device function `name` at the end of the program; returns its entry.
fn decode_function(
    p: &mut Program,
    name: &str,
    module_symbols: &HashMap<String, Symbol>,
) -> Result<u32, BackendError> {
    let f = definition(p.module, name)
        .ok_or_else(|| BackendError::BadModule(format!("device function '{name}' has no body")))?;
    let frame = frame(p, name)?;
    let mut symbols = module_symbols.clone();
    for (n, off, _) in frame.params.iter().chain(frame.ret.iter()) {
        symbols.insert(n.clone(), Symbol::CallParam(*off));
    }
    for s in f.body.as_deref().unwrap_or(&[]) {
        let Statement::Directive(text) = s else {
            continue;
        };
        match parse_var(text).map_err(BackendError::BadModule)? {
            Some(v) if v.space == VarSpace::Local => {
                let at = align_up(p.local, v.align);
                symbols.insert(v.name.clone(), Symbol::Local(at));
                p.local = at + v.bytes();
            }
            Some(v) if v.space == VarSpace::Shared => {
                return Err(BackendError::BadModule(format!(
                    "shared variable '{}' declared in device function '{name}'",
                    v.name
                )))
            }
            _ => {}
        }
    }
    let entry = p.code.len() as u32;
    p.entries.insert(name.to_string(), entry);
    decode_body(p, f, symbols, true)?;
    Ok(entry)
}

/// The parameter frame of device function `name`, allocated in local memory on first use.
fn frame(p: &mut Program, name: &str) -> Result<Frame, BackendError> {
    if let Some(f) = p.frames.get(name) {
        return Ok(f.clone());
    }
    let f = definition(p.module, name)
        .ok_or_else(|| BackendError::BadModule(format!("unknown function '{name}'")))?;
    let mut alloc = |decl: &str| -> Result<(String, u64, u64), BackendError> {
        let v = parse_var(decl)
            .map_err(BackendError::BadModule)?
            .ok_or_else(|| BackendError::BadModule(format!("bad parameter '{decl}'")))?;
        let at = align_up(p.local, v.align);
        p.local = at + v.bytes();
        let bytes = v.bytes();
        Ok((v.name, at, bytes))
    };
    let mut params = Vec::new();
    for param in &f.params {
        params.push(alloc(&param.decl)?);
    }
    let ret = match &f.returns {
        Some(r) => Some(alloc(
            r.trim().trim_start_matches('(').trim_end_matches(')'),
        )?),
        None => None,
    };
    let frame = Frame { params, ret };
    p.frames.insert(name.to_string(), frame.clone());
    Ok(frame)
}

fn decode_body(
    p: &mut Program,
    f: &Function,
    symbols: HashMap<String, Symbol>,
    in_func: bool,
) -> Result<(), BackendError> {
    let body = f.body.as_deref().unwrap_or(&[]);
    let base = p.code.len() as u32;
    let labels = collect_labels(body)
        .into_iter()
        .map(|(l, i)| (l, i + base))
        .collect();
    let mut d = Decoder {
        p,
        symbols,
        labels,
        scopes: vec![HashMap::new()],
        params: vec![HashMap::new()],
        in_func,
    };
    let attribution = ptx::lines::attribute_statements(body);
    for (index, s) in body.iter().enumerate() {
        match s {
            Statement::BlockOpen => {
                d.scopes.push(HashMap::new());
                d.params.push(HashMap::new());
            }
            Statement::BlockClose => {
                d.scopes.pop();
                d.params.pop();
            }
            Statement::Directive(text) if text.starts_with(".reg") => {
                d.declare_regs(text, d.scopes.len() == 1);
            }
            Statement::Directive(text) if d.scopes.len() > 1 && text.starts_with(".param") => {
                d.declare_call_param(text)?;
            }
            Statement::Instruction(i) => {
                let inst = d
                    .inst(i, &f.name)
                    .map_err(|e| with_origin(e, d.p.module, body, index))?;
                if let Some(at) = attribution[index] {
                    (d.p.origins).insert(inst.line, show_origin(d.p.module, at));
                }
                d.p.code.push(inst);
            }
            _ => {}
        }
    }
    d.p.code.push(Inst {
        op: if in_func { Op::Return } else { Op::Exit },
        guard: NO_GUARD,
        line: 0,
    });
    Ok(())
}

/// An unsupported-instruction error with the source line of statement `index` of `body`.
fn with_origin(
    e: BackendError,
    module: &ptx::Module,
    body: &[Statement],
    index: usize,
) -> BackendError {
    match e {
        BackendError::Unsupported {
            instruction, line, ..
        } => BackendError::Unsupported {
            instruction,
            line,
            origin: origin_of(module, body, index),
        },
        e => e,
    }
}

/// The source line statement `index` of `body` was compiled from, as `file:line` (the file's
/// name only): the line of the function compiled, followed by the inlined helper's line when
/// it differs (`kernel.cu:12, inlined from cooperative_groups.h:520`). `None` without `.loc`.
pub fn origin_of(module: &ptx::Module, body: &[Statement], index: usize) -> Option<String> {
    let at = ptx::lines::attribute_statements(body)[index]?;
    Some(show_origin(module, at))
}

/// An attribution as [`origin_of`] writes it.
fn show_origin(module: &ptx::Module, at: ptx::lines::LineAttribution) -> String {
    let show = |p: ptx::SourcePos| {
        let file = module.file_path(p.file).unwrap_or("?");
        let name = file.rsplit('/').next().unwrap_or(file);
        format!("{name}:{}", p.line)
    };
    match at.inner == at.outer {
        true => show(at.outer),
        false => format!("{}, inlined from {}", show(at.outer), show(at.inner)),
    }
}

/// The definition (with body) of a function; modules may also declare it earlier.
fn definition<'m>(module: &'m ptx::Module, name: &str) -> Option<&'m Function> {
    module
        .functions()
        .find(|f| f.name == name && f.body.is_some())
}

/// Rejects recursion (device functions get fixed register slots and parameter frames).
fn check_recursion(kernel: &Function, module: &ptx::Module) -> Result<(), BackendError> {
    fn callees(f: &Function) -> impl Iterator<Item = (&Instruction, &str)> {
        f.instructions()
            .filter(|i| i.opcode.base == "call")
            .filter_map(|i| {
                i.operands.iter().find_map(|o| match o {
                    Operand::Symbol(s) => Some((i, s.as_str())),
                    _ => None,
                })
            })
    }
    fn visit<'a>(
        f: &'a Function,
        module: &'a ptx::Module,
        path: &mut Vec<&'a str>,
    ) -> Result<(), BackendError> {
        for (i, name) in callees(f) {
            if path.contains(&name) {
                return Err(BackendError::Unsupported {
                    instruction: format!("{} (recursive call)", ptx::print::instruction_text(i)),
                    line: i.ptx_line,
                    origin: None,
                });
            }
            if let Some(g) = definition(module, name) {
                path.push(name);
                visit(g, module, path)?;
                path.pop();
            }
        }
        Ok(())
    }
    visit(kernel, module, &mut vec![kernel.name.as_str()])
}

/// The sink `_` is decoded as `Reg::MAX - 1` and moved to the last slot once the count is known.
const SINK: Reg = Reg::MAX - 1;

fn replace_sink(op: &mut Op, sink: Reg) {
    let fix = |r: &mut Reg| {
        if *r == SINK {
            *r = sink;
        }
    };
    match op {
        Op::Ld { d, .. } | Op::Unpack { d, .. } => d.iter_mut().for_each(fix),
        Op::Atom { d, .. } => fix(d),
        Op::Shfl { d, p, .. } => {
            fix(d);
            if let Some(p) = p {
                fix(p);
            }
        }
        Op::Setp { p, q, .. } | Op::HalfSetp { p, q, .. } => {
            fix(p);
            if let Some(q) = q {
                fix(q);
            }
        }
        _ => {}
    }
}

struct Decoder<'p, 'm> {
    p: &'p mut Program<'m>,
    symbols: HashMap<String, Symbol>,
    labels: HashMap<String, u32>,
    scopes: Vec<HashMap<String, Reg>>,
    /// Call-site `.param` variables of nested blocks: local offset and size.
    params: Vec<HashMap<String, (u64, u64)>>,
    /// Decoding a device function (`ret` returns) rather than a kernel (`ret` exits).
    in_func: bool,
}

impl Decoder<'_, '_> {
    fn inst(&mut self, i: &Instruction, kernel: &str) -> Result<Inst, BackendError> {
        let op = self.op(i).map_err(|why| match why {
            Why::Unsupported => BackendError::Unsupported {
                instruction: ptx::print::instruction_text(i),
                line: i.ptx_line,
                origin: None,
            },
            Why::Bad(msg) => BackendError::BadModule(format!(
                "function '{kernel}', PTX line {}: `{}`: {msg}",
                i.ptx_line,
                ptx::print::instruction_text(i)
            )),
        })?;
        let guard = match &i.guard {
            Some(g) if g.negated => self.reg(&g.predicate) | GUARD_NEGATED,
            Some(g) => self.reg(&g.predicate),
            None => NO_GUARD,
        };
        Ok(Inst {
            op,
            guard,
            line: i.ptx_line as u32,
        })
    }

    /// Decodes one instruction's opcode, modifiers and operands by its family.
    fn op(&mut self, i: &Instruction) -> R<Op> {
        let m: Vec<&str> = i.opcode.modifiers.iter().map(String::as_str).collect();
        let ops = &i.operands;
        let base = i.opcode.base.as_str();
        match base {
            "ld" | "ldu" | "st" | "atom" | "red" => self.memory(i, &m),
            _ if half::mentions_half(&m) => self.half(base, &m, ops),
            "add" | "sub" | "min" | "max" if m.contains(&"u16x2") || m.contains(&"s16x2") => {
                self.packed16(base, &m, ops)
            }
            "add" | "sub" | "mad" if m.contains(&"cc") => self.carry(base, &m, ops),
            "mov" => self.mov(&m, ops),
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" | "copysign" => self.binary(base, &m, ops),
            "addc" | "subc" | "madc" => self.carry(base, &m, ops),
            "sad" => self.sad(&m, ops),
            "bfind" => self.bfind(&m, ops),
            "bar" | "barrier" if m.first() == Some(&"red") => self.bar_red(&m, ops),
            "mad" | "fma" => self.mad(base, &m, ops),
            "not" | "cnot" | "neg" | "abs" | "popc" | "clz" | "brev" | "sqrt" | "rcp" | "rsqrt"
            | "ex2" | "lg2" | "sin" | "cos" => self.unary(base, &m, ops),
            "setp" | "set" => self.setp(base == "set", &m, ops),
            "selp" => self.selp(&m, ops),
            "cvt" => self.cvt(&m, ops),
            "cvta" => self.cvta(&m, ops),
            "bfe" | "bfi" | "prmt" => self.bits(base, &m, ops),
            "bra" => self.bra(&m, ops),
            "ret" => self.ret(&m),
            "exit" => {
                check(&m, &[])?;
                Ok(Op::Exit)
            }
            "call" => self.call(&m, ops),
            "bar" | "barrier" => self.bar(&m, ops),
            "membar" | "fence" => fence(i, &m),
            "prefetch" | "prefetchu" | "nanosleep" | "brkpt" | "pmevent" => Ok(Op::Nop),
            "trap" => Ok(Op::Trap),
            "shfl" => self.shfl(&m, ops),
            "vote" => self.vote(&m, ops),
            "activemask" => self.activemask(ops),
            "match" => self.match_sync(&m, ops),
            "redux" => self.redux(&m, ops),
            "shf" => self.shf(&m, ops),
            "dp4a" | "dp2a" => self.dot(base, &m, ops),
            "fns" => self.fns(&m, ops),
            "lop3" => self.lop3(&m, ops),
            "vadd4" | "vsub4" | "vavrg4" | "vabsdiff4" | "vmin4" | "vmax4" | "vadd2" | "vsub2"
            | "vavrg2" | "vabsdiff2" | "vmin2" | "vmax2" => self.simd(base, &m, ops),
            _ => Err(Why::Unsupported),
        }
    }
}

fn expect(ops: &[Operand], n: usize) -> R<()> {
    if ops.len() == n {
        Ok(())
    } else {
        bad(format!("expected {n} operands, found {}", ops.len()))
    }
}

/// Rejects modifiers other than harmless ones and `allowed`.
fn check(m: &[&str], allowed: &[&str]) -> R<()> {
    if m.iter().all(|w| harmless(w) || allowed.contains(w)) {
        Ok(())
    } else {
        Err(Why::Unsupported)
    }
}

/// The single type among the modifiers; any other modifier must be harmless or in `allowed`.
fn one_type(m: &[&str], allowed: &[&str]) -> R<Ty> {
    let mut ty = None;
    for w in m {
        if harmless(w) || allowed.contains(w) {
            continue;
        }
        match ty_of(w) {
            Some(t) if ty.is_none() => ty = Some(t),
            _ => return Err(Why::Unsupported),
        }
    }
    ty.ok_or(Why::Unsupported)
}

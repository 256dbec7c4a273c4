//! PTX IR to the simulator's decoded form ([`Kernel`]).
//!
//! Decoding happens once per `load_module`: register names become dense slots (nested `{ }`
//! scopes with their own `.reg` declarations get fresh slots), labels become instruction indices,
//! symbols become constant addresses in their state space, and every opcode with its modifiers
//! becomes an [`Op`]. Anything the interpreter does not implement is rejected here, as
//! [`BackendError::Unsupported`] naming the instruction and its PTX line, so nothing executes
//! silently wrong.

use super::isa::*;
use super::vars::{literal_bits, parse_var, VarDecl, VarSpace};
use super::{LOCAL_WINDOW, SHARED_WINDOW};
use crate::backend::BackendError;
use crate::ptx::{
    self, FenceStrength, Function, Instruction, Operand, Scope, Semantics, Statement,
};
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

fn align_up(x: u64, a: u64) -> u64 {
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
    for s in body {
        match s {
            Statement::BlockOpen => {
                d.scopes.push(HashMap::new());
                d.params.push(HashMap::new());
            }
            Statement::BlockClose => {
                d.scopes.pop();
                d.params.pop();
            }
            Statement::Directive(text) if d.scopes.len() > 1 && text.starts_with(".reg") => {
                d.declare_regs(text);
            }
            Statement::Directive(text) if d.scopes.len() > 1 && text.starts_with(".param") => {
                d.declare_call_param(text)?;
            }
            Statement::Instruction(i) => {
                let inst = d.inst(i, &f.name)?;
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
        Op::Setp { p, q, .. } => {
            fix(p);
            if let Some(q) = q {
                fix(q);
            }
        }
        _ => {}
    }
}

fn layout_params(
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

struct BodyLayout {
    static_shared: u64,
    dynamic_offset: u64,
    local_bytes: u64,
}

fn layout_body(
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

fn collect_labels(body: &[Statement]) -> HashMap<String, u32> {
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

/// A PTX type word (`u32`, `f64`, `pred`); `None` for types the simulator does not implement.
pub fn ty_of(word: &str) -> Option<Ty> {
    let kind = match word.as_bytes().first()? {
        b'u' => Kind::U,
        b's' => Kind::S,
        b'b' => Kind::B,
        b'f' => Kind::F,
        b'p' if word == "pred" => return Some(Ty::PRED),
        _ => return None,
    };
    let bits: u8 = word[1..].parse().ok()?;
    let ok = match kind {
        Kind::F => bits == 32 || bits == 64,
        _ => matches!(bits, 8 | 16 | 32 | 64),
    };
    ok.then_some(Ty { kind, bits })
}

fn ty_word(ty: Ty) -> &'static str {
    match (ty.kind, ty.bits) {
        (Kind::F, 32) => "f32",
        (Kind::F, _) => "f64",
        _ => "u64",
    }
}

fn mask(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn special(name: &str) -> Option<Special> {
    let dim = |s: &str| match s {
        "x" => Some(0u8),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let name = name.strip_prefix('%')?;
    if let Some((reg, d)) = name.split_once('.') {
        let d = dim(d)?;
        return match reg {
            "tid" => Some(Special::Tid(d)),
            "ntid" => Some(Special::Ntid(d)),
            "ctaid" => Some(Special::Ctaid(d)),
            "nctaid" => Some(Special::Nctaid(d)),
            _ => None,
        };
    }
    Some(match name {
        "laneid" => Special::LaneId,
        "warpid" => Special::WarpId,
        "nwarpid" => Special::NWarpId,
        "smid" => Special::SmId,
        "nsmid" => Special::NSmId,
        "gridid" => Special::GridId,
        "clock" | "clock64" | "globaltimer" | "globaltimer_lo" => Special::Clock,
        "lanemask_eq" => Special::LanemaskEq,
        "lanemask_lt" => Special::LanemaskLt,
        "lanemask_le" => Special::LanemaskLe,
        "lanemask_gt" => Special::LanemaskGt,
        "lanemask_ge" => Special::LanemaskGe,
        _ => return None,
    })
}

/// The modifiers that never change what the simulator computes.
fn harmless(m: &str) -> bool {
    matches!(
        m,
        "approx"
            | "full"
            | "uni"
            | "aligned"
            | "sync"
            | "nc"
            | "ca"
            | "cg"
            | "cs"
            | "lu"
            | "cv"
            | "wb"
            | "wt"
            | "noftz"
    ) || m.starts_with("L1::")
        || m.starts_with("L2::")
}

impl Decoder<'_, '_> {
    fn declare_regs(&mut self, text: &str) {
        let rest = text.trim_start_matches(".reg").trim();
        let names = rest
            .split_whitespace()
            .skip_while(|w| w.starts_with('.'))
            .collect::<Vec<_>>()
            .join(" ");
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if let Some((prefix, count)) = name.split_once('<') {
                let count: u32 = count.trim_end_matches('>').parse().unwrap_or(0);
                for i in 0..count {
                    self.fresh(&format!("{prefix}{i}"));
                }
            } else {
                self.fresh(name);
            }
        }
    }

    fn fresh(&mut self, name: &str) -> Reg {
        let r = self.p.next_reg;
        self.p.next_reg += 1;
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name.to_string(), r);
        }
        r
    }

    fn reg(&mut self, name: &str) -> Reg {
        for scope in self.scopes.iter().rev() {
            if let Some(&r) = scope.get(name) {
                return r;
            }
        }
        let r = self.p.next_reg;
        self.p.next_reg += 1;
        self.scopes[0].insert(name.to_string(), r);
        r
    }

    fn inst(&mut self, i: &Instruction, kernel: &str) -> Result<Inst, BackendError> {
        let op = self.op(i).map_err(|why| match why {
            Why::Unsupported => BackendError::Unsupported {
                instruction: ptx::print::instruction_text(i),
                line: i.ptx_line,
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

    fn dst(&mut self, o: &Operand) -> R<Reg> {
        match o {
            Operand::Register(r) if special(r).is_none() => Ok(self.reg(r)),
            Operand::Symbol(s) if s == "_" => Ok(SINK),
            _ => bad(format!("'{o}' is not a destination register")),
        }
    }

    fn src(&mut self, o: &Operand, ty: Ty) -> R<Src> {
        match o {
            Operand::Register(r) => Ok(match special(r) {
                Some(s) => Src::Special(s),
                None => Src::Reg(self.reg(r)),
            }),
            // The IR parser leaves literals it cannot read as i64 (`-9223372036854775808`) as
            // `Other`.
            Operand::Immediate(text) | Operand::Other(text)
                if literal_bits(text, ty_word(ty)).is_some() =>
            {
                let bits = literal_bits(text, ty_word(ty)).unwrap_or_default();
                let bits = if ty.is_float() {
                    bits
                } else {
                    bits & mask(ty.bits.max(1))
                };
                Ok(self.constant(bits))
            }
            Operand::Symbol(s) => match self.symbols.get(s) {
                Some(
                    Symbol::Global(a) | Symbol::Shared(a) | Symbol::Local(a) | Symbol::Param(a),
                ) => Ok(self.constant(*a)),
                Some(Symbol::CallParam(_)) => Err(Why::Unsupported),
                None => bad(format!("unknown symbol '{s}'")),
            },
            _ => bad(format!("bad source operand '{o}'")),
        }
    }

    /// A constant operand: inline when it fits in 32 bits, else in the constant pool.
    fn constant(&mut self, v: u64) -> Src {
        if v <= u64::from(u32::MAX) {
            return Src::Imm(v as u32);
        }
        let pool = &mut self.p.consts;
        let i = pool.iter().position(|&c| c == v).unwrap_or_else(|| {
            pool.push(v);
            pool.len() - 1
        });
        Src::Const(i as u32)
    }

    /// A predicate source, possibly negated (`!%p`).
    fn pred_src(&mut self, o: &Operand) -> R<(Src, bool)> {
        match o {
            Operand::Other(t) if t.starts_with('!') => Ok((Src::Reg(self.reg(&t[1..])), true)),
            _ => Ok((self.src(o, Ty::PRED)?, false)),
        }
    }

    fn addr(&mut self, o: &Operand, space: Space) -> R<Addr> {
        let Operand::Address { base, offset } = o else {
            return bad(format!("'{o}' is not an address"));
        };
        if base.is_empty() {
            return Ok(Addr {
                base: None,
                offset: *offset,
            });
        }
        if base.starts_with('%') {
            return Ok(Addr {
                base: Some(self.reg(base)),
                offset: *offset,
            });
        }
        if let Some(&(at, _)) = self
            .params
            .iter()
            .rev()
            .find_map(|scope| scope.get(base.as_str()))
        {
            if space != Space::Param {
                return Err(Why::Unsupported);
            }
            return Ok(Addr {
                base: None,
                offset: (CALL_PARAM | at) as i64 + offset,
            });
        }
        let at = match (self.symbols.get(base.as_str()), space) {
            (None, _) => return bad(format!("unknown symbol '{base}'")),
            (Some(Symbol::CallParam(a)), Space::Param) => CALL_PARAM | a,
            (Some(Symbol::CallParam(_)), _) => return Err(Why::Unsupported),
            (Some(Symbol::Shared(a)), Space::Generic) => SHARED_WINDOW + a,
            (Some(Symbol::Local(a)), Space::Generic) => LOCAL_WINDOW + a,
            (Some(Symbol::Param(_)), Space::Generic) => return Err(Why::Unsupported),
            (
                Some(Symbol::Global(a) | Symbol::Shared(a) | Symbol::Local(a) | Symbol::Param(a)),
                _,
            ) => *a,
        };
        Ok(Addr {
            base: None,
            offset: at as i64 + offset,
        })
    }

    /// A call-site `.param` declaration inside a `{ }` block: a fresh local-memory slot.
    fn declare_call_param(&mut self, text: &str) -> Result<(), BackendError> {
        let v = parse_var(text)
            .map_err(BackendError::BadModule)?
            .ok_or_else(|| BackendError::BadModule(format!("bad declaration '{text}'")))?;
        let (at, bytes) = (align_up(self.p.local, v.align), v.bytes());
        self.p.local = at + bytes;
        if let Some(scope) = self.params.last_mut() {
            scope.insert(v.name, (at, bytes));
        }
        Ok(())
    }

    fn call_param(&self, o: &Operand) -> R<(u64, u64)> {
        let Operand::Symbol(name) = o else {
            return Err(Why::Unsupported);
        };
        self.params
            .iter()
            .rev()
            .find_map(|scope| scope.get(name.as_str()).copied())
            .map_or_else(|| bad(format!("'{name}' is not a call parameter")), Ok)
    }

    /// `call{.uni} [(ret),] func[, (args)]`: direct calls of defined device functions.
    fn call(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        check(m, &[])?;
        let (rets, rest) = match ops.first() {
            Some(Operand::List(r)) => (r.as_slice(), &ops[1..]),
            _ => (&[][..], ops),
        };
        let (name, args) = match rest {
            [Operand::Symbol(n)] => (n, &[][..]),
            [Operand::Symbol(n), Operand::List(a)] => (n, a.as_slice()),
            _ => return Err(Why::Unsupported),
        };
        let defined = definition(self.p.module, name).is_some();
        if !defined || rets.len() > 1 {
            return Err(Why::Unsupported);
        }
        let frame = frame(self.p, name).map_err(|e| Why::Bad(e.to_string()))?;
        if frame.params.len() != args.len() || frame.ret.is_some() != (rets.len() == 1) {
            return bad(format!("call of '{name}' does not match its declaration"));
        }
        let mut copies = Vec::new();
        for ((_, formal, size), a) in frame.params.iter().zip(args) {
            let (actual, actual_size) = self.call_param(a)?;
            copies.push((*formal, actual, (*size).min(actual_size)));
        }
        let ret = match (&frame.ret, rets.first()) {
            (Some((_, callee, size)), Some(r)) => {
                let (caller, caller_size) = self.call_param(r)?;
                Some((caller, *callee, (*size).min(caller_size)))
            }
            _ => None,
        };
        let site = self.p.calls.len();
        self.p.calls.push(CallSite {
            target: 0,
            args: copies,
            ret,
        });
        self.p.pending.push((site, name.clone()));
        Ok(Op::Call { site: site as u32 })
    }

    fn label(&self, o: &Operand) -> R<u32> {
        match o {
            Operand::Symbol(l) => self
                .labels
                .get(l)
                .copied()
                .map_or_else(|| bad(format!("unknown label '{l}'")), Ok),
            _ => Err(Why::Unsupported),
        }
    }

    fn op(&mut self, i: &Instruction) -> R<Op> {
        let m: Vec<&str> = i.opcode.modifiers.iter().map(String::as_str).collect();
        let ops = &i.operands;
        match i.opcode.base.as_str() {
            "add" | "sub" | "mad" if m.contains(&"cc") => self.carry(&i.opcode.base, &m, ops),
            "mov" => self.mov(&m, ops),
            "add" | "sub" | "mul" | "div" | "rem" | "min" | "max" | "and" | "or" | "xor"
            | "shl" | "shr" | "copysign" => self.binary(&i.opcode.base, &m, ops),
            "addc" | "subc" | "madc" => self.carry(&i.opcode.base, &m, ops),
            "sad" => {
                let ty = one_type(&m, &[])?;
                if ty.is_float() {
                    return Err(Why::Unsupported);
                }
                expect(ops, 4)?;
                Ok(Op::Sad {
                    ty,
                    d: self.dst(&ops[0])?,
                    a: self.src(&ops[1], ty)?,
                    b: self.src(&ops[2], ty)?,
                    c: self.src(&ops[3], ty)?,
                })
            }
            "bfind" => {
                let ty = one_type(&m, &["shiftamt"])?;
                if !matches!(ty.kind, Kind::U | Kind::S) || ty.bits < 32 {
                    return Err(Why::Unsupported);
                }
                expect(ops, 2)?;
                Ok(Op::Bfind {
                    ty,
                    shiftamt: m.contains(&"shiftamt"),
                    d: self.dst(&ops[0])?,
                    a: self.src(&ops[1], ty)?,
                })
            }
            "bar" | "barrier" if m.first() == Some(&"red") => self.bar_red(&m, ops),
            "mad" | "fma" => self.mad(&i.opcode.base, &m, ops),
            "not" | "cnot" | "neg" | "abs" | "popc" | "clz" | "brev" | "sqrt" | "rcp" | "rsqrt"
            | "ex2" | "lg2" | "sin" | "cos" => self.unary(&i.opcode.base, &m, ops),
            "setp" | "set" => self.setp(i.opcode.base == "set", &m, ops),
            "selp" => {
                let ty = one_type(&m, &[])?;
                expect(ops, 4)?;
                Ok(Op::Selp {
                    ty,
                    d: self.dst(&ops[0])?,
                    a: self.src(&ops[1], ty)?,
                    b: self.src(&ops[2], ty)?,
                    c: self.src(&ops[3], Ty::PRED)?,
                })
            }
            "cvt" => self.cvt(&m, ops),
            "cvta" => self.cvta(&m, ops),
            "bfe" | "bfi" | "prmt" => self.bits(&i.opcode.base, &m, ops),
            "ld" | "ldu" | "st" | "atom" | "red" => self.memory(i, &m),
            "bra" => {
                check(&m, &["uni"])?;
                expect(ops, 1)?;
                Ok(Op::Bra {
                    target: self.label(&ops[0])?,
                })
            }
            "ret" => {
                check(&m, &["uni"])?;
                Ok(if self.in_func { Op::Return } else { Op::Exit })
            }
            "exit" => {
                check(&m, &[])?;
                Ok(Op::Exit)
            }
            "call" => self.call(&m, ops),
            "bar" | "barrier" => {
                let plain =
                    matches!(m.as_slice(), ["sync"] | ["sync", "aligned"] | [] if ops.len() <= 1);
                let zero = ops
                    .first()
                    .is_none_or(|o| matches!(o, Operand::Immediate(t) if t == "0"));
                if plain && zero {
                    Ok(Op::Bar)
                } else {
                    Err(Why::Unsupported)
                }
            }
            "membar" | "fence" => match i.fence() {
                Some(f) => Ok(Op::Fence {
                    reach: if f.scope >= Scope::Cluster {
                        Reach::Gpu
                    } else {
                        Reach::Cta
                    },
                    sc: f.strength == FenceStrength::SequentiallyConsistent,
                }),
                None if m.first() == Some(&"proxy") => Ok(Op::Nop),
                None => Err(Why::Unsupported),
            },
            "prefetch" | "prefetchu" | "nanosleep" | "brkpt" | "pmevent" => Ok(Op::Nop),
            "trap" => Ok(Op::Trap),
            "shfl" => self.shfl(&m, ops),
            "vote" => self.vote(&m, ops),
            "activemask" => {
                expect(ops, 1)?;
                Ok(Op::ActiveMask {
                    d: self.dst(&ops[0])?,
                })
            }
            _ => Err(Why::Unsupported),
        }
    }

    fn mov(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &[])?;
        expect(ops, 2)?;
        match (&ops[0], &ops[1]) {
            (Operand::Vector(parts), a) => {
                let n = parts.len();
                if !(2..=4).contains(&n) {
                    return Err(Why::Unsupported);
                }
                let mut d = [SINK; 4];
                for (k, p) in parts.iter().enumerate() {
                    d[k] = self.dst(p)?;
                }
                Ok(Op::Unpack {
                    bits: ty.bits / n as u8,
                    n: n as u8,
                    d,
                    a: self.src(a, ty)?,
                })
            }
            (d, Operand::Vector(parts)) => {
                let n = parts.len();
                if !(2..=4).contains(&n) {
                    return Err(Why::Unsupported);
                }
                let bits = ty.bits / n as u8;
                let part_ty = Ty {
                    kind: Kind::B,
                    bits,
                };
                let mut srcs = [Src::Imm(0); 4];
                for (k, p) in parts.iter().enumerate() {
                    srcs[k] = self.src(p, part_ty)?;
                }
                Ok(Op::Pack {
                    bits,
                    n: n as u8,
                    d: self.dst(d)?,
                    parts: srcs,
                })
            }
            (d, a) => Ok(Op::Mov {
                ty,
                d: self.dst(d)?,
                a: self.src(a, ty)?,
            }),
        }
    }

    fn binary(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (float_mode, m) = split_float_mode(m);
        let m = &m[..];
        let sat = m.contains(&"sat");
        let mode = mad_mode(m);
        let ty = one_type(m, &["sat", "lo", "hi", "wide"])?;
        expect(ops, 3)?;
        let d = self.dst(&ops[0])?;
        let a = self.src(&ops[1], ty)?;
        if !ty.is_float() && float_mode != FloatMode::default() {
            return Err(Why::Unsupported);
        }
        if ty.is_float() {
            let exact = matches!(base, "min" | "max" | "copysign");
            if mode.is_some() || (exact && float_mode.round != FloatRound::Nearest) {
                return Err(Why::Unsupported);
            }
            let op = match base {
                "add" => FloatOp::Add,
                "sub" => FloatOp::Sub,
                "mul" => FloatOp::Mul,
                "div" => FloatOp::Div,
                "min" => FloatOp::Min,
                "max" => FloatOp::Max,
                "copysign" => FloatOp::CopySign,
                _ => return Err(Why::Unsupported),
            };
            let b = self.src(&ops[2], ty)?;
            return Ok(Op::Float {
                op,
                ty,
                mode: float_mode,
                sat,
                d,
                a,
                b,
            });
        }
        let shift = base == "shl" || base == "shr";
        let b_ty = if shift {
            Ty {
                kind: Kind::U,
                bits: 32,
            }
        } else {
            ty
        };
        let b = self.src(&ops[2], b_ty)?;
        if base == "mul" && mode == Some(MadMode::Wide) {
            if ty.bits > 32 {
                return Err(Why::Unsupported);
            }
            return Ok(Op::MulWide {
                signed: ty.signed(),
                bits: ty.bits,
                d,
                a,
                b,
            });
        }
        let op = match (base, sat, mode) {
            ("add", false, None) => IntOp::Add,
            ("sub", false, None) => IntOp::Sub,
            ("add", true, None) if ty.signed() && ty.bits == 32 => IntOp::AddSat,
            ("sub", true, None) if ty.signed() && ty.bits == 32 => IntOp::SubSat,
            ("mul", false, Some(MadMode::Lo)) => IntOp::MulLo,
            ("mul", false, Some(MadMode::Hi)) => IntOp::MulHi,
            ("div", false, None) => IntOp::Div,
            ("rem", false, None) => IntOp::Rem,
            ("min", false, None) => IntOp::Min,
            ("max", false, None) => IntOp::Max,
            ("and", false, None) => IntOp::And,
            ("or", false, None) => IntOp::Or,
            ("xor", false, None) => IntOp::Xor,
            ("shl", false, None) => IntOp::Shl,
            ("shr", false, None) => IntOp::Shr,
            _ => return Err(Why::Unsupported),
        };
        if ty.kind == Kind::Pred && !matches!(op, IntOp::And | IntOp::Or | IntOp::Xor) {
            return Err(Why::Unsupported);
        }
        Ok(Op::Int { op, ty, d, a, b })
    }

    /// Carry-flag arithmetic: `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}`, `mad{c}.{lo,hi}{.cc}`.
    fn carry(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &["cc", "lo", "hi"])?;
        if !matches!(ty.kind, Kind::U | Kind::S) || ty.bits < 32 {
            return Err(Why::Unsupported);
        }
        let op = match (base, mad_mode(m)) {
            ("add" | "addc", None) => CarryOp::Add,
            ("sub" | "subc", None) => CarryOp::Sub,
            ("mad" | "madc", Some(MadMode::Lo)) => CarryOp::MadLo,
            ("mad" | "madc", Some(MadMode::Hi)) => CarryOp::MadHi,
            _ => return Err(Why::Unsupported),
        };
        let is_mad = matches!(op, CarryOp::MadLo | CarryOp::MadHi);
        expect(ops, if is_mad { 4 } else { 3 })?;
        Ok(Op::Carry {
            op,
            ty,
            use_cf: base.ends_with('c'),
            set_cf: m.contains(&"cc"),
            d: self.dst(&ops[0])?,
            cc: self.reg("%%cc"),
            a: self.src(&ops[1], ty)?,
            b: self.src(&ops[2], ty)?,
            c: if is_mad {
                self.src(&ops[3], ty)?
            } else {
                Src::Imm(0)
            },
        })
    }

    /// `bar.red.popc.u32 d, 0, p` and `bar.red.{and,or}.pred d, 0, {!}p` (whole block only).
    fn bar_red(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let op = match m {
            ["red", "popc", "u32"] => BarRedOp::Popc,
            ["red", "and", "pred"] => BarRedOp::And,
            ["red", "or", "pred"] => BarRedOp::Or,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        if !matches!(&ops[1], Operand::Immediate(t) if t == "0") {
            return Err(Why::Unsupported);
        }
        let (p, negate) = self.pred_src(&ops[2])?;
        Ok(Op::BarRed {
            op,
            d: self.dst(&ops[0])?,
            p,
            negate,
        })
    }

    fn mad(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (float_mode, m) = split_float_mode(m);
        let m = &m[..];
        let sat = m.contains(&"sat");
        let mode = mad_mode(m);
        let ty = one_type(m, &["sat", "lo", "hi", "wide"])?;
        expect(ops, 4)?;
        let d = self.dst(&ops[0])?;
        if ty.is_float() {
            if mode.is_some() {
                return Err(Why::Unsupported);
            }
            return Ok(Op::Fma {
                ty,
                mode: float_mode,
                sat,
                d,
                a: self.src(&ops[1], ty)?,
                b: self.src(&ops[2], ty)?,
                c: self.src(&ops[3], ty)?,
            });
        }
        let mode = match (base, mode, sat) {
            ("mad", Some(mode), false) if float_mode == FloatMode::default() => mode,
            _ => return Err(Why::Unsupported),
        };
        if mode == MadMode::Wide && ty.bits > 32 {
            return Err(Why::Unsupported);
        }
        let c_ty = if mode == MadMode::Wide {
            Ty {
                kind: ty.kind,
                bits: ty.bits * 2,
            }
        } else {
            ty
        };
        Ok(Op::Mad {
            mode,
            ty,
            d,
            a: self.src(&ops[1], ty)?,
            b: self.src(&ops[2], ty)?,
            c: self.src(&ops[3], c_ty)?,
        })
    }

    fn unary(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (mode, m) = split_float_mode(m);
        let ty = one_type(&m, &[])?;
        expect(ops, 2)?;
        let op = match base {
            "not" => UnOp::Not,
            "cnot" => UnOp::CNot,
            "neg" => UnOp::Neg,
            "abs" => UnOp::Abs,
            "popc" => UnOp::Popc,
            "clz" => UnOp::Clz,
            "brev" => UnOp::Brev,
            "sqrt" => UnOp::Sqrt,
            "rcp" => UnOp::Rcp,
            "rsqrt" => UnOp::Rsqrt,
            "ex2" => UnOp::Ex2,
            "lg2" => UnOp::Lg2,
            "sin" => UnOp::Sin,
            "cos" => UnOp::Cos,
            _ => return Err(Why::Unsupported),
        };
        let float_only = matches!(
            op,
            UnOp::Sqrt | UnOp::Rcp | UnOp::Rsqrt | UnOp::Ex2 | UnOp::Lg2 | UnOp::Sin | UnOp::Cos
        );
        let int_only = matches!(
            op,
            UnOp::Not | UnOp::CNot | UnOp::Popc | UnOp::Clz | UnOp::Brev
        );
        if (float_only && !ty.is_float()) || (int_only && ty.is_float()) {
            return Err(Why::Unsupported);
        }
        // only sqrt and rcp are correctly rounded; the others are approximations in PTX
        let rounds = matches!(op, UnOp::Sqrt | UnOp::Rcp);
        if (!ty.is_float() && mode != FloatMode::default())
            || (!rounds && mode.round != FloatRound::Nearest)
        {
            return Err(Why::Unsupported);
        }
        if ty.kind == Kind::Pred && op != UnOp::Not {
            return Err(Why::Unsupported);
        }
        Ok(Op::Unary {
            op,
            ty,
            mode,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], ty)?,
        })
    }

    fn setp(&mut self, is_set: bool, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ftz = m.contains(&"ftz");
        let mut words = m.iter().filter(|w| !harmless(w) && **w != "ftz");
        let cmp = words
            .next()
            .and_then(|w| cmp_of(w))
            .ok_or(Why::Unsupported)?;
        let mut rest: Vec<&str> = words.copied().collect();
        let bool_op = match rest.first().copied() {
            Some("and") => Some(BoolOp::And),
            Some("or") => Some(BoolOp::Or),
            Some("xor") => Some(BoolOp::Xor),
            _ => None,
        };
        if bool_op.is_some() {
            rest.remove(0);
        }
        let (dty, ty) = match (is_set, rest.as_slice()) {
            (false, [t]) => (Ty::PRED, ty_of(t).ok_or(Why::Unsupported)?),
            (true, [dt, t]) => (
                ty_of(dt).ok_or(Why::Unsupported)?,
                ty_of(t).ok_or(Why::Unsupported)?,
            ),
            _ => return Err(Why::Unsupported),
        };
        if ty.kind == Kind::Pred || (ftz && !ty.is_float()) {
            return Err(Why::Unsupported);
        }
        let want = if bool_op.is_some() { 4 } else { 3 };
        expect(ops, want)?;
        let combine = match bool_op {
            Some(op) => {
                let (c, negate) = self.pred_src(&ops[3])?;
                Some(Combine { op, c, negate })
            }
            None => None,
        };
        let a = self.src(&ops[1], ty)?;
        let b = self.src(&ops[2], ty)?;
        if is_set {
            return Ok(Op::Set {
                cmp,
                ty,
                ftz,
                dty,
                d: self.dst(&ops[0])?,
                a,
                b,
                combine,
            });
        }
        let (p, q) = match &ops[0] {
            Operand::Other(t) if t.contains('|') => {
                let (p, q) = t.split_once('|').unwrap_or_default();
                (self.reg(p.trim()), Some(self.reg(q.trim())))
            }
            o => (self.dst(o)?, None),
        };
        Ok(Op::Setp {
            cmp,
            ty,
            ftz,
            p,
            q,
            a,
            b,
            combine,
        })
    }

    fn cvt(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let (mode, m) = split_float_mode(m);
        let mut round = Round::Default;
        let mut sat = false;
        let mut types = Vec::new();
        for w in &m {
            match *w {
                "rni" => round = Round::Nearest,
                "rzi" => round = Round::Zero,
                "rmi" => round = Round::Down,
                "rpi" => round = Round::Up,
                "sat" => sat = true,
                w if harmless(w) => {}
                w => types.push(ty_of(w).ok_or(Why::Unsupported)?),
            }
        }
        let [dst, src] = types[..] else {
            return Err(Why::Unsupported);
        };
        if dst.kind == Kind::Pred || src.kind == Kind::Pred {
            return Err(Why::Unsupported);
        }
        // a float rounding needs a float result; `.ftz` an `f32` side
        let f32_side = (dst.is_float() && dst.bits == 32) || (src.is_float() && src.bits == 32);
        if (mode.round != FloatRound::Nearest && !dst.is_float()) || (mode.ftz && !f32_side) {
            return Err(Why::Unsupported);
        }
        expect(ops, 2)?;
        Ok(Op::Cvt {
            dst,
            src,
            round,
            mode,
            sat,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], src)?,
        })
    }

    fn cvta(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let to = m.first() == Some(&"to");
        let words = if to { &m[1..] } else { m };
        let (space, ty) = match words {
            [s, t] => (*s, ty_of(t).ok_or(Why::Unsupported)?),
            _ => return Err(Why::Unsupported),
        };
        let space = match space {
            "global" => Space::Global,
            "shared" => Space::Shared,
            "local" => Space::Local,
            "const" => Space::Const,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 2)?;
        Ok(Op::Cvta {
            space,
            to_generic: !to,
            d: self.dst(&ops[0])?,
            a: self.src(&ops[1], ty)?,
        })
    }

    fn bits(&mut self, base: &str, m: &[&str], ops: &[Operand]) -> R<Op> {
        let ty = one_type(m, &[])?;
        let u32t = Ty {
            kind: Kind::U,
            bits: 32,
        };
        match base {
            "bfe" => {
                expect(ops, 4)?;
                Ok(Op::Bfe {
                    ty,
                    d: self.dst(&ops[0])?,
                    a: self.src(&ops[1], ty)?,
                    b: self.src(&ops[2], u32t)?,
                    c: self.src(&ops[3], u32t)?,
                })
            }
            "bfi" => {
                expect(ops, 5)?;
                Ok(Op::Bfi {
                    ty,
                    d: self.dst(&ops[0])?,
                    f: self.src(&ops[1], ty)?,
                    b: self.src(&ops[2], ty)?,
                    c: self.src(&ops[3], u32t)?,
                    len: self.src(&ops[4], u32t)?,
                })
            }
            _ => {
                if m.len() != 1 {
                    return Err(Why::Unsupported);
                }
                expect(ops, 4)?;
                Ok(Op::Prmt {
                    d: self.dst(&ops[0])?,
                    a: self.src(&ops[1], ty)?,
                    b: self.src(&ops[2], ty)?,
                    c: self.src(&ops[3], ty)?,
                })
            }
        }
    }

    fn memory(&mut self, i: &Instruction, m: &[&str]) -> R<Op> {
        let access = i.memory_access().ok_or(Why::Unsupported)?;
        let base = i.opcode.base.as_str();
        let space = match access.space {
            ptx::StateSpace::Global => Space::Global,
            ptx::StateSpace::Shared => Space::Shared,
            ptx::StateSpace::Local => Space::Local,
            ptx::StateSpace::Param => Space::Param,
            ptx::StateSpace::Const => Space::Const,
            ptx::StateSpace::Generic => Space::Generic,
        };
        // `volatile` is relaxed at sys scope, and sys or cluster count as gpu here.
        let reach = match (access.semantics, access.scope) {
            (Semantics::Weak, _) => Reach::Weak,
            (_, Some(Scope::Cta)) => Reach::Cta,
            _ => Reach::Gpu,
        };
        let order = Order {
            reach,
            releases: matches!(access.semantics, Semantics::Release | Semantics::AcqRel),
            acquires: matches!(access.semantics, Semantics::Acquire | Semantics::AcqRel),
            reduction: base == "red",
        };
        let mut ty = None;
        let mut atom_op = None;
        for w in m {
            let head = w.split("::").next().unwrap_or(w);
            if let Some(t) = ty_of(w) {
                ty = Some(t);
                continue;
            }
            let known = matches!(
                head,
                "global"
                    | "shared"
                    | "local"
                    | "param"
                    | "const"
                    | "weak"
                    | "volatile"
                    | "relaxed"
                    | "acquire"
                    | "release"
                    | "acq_rel"
                    | "cta"
                    | "gpu"
                    | "sys"
                    | "v2"
                    | "v4"
            ) || harmless(w);
            if known {
                continue;
            }
            match (base, atom_op_of(w)) {
                ("atom" | "red", Some(op)) if atom_op.is_none() => atom_op = Some(op),
                _ => return Err(Why::Unsupported),
            }
        }
        let ty = ty.ok_or(Why::Unsupported)?;
        if ty.kind == Kind::Pred {
            return Err(Why::Unsupported);
        }
        let n = access.vector;
        if !matches!(n, 1 | 2 | 4) {
            return Err(Why::Unsupported);
        }
        let ops = &i.operands;
        match base {
            "ld" | "ldu" => {
                expect(ops, 2)?;
                let mut d = [SINK; 4];
                match &ops[0] {
                    Operand::Vector(parts) if parts.len() == n as usize => {
                        for (k, p) in parts.iter().enumerate() {
                            d[k] = self.dst(p)?;
                        }
                    }
                    o if n == 1 => d[0] = self.dst(o)?,
                    _ => return bad("vector width does not match the operand"),
                }
                let addr = self.addr(&ops[1], space)?;
                Ok(Op::Ld {
                    space,
                    ty,
                    n,
                    d,
                    addr,
                    order,
                })
            }
            "st" => {
                expect(ops, 2)?;
                let addr = self.addr(&ops[0], space)?;
                let mut s = [Src::Imm(0); 4];
                match &ops[1] {
                    Operand::Vector(parts) if parts.len() == n as usize => {
                        for (k, p) in parts.iter().enumerate() {
                            s[k] = self.src(p, ty)?;
                        }
                    }
                    o if n == 1 => s[0] = self.src(o, ty)?,
                    _ => return bad("vector width does not match the operand"),
                }
                Ok(Op::St {
                    space,
                    ty,
                    n,
                    s,
                    addr,
                    order,
                })
            }
            _ => {
                let op = atom_op.ok_or(Why::Unsupported)?;
                if n != 1 || !atom_type_ok(op, ty) {
                    return Err(Why::Unsupported);
                }
                let is_red = base == "red";
                let (d, rest) = if is_red {
                    (SINK, &ops[..])
                } else {
                    (self.dst(ops.first().ok_or(Why::Unsupported)?)?, &ops[1..])
                };
                let want = if op == AtomOp::Cas { 3 } else { 2 };
                expect(rest, want)?;
                let addr = self.addr(&rest[0], space)?;
                let b = self.src(&rest[1], ty)?;
                let c = if op == AtomOp::Cas {
                    self.src(&rest[2], ty)?
                } else {
                    Src::Imm(0)
                };
                Ok(Op::Atom {
                    space,
                    op,
                    ty,
                    d,
                    addr,
                    b,
                    c,
                    order,
                })
            }
        }
    }

    fn shfl(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let mode = match m {
            ["sync", mode, "b32"] => match *mode {
                "up" => ShflMode::Up,
                "down" => ShflMode::Down,
                "bfly" => ShflMode::Bfly,
                "idx" => ShflMode::Idx,
                _ => return Err(Why::Unsupported),
            },
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 5)?;
        let u32t = Ty {
            kind: Kind::B,
            bits: 32,
        };
        let (d, p) = match &ops[0] {
            Operand::Other(t) if t.contains('|') => {
                let (d, p) = t.split_once('|').unwrap_or_default();
                (self.reg(d.trim()), Some(self.reg(p.trim())))
            }
            o => (self.dst(o)?, None),
        };
        Ok(Op::Shfl {
            mode,
            d,
            p,
            a: self.src(&ops[1], u32t)?,
            b: self.src(&ops[2], u32t)?,
            c: self.src(&ops[3], u32t)?,
            mask: self.src(&ops[4], u32t)?,
        })
    }

    fn vote(&mut self, m: &[&str], ops: &[Operand]) -> R<Op> {
        let mode = match m {
            ["sync", "all", "pred"] => VoteMode::All,
            ["sync", "any", "pred"] => VoteMode::Any,
            ["sync", "uni", "pred"] => VoteMode::Uni,
            ["sync", "ballot", "b32"] => VoteMode::Ballot,
            _ => return Err(Why::Unsupported),
        };
        expect(ops, 3)?;
        let (a, negate) = self.pred_src(&ops[1])?;
        Ok(Op::Vote {
            mode,
            d: self.dst(&ops[0])?,
            a,
            negate,
            mask: self.src(
                &ops[2],
                Ty {
                    kind: Kind::B,
                    bits: 32,
                },
            )?,
        })
    }
}

fn expect(ops: &[Operand], n: usize) -> R<()> {
    if ops.len() == n {
        Ok(())
    } else {
        bad(format!("expected {n} operands, found {}", ops.len()))
    }
}

/// Splits a float instruction's rounding (`.rn`, `.rz`, `.rm`, `.rp`) and `.ftz` off its
/// modifiers; the other modifiers are returned in order.
fn split_float_mode<'a>(m: &[&'a str]) -> (FloatMode, Vec<&'a str>) {
    let mut mode = FloatMode::default();
    let mut rest = Vec::with_capacity(m.len());
    for &w in m {
        match w {
            "rn" => mode.round = FloatRound::Nearest,
            "rz" => mode.round = FloatRound::Zero,
            "rm" => mode.round = FloatRound::Down,
            "rp" => mode.round = FloatRound::Up,
            "ftz" => mode.ftz = true,
            w => rest.push(w),
        }
    }
    (mode, rest)
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

fn mad_mode(m: &[&str]) -> Option<MadMode> {
    m.iter().find_map(|w| match *w {
        "lo" => Some(MadMode::Lo),
        "hi" => Some(MadMode::Hi),
        "wide" => Some(MadMode::Wide),
        _ => None,
    })
}

fn cmp_of(w: &str) -> Option<Cmp> {
    Some(match w {
        "eq" => Cmp::Eq,
        "ne" => Cmp::Ne,
        "lt" => Cmp::Lt,
        "le" => Cmp::Le,
        "gt" => Cmp::Gt,
        "ge" => Cmp::Ge,
        "lo" => Cmp::Lo,
        "ls" => Cmp::Ls,
        "hi" => Cmp::Hi,
        "hs" => Cmp::Hs,
        "equ" => Cmp::Equ,
        "neu" => Cmp::Neu,
        "ltu" => Cmp::Ltu,
        "leu" => Cmp::Leu,
        "gtu" => Cmp::Gtu,
        "geu" => Cmp::Geu,
        "num" => Cmp::Num,
        "nan" => Cmp::Nan,
        _ => return None,
    })
}

fn atom_op_of(w: &str) -> Option<AtomOp> {
    Some(match w {
        "add" => AtomOp::Add,
        "exch" => AtomOp::Exch,
        "cas" => AtomOp::Cas,
        "min" => AtomOp::Min,
        "max" => AtomOp::Max,
        "inc" => AtomOp::Inc,
        "dec" => AtomOp::Dec,
        "and" => AtomOp::And,
        "or" => AtomOp::Or,
        "xor" => AtomOp::Xor,
        _ => return None,
    })
}

fn atom_type_ok(op: AtomOp, ty: Ty) -> bool {
    let wide = ty.bits == 32 || ty.bits == 64;
    match op {
        AtomOp::Add => wide && ty.kind != Kind::B,
        AtomOp::Exch | AtomOp::Cas | AtomOp::And | AtomOp::Or | AtomOp::Xor => {
            wide && ty.kind == Kind::B
        }
        AtomOp::Min | AtomOp::Max => wide && matches!(ty.kind, Kind::U | Kind::S),
        AtomOp::Inc | AtomOp::Dec => ty.bits == 32 && ty.kind == Kind::U,
    }
}

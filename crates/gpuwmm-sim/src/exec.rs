//! The interpreter's step loop and memory accesses: executing decoded instructions of one thread.
//!
//! This is the hot path. A quantum runs straight through `Kernel::code` with the thread's register
//! file addressed as `regs[thread * nregs + slot]`; no strings, hashing or allocation happen per
//! instruction. Memory accesses resolve the state space (generic addresses by window), check
//! bounds and alignment (a violation is a [`BackendError::Fault`] naming kernel, PTX line and
//! address) and, for global memory under the weak model, go through the store buffer and the
//! stale cache as documented in `mod.rs`.

use super::alu;
use super::decode::CALL_PARAM;
use super::half;
use super::isa::*;
use super::memory::MemFault;
use super::ptx_model::Access as ModelAccess;
use super::ptx_model::{self, Mark, Syncing};
use super::races::Bytes;
use super::sched::{
    Deferred, Machine, QuantumEnd, Reserved, Restriction, BAR_ARRIVE_ONLY, WARP_SIZE,
};
use super::weak::Pending;
use super::{LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE};
use crate::device::BackendError;
use rand::Rng;

mod held;
mod one_location;

/// Where an access goes after resolving generic addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    Global,
    Const,
    Shared,
    Local,
    Param,
}

fn resolve(space: Space, addr: u64) -> (Region, u64) {
    let in_window = |w: u64| addr >= w && addr < w + WINDOW_SIZE;
    match space {
        Space::Global => (Region::Global, addr),
        Space::Const => (Region::Const, addr),
        Space::Param if addr & CALL_PARAM != 0 => (Region::Local, addr & !CALL_PARAM),
        Space::Param => (Region::Param, addr),
        Space::Shared if in_window(SHARED_WINDOW) => (Region::Shared, addr - SHARED_WINDOW),
        Space::Shared => (Region::Shared, addr),
        Space::Local if in_window(LOCAL_WINDOW) => (Region::Local, addr - LOCAL_WINDOW),
        Space::Local => (Region::Local, addr),
        Space::Generic if in_window(SHARED_WINDOW) => (Region::Shared, addr - SHARED_WINDOW),
        Space::Generic if in_window(LOCAL_WINDOW) => (Region::Local, addr - LOCAL_WINDOW),
        Space::Generic => (Region::Global, addr),
    }
}

/// Where the PTX model keeps byte `at` of the blocks' shared memory (`at` counts from block 0's
/// first byte, so every block's shared memory has its own locations): far from global memory
/// ([`GLOBAL_BASE`](super::memory::GLOBAL_BASE)) and from the generic windows.
fn shared_location(at: usize) -> u64 {
    SHARED_LOCATIONS + at as u64
}

/// The first of the PTX model's shared-memory locations (see [`shared_location`]).
const SHARED_LOCATIONS: u64 = 0x4000_0000_0000;

/// What kind of access faulted.
#[derive(Debug, Clone, Copy)]
enum Access {
    Load,
    Store,
    Atomic,
}

impl Machine<'_> {
    #[inline(always)]
    fn val(&self, base: usize, t: usize, s: Src) -> u64 {
        match s {
            Src::Reg(r) => self.regs[base + r as usize],
            Src::Imm(v) => u64::from(v),
            Src::Const(i) => self.k.consts[i as usize],
            Src::Special(sp) => self.special(t, sp),
        }
    }

    fn special(&self, t: usize, sp: Special) -> u64 {
        let th = &self.threads[t];
        let lane = th.lin % 32;
        let v = match sp {
            Special::Tid(d) => th.tid[d as usize],
            Special::Ntid(d) => self.block_dim[d as usize],
            Special::Ctaid(d) => self.blocks[th.block as usize].ctaid[d as usize],
            Special::Nctaid(d) => self.grid_dim[d as usize],
            Special::LaneId => lane,
            Special::WarpId => th.lin / 32,
            Special::NWarpId => self.block_dim.iter().product::<u32>().div_ceil(32),
            Special::SmId => th.block % super::SM_COUNT,
            Special::NSmId => super::SM_COUNT,
            Special::GridId => 1,
            Special::Clock => return self.executed,
            Special::LanemaskEq => 1 << lane,
            Special::LanemaskLt => (1u32 << lane) - 1,
            Special::LanemaskLe => ((1u64 << (lane + 1)) - 1) as u32,
            Special::LanemaskGt => !(((1u64 << (lane + 1)) - 1) as u32),
            Special::LanemaskGe => !((1u32 << lane) - 1),
            Special::EnvReg(1) => (self.grid_workspace >> 32) as u32,
            Special::EnvReg(2) => self.grid_workspace as u32,
            Special::EnvReg(_) => 0,
        };
        u64::from(v)
    }

    /// A fault at PTX line `line`: the kernel as its source names it, and the source line
    /// (with the line it is inlined at) where the PTX carries line information.
    pub(crate) fn fault(&self, line: u32, what: impl std::fmt::Display) -> BackendError {
        let name = gpuwmm_ptx::demangle::call_name(&self.k.name);
        let at = match self.k.origins.get(&line) {
            Some(origin) => format!("at {origin} (PTX line {line})"),
            None => format!("PTX line {line}"),
        };
        BackendError::Fault(format!("kernel '{name}', {at}: {what}"))
    }

    /// What a `trap` at PTX line `line` says: its source line, and for one in
    /// `cooperative_groups` (a grid-wide sync finding no cooperative launch), why.
    #[cold]
    #[inline(never)]
    fn trap_reason(&self, line: u32) -> String {
        match self.k.origins.get(&line) {
            Some(o) if o.contains("cooperative_groups") && self.grid_workspace == 0 => {
                format!(
                    "trap at {o}: a grid-wide cooperative_groups sync needs a cooperative launch \
                     (cudaLaunchCooperativeKernel; in an app.toml, `cooperative = true` on the \
                     launch), and this launch is not cooperative"
                )
            }
            Some(o) => format!("trap at {o}"),
            None => "trap".to_string(),
        }
    }

    fn mem_fault(
        &self,
        line: u32,
        access: Access,
        space: &str,
        addr: u64,
        size: u64,
        why: MemFault,
    ) -> BackendError {
        let why = why.describe();
        let access = match access {
            Access::Load => "load",
            Access::Store => "store",
            Access::Atomic => "atomic",
        };
        self.fault(
            line,
            format_args!("{space} {access} of {size} bytes at {addr:#x} is {why}"),
        )
    }

    /// Runs thread `t` for at most `quantum` instructions.
    pub fn run_quantum(&mut self, t: usize, quantum: u32) -> Result<QuantumEnd, BackendError> {
        let k = self.k;
        let base = t * self.nregs;
        let mut pc = self.threads[t].pc as usize;
        let mut n = 0;
        let stop = loop {
            if n == quantum {
                break Ok(QuantumEnd::Quantum);
            }
            let inst = &k.code[pc];
            if self.threads[t].deferred != 0 {
                match self.hazard(t, base, inst) {
                    Hazard::None => {}
                    Hazard::Hold => {
                        self.hold(t, base, inst);
                        pc += 1;
                        n += 1;
                        continue;
                    }
                    Hazard::OwnStore if self.overtake_own_loads(t, base, inst) => {}
                    Hazard::QueueLoad => {}
                    Hazard::Boundary
                        if !self.holds_stores(t) && self.overtake_deferred(t, is_fence(inst)) => {}
                    // The thread waits for its loads, half the time letting others run first.
                    _ if self.rng.sample(self.half_coin) => break Ok(QuantumEnd::Quantum),
                    _ => self.resolve_deferred(t)?,
                }
            }
            pc += 1;
            n += 1;
            if inst.guard != NO_GUARD {
                let slot = (inst.guard & !GUARD_NEGATED) as usize;
                let negated = inst.guard & GUARD_NEGATED != 0;
                if (self.regs[base + slot] != 0) == negated {
                    continue;
                }
            }
            match self.step(t, base, inst) {
                Ok(Flow::Next) => {}
                Ok(Flow::Jump(target)) => pc = target as usize,
                Ok(Flow::Call(site)) => pc = self.call(t, site, pc),
                Ok(Flow::Return) => match self.ret(t) {
                    Some(to) => pc = to,
                    None => break Ok(QuantumEnd::Exit),
                },
                Ok(Flow::Stop(s)) => break Ok(s),
                Err(e) => break Err(e),
            }
        };
        self.threads[t].pc = pc as u32;
        self.threads[t].executed += u64::from(n);
        self.executed += u64::from(n);
        stop
    }

    /// The values of three sources.
    #[inline(always)]
    fn vals3(&self, base: usize, t: usize, s: [Src; 3]) -> [u64; 3] {
        // spelled out: `s.map(..)` stops being inlined once the step loop has enough callers
        [
            self.val(base, t, s[0]),
            self.val(base, t, s[1]),
            self.val(base, t, s[2]),
        ]
    }

    #[inline]
    fn set(&mut self, base: usize, d: Reg, v: u64) {
        self.regs[base + d as usize] = v;
    }

    /// Executes one instruction of thread `t` (its registers start at `base`), by family.
    #[inline(always)]
    fn step(&mut self, t: usize, base: usize, inst: &Inst) -> Result<Flow, BackendError> {
        match inst.op {
            Op::Int { .. }
            | Op::MulWide { .. }
            | Op::Mad { .. }
            | Op::Carry { .. }
            | Op::Sad { .. } => self.step_int(t, base, inst)?,
            Op::Bfind { .. } | Op::Bfe { .. } | Op::Bfi { .. } | Op::Prmt { .. } => {
                self.step_bits(t, base, inst.op)
            }
            Op::Float { .. } | Op::Fma { .. } | Op::Unary { .. } => {
                self.step_float(t, base, inst.op)
            }
            Op::Setp { .. } | Op::Set { .. } | Op::Selp { .. } => {
                self.step_compare(t, base, inst.op)
            }
            Op::Mov { .. }
            | Op::Cvt { .. }
            | Op::Cvta { .. }
            | Op::Pack { .. }
            | Op::Unpack { .. } => self.step_move(t, base, inst.op),
            Op::Ld { .. } | Op::St { .. } | Op::Atom { .. } => self.step_memory(t, base, inst)?,
            Op::Half { .. }
            | Op::HalfSetp { .. }
            | Op::HalfSet { .. }
            | Op::HalfCvt { .. }
            | Op::Shf { .. }
            | Op::Dot { .. }
            | Op::Lop3 { .. }
            | Op::Simd { .. }
            | Op::Fns { .. } => self.step_intrinsic(t, base, inst.op),
            Op::BarRed { .. }
            | Op::Bar { .. }
            | Op::WarpSync { .. }
            | Op::Shfl { .. }
            | Op::Vote { .. }
            | Op::Match { .. }
            | Op::Redux { .. }
            | Op::ActiveMask { .. } => return self.step_warp(t, base, inst),
            Op::Printf { format, args, ret } => self.printf(t, inst.line, [format, args], ret)?,
            Op::Bra { .. }
            | Op::Call { .. }
            | Op::Return
            | Op::Exit
            | Op::Fence { .. }
            | Op::Nop
            | Op::Trap
            | Op::AssertFail => return self.step_control(t, inst),
        }
        Ok(Flow::Next)
    }

    /// Integer arithmetic; integer division by zero faults.
    #[inline(always)]
    fn step_int(&mut self, t: usize, base: usize, inst: &Inst) -> Result<(), BackendError> {
        match inst.op {
            Op::Int { op, ty, d, a, b } => {
                let (a, b) = (self.val(base, t, a), self.val(base, t, b));
                let v = alu::int_op(op, ty, a, b)
                    .map_err(|_| self.fault(inst.line, "integer division by zero"))?;
                self.set(base, d, v);
            }
            Op::MulWide {
                signed,
                bits,
                d,
                a,
                b,
            } => {
                let v = alu::mul_wide(signed, bits, self.val(base, t, a), self.val(base, t, b));
                self.set(base, d, v);
            }
            Op::Mad {
                mode,
                ty,
                d,
                a,
                b,
                c,
            } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let v = alu::mad(mode, ty, a, b, c);
                self.set(base, d, v);
            }
            Op::Carry {
                op,
                ty,
                use_cf,
                set_cf,
                d,
                cc,
                a,
                b,
                c,
            } => {
                let cf = if use_cf {
                    self.regs[base + cc as usize] & 1
                } else {
                    0
                };
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let (v, carry) = alu::carry(op, ty, a, b, c, cf);
                self.set(base, d, v);
                if set_cf {
                    self.set(base, cc, carry);
                }
            }
            Op::Sad { ty, d, a, b, c } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let v = alu::sad(ty, a, b, c);
                self.set(base, d, v);
            }
            _ => unreachable!("step dispatches only integer ops to step_int"),
        }
        Ok(())
    }

    /// Bit manipulation: `bfind`, `bfe`, `bfi`, `prmt`.
    #[inline(always)]
    fn step_bits(&mut self, t: usize, base: usize, op: Op) {
        match op {
            Op::Bfind { ty, shiftamt, d, a } => {
                let v = alu::bfind(ty, shiftamt, self.val(base, t, a));
                self.set(base, d, v);
            }
            Op::Bfe { ty, d, a, b, c } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let v = alu::bfe(ty, a, b, c);
                self.set(base, d, v);
            }
            Op::Bfi {
                ty,
                d,
                f,
                b,
                c,
                len,
            } => {
                let v = alu::bfi(
                    ty,
                    self.val(base, t, f),
                    self.val(base, t, b),
                    self.val(base, t, c),
                    self.val(base, t, len),
                );
                self.set(base, d, v);
            }
            Op::Prmt { d, a, b, c } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let v = alu::prmt(a, b, c);
                self.set(base, d, v);
            }
            _ => unreachable!("step dispatches only bit manipulation to step_bits"),
        }
    }

    /// Float arithmetic and the unary operations.
    #[inline(always)]
    fn step_float(&mut self, t: usize, base: usize, op: Op) {
        match op {
            Op::Float {
                op,
                ty,
                mode,
                sat,
                d,
                a,
                b,
            } => {
                let (a, b) = (self.val(base, t, a), self.val(base, t, b));
                let v = alu::float_op(op, ty, mode, sat, a, b);
                self.set(base, d, v);
            }
            Op::Fma {
                ty,
                mode,
                sat,
                d,
                a,
                b,
                c,
            } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let v = alu::fma(ty, mode, sat, a, b, c);
                self.set(base, d, v);
            }
            Op::Unary { op, ty, mode, d, a } => {
                let v = alu::unary(op, ty, mode, self.val(base, t, a));
                self.set(base, d, v);
            }
            _ => unreachable!("step dispatches only float ops to step_float"),
        }
    }

    /// 16-bit floats and the integer intrinsics (`shf`, `dp4a`, `fns`): rarer than the other
    /// families, so kept out of line.
    #[inline(never)]
    fn step_intrinsic(&mut self, t: usize, base: usize, op: Op) {
        match op {
            Op::Half {
                op,
                ty,
                mode,
                sat,
                relu,
                d,
                a,
                b,
                c,
            } => {
                let abc = self.vals3(base, t, [a, b, c]);
                self.set(base, d, half::arith(op, ty, mode, sat, relu, abc));
            }
            Op::HalfSetp {
                cmp,
                ty,
                ftz,
                p,
                q,
                a,
                b,
                combine,
            } => {
                let (a, b) = (self.val(base, t, a), self.val(base, t, b));
                let (lo, hi) = half::compare(cmp, ty, ftz, a, b);
                // a pair sets p and q from its two elements; one value, p and its negation
                let hi = if ty.pair { hi } else { !lo };
                self.set_predicates(base, t, (p, q), (lo, hi), combine);
            }
            Op::HalfSet {
                cmp,
                ty,
                ftz,
                truth,
                d,
                a,
                b,
                combine,
            } => {
                let (a, b) = (self.val(base, t, a), self.val(base, t, b));
                let (lo, hi) = half::compare(cmp, ty, ftz, a, b);
                let combined = self.combined(base, t, combine);
                let element = |r: bool| if combined(r) { u64::from(truth) } else { 0 };
                let v = match ty.pair {
                    true => element(lo) | element(hi) << 16,
                    false => element(lo),
                };
                self.set(base, d, v);
            }
            Op::HalfCvt {
                conv,
                round,
                mode,
                sat,
                relu,
                d,
                a,
                b,
            } => {
                let ab = [self.val(base, t, a), self.val(base, t, b)];
                self.set(base, d, half::cvt(conv, round, mode, sat, relu, ab));
            }
            Op::Shf {
                left,
                clamp,
                d,
                a,
                b,
                c,
            } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                self.set(base, d, alu::funnel_shift(left, clamp, a, b, c));
            }
            Op::Dot {
                pairs,
                hi,
                a_signed,
                b_signed,
                d,
                a,
                b,
                c,
            } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                let signs = (a_signed, b_signed);
                self.set(base, d, alu::dot(pairs, hi, signs, a, b, c));
            }
            Op::Simd {
                op,
                lanes,
                signs,
                sat,
                d,
                a,
                b,
            } => {
                let (a, b) = (self.val(base, t, a), self.val(base, t, b));
                self.set(base, d, alu::simd(op, lanes, signs, sat, a, b));
            }
            Op::Lop3 { d, a, b, c, lut } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                self.set(base, d, alu::lop3(a, b, c, lut));
            }
            Op::Fns { d, a, b, c } => {
                let [a, b, c] = self.vals3(base, t, [a, b, c]);
                self.set(base, d, alu::fns(a, b, c));
            }
            _ => unreachable!("step dispatches only intrinsics to step_intrinsic"),
        }
    }

    /// What a comparison's result becomes with `combine`'s predicate (`setp`/`set`'s `.and`,
    /// `.or`, `.xor`), read once: the result itself without one.
    #[inline(always)]
    fn combined(&self, base: usize, t: usize, combine: Option<Combine>) -> impl Fn(bool) -> bool {
        let with = combine.map(|c| (c.op, (self.val(base, t, c.c) != 0) ^ c.negate));
        move |r| match with {
            Some((op, cv)) => alu::combine(r, op, cv),
            None => r,
        }
    }

    /// Writes a `setp`'s predicates `p` and (when there is one) `q` from the results `rp` and
    /// `rq`, each combined with `combine`'s predicate first.
    #[inline(always)]
    fn set_predicates(
        &mut self,
        base: usize,
        t: usize,
        (p, q): (Reg, Option<Reg>),
        (rp, rq): (bool, bool),
        combine: Option<Combine>,
    ) {
        let combined = self.combined(base, t, combine);
        let (rp, rq) = (combined(rp), combined(rq));
        self.set(base, p, u64::from(rp));
        if let Some(q) = q {
            self.set(base, q, u64::from(rq));
        }
    }

    /// Comparisons (`setp`, `set`) and selection (`selp`).
    #[inline(always)]
    fn step_compare(&mut self, t: usize, base: usize, op: Op) {
        match op {
            Op::Setp {
                cmp,
                ty,
                ftz,
                p,
                q,
                a,
                b,
                combine,
            } => {
                let r = alu::compare(cmp, ty, ftz, self.val(base, t, a), self.val(base, t, b));
                self.set_predicates(base, t, (p, q), (r, !r), combine);
            }
            Op::Set {
                cmp,
                ty,
                ftz,
                dty,
                d,
                a,
                b,
                combine,
            } => {
                let r = alu::compare(cmp, ty, ftz, self.val(base, t, a), self.val(base, t, b));
                let r = self.combined(base, t, combine)(r);
                let v = match (dty.is_float(), r) {
                    (_, false) => 0,
                    (true, true) => u64::from(1f32.to_bits()),
                    (false, true) => alu::mask(dty.bits),
                };
                self.set(base, d, v);
            }
            Op::Selp { ty, d, a, b, c } => {
                let v = if self.val(base, t, c) != 0 {
                    self.val(base, t, a)
                } else {
                    self.val(base, t, b)
                };
                self.set(base, d, alu::moved(ty, v));
            }
            _ => unreachable!("step dispatches only comparisons to step_compare"),
        }
    }

    /// Moves, packing and conversions.
    #[inline(always)]
    fn step_move(&mut self, t: usize, base: usize, op: Op) {
        match op {
            Op::Mov { ty, d, a } => {
                let v = self.val(base, t, a);
                self.set(base, d, alu::moved(ty, v));
            }
            Op::Cvt {
                dst,
                src,
                round,
                mode,
                sat,
                d,
                a,
            } => {
                let v = alu::cvt(dst, src, round, mode, sat, self.val(base, t, a));
                self.set(base, d, v);
            }
            Op::Cvta {
                space,
                to_generic,
                d,
                a,
            } => {
                let v = self.val(base, t, a);
                let window = match space {
                    Space::Shared => SHARED_WINDOW,
                    Space::Local => LOCAL_WINDOW,
                    _ => 0,
                };
                let v = match (to_generic, window) {
                    (_, 0) => v,
                    (true, w) => w + (v & 0xffff_ffff),
                    (false, w) => v.wrapping_sub(w) & 0xffff_ffff,
                };
                self.set(base, d, v);
            }
            Op::Pack { bits, n, d, parts } => {
                let mut v = 0;
                for (k, p) in parts.iter().take(n as usize).enumerate() {
                    v |= (self.val(base, t, *p) & alu::mask(bits)) << (k as u32 * u32::from(bits));
                }
                self.set(base, d, v);
            }
            Op::Unpack { bits, n, d, a } => {
                let v = self.val(base, t, a);
                for (k, r) in d.iter().take(n as usize).enumerate() {
                    self.set(
                        base,
                        *r,
                        (v >> (k as u32 * u32::from(bits))) & alu::mask(bits),
                    );
                }
            }
            _ => unreachable!("step dispatches only moves and conversions to step_move"),
        }
    }

    /// Loads, stores and atomics.
    #[inline(always)]
    fn step_memory(&mut self, t: usize, base: usize, inst: &Inst) -> Result<(), BackendError> {
        match inst.op {
            Op::Ld { d, mem } => self.exec_ld(t, base, inst.line, d, mem)?,
            Op::St { s, mem } => self.exec_st(t, base, inst.line, s, mem)?,
            Op::Atom { op, d, b, c, mem } => {
                let at = self.address(base, mem.addr);
                let (b, c) = (self.val(base, t, b), self.val(base, t, c));
                // Not while races are recorded: the recorder takes the order accesses are
                // performed in as program order, and a deferred unlock would be "after" reads
                // that follow it.
                // Nor one that overtook a deferred load of its bytes (`exec/one_location.rs`).
                if self.ptx
                    && self.races.is_none()
                    && !self.touches_unperformed(t, base, mem)
                    && self.may_defer_rmw(t, mem, at)
                {
                    return self.defer_rmw(t, inst.line, d, op, mem, at, [b, c]);
                }
                let old = self.atomic(t, inst.line, op, mem, at, b, c)?;
                self.set(base, d, old);
            }
            _ => unreachable!("step dispatches only memory ops to step_memory"),
        }
        Ok(())
    }

    /// Warp and block collectives: the thread stops until its warp or barrier completes,
    /// except `activemask`, which reads the warp's state at once, and `bar.arrive`, which
    /// stops only until its warp has arrived at the barrier.
    #[inline(always)]
    fn step_warp(&mut self, t: usize, base: usize, inst: &Inst) -> Result<Flow, BackendError> {
        match inst.op {
            Op::BarRed { p, negate, bar, .. } => {
                let p = (self.val(base, t, p) != 0) ^ negate;
                self.threads[t].warp_args[0] = u64::from(p);
                self.threads[t].warp_args[3] = 0;
                self.barrier_operands(t, base, inst.line, bar)?;
                return Ok(Flow::Stop(QuantumEnd::Barrier));
            }
            Op::Bar { bar, wait } => {
                self.threads[t].warp_args[0] = 0;
                self.threads[t].warp_args[3] = if wait { 0 } else { BAR_ARRIVE_ONLY };
                self.barrier_operands(t, base, inst.line, bar)?;
                return Ok(Flow::Stop(QuantumEnd::Barrier));
            }
            Op::WarpSync { mask } => {
                self.threads[t].warp_args = [0, 0, 0, self.val(base, t, mask)];
                return Ok(Flow::Stop(QuantumEnd::Warp));
            }
            Op::Shfl { a, b, c, mask, .. } => {
                self.threads[t].warp_args = [
                    self.val(base, t, a),
                    self.val(base, t, b),
                    self.val(base, t, c),
                    self.val(base, t, mask),
                ];
                return Ok(Flow::Stop(QuantumEnd::Warp));
            }
            Op::Vote {
                a, negate, mask, ..
            } => {
                let p = (self.val(base, t, a) != 0) ^ negate;
                self.threads[t].warp_args = [u64::from(p), 0, 0, self.val(base, t, mask)];
                return Ok(Flow::Stop(QuantumEnd::Warp));
            }
            Op::Match { a, mask, .. } | Op::Redux { a, mask, .. } => {
                self.threads[t].warp_args = [self.val(base, t, a), 0, 0, self.val(base, t, mask)];
                return Ok(Flow::Stop(QuantumEnd::Warp));
            }
            Op::ActiveMask { d } => {
                let v = self.active_mask(t);
                self.set(base, d, u64::from(v));
            }
            _ => unreachable!("step dispatches only collectives to step_warp"),
        }
        Ok(Flow::Next)
    }

    /// Records which barrier thread `t` arrives at (`warp_args[1]`) and how many threads
    /// complete it (`warp_args[2]`, 0 for the whole CTA); an id outside 0..16 or a count that
    /// is not a multiple of the warp size faults.
    fn barrier_operands(
        &mut self,
        t: usize,
        base: usize,
        line: u32,
        bar: BarrierRef,
    ) -> Result<(), BackendError> {
        let id = self.val(base, t, bar.id);
        if id > 15 {
            return Err(self.fault(line, format_args!("barrier id {id} is not in 0..=15")));
        }
        let count = bar.count.map_or(0, |c| self.val(base, t, c));
        if bar.count.is_some() && count == 0 {
            return Err(self.fault(line, "a barrier thread count of 0"));
        }
        if !count.is_multiple_of(u64::from(WARP_SIZE)) {
            return Err(self.fault(
                line,
                format_args!("a barrier thread count of {count}, not a multiple of the warp size"),
            ));
        }
        self.threads[t].warp_args[1] = id;
        self.threads[t].warp_args[2] = count;
        Ok(())
    }

    /// Control flow, barriers and fences.
    #[inline(always)]
    fn step_control(&mut self, t: usize, inst: &Inst) -> Result<Flow, BackendError> {
        match inst.op {
            Op::Bra { target } => return Ok(Flow::Jump(target)),
            Op::Call { site } => return Ok(Flow::Call(site)),
            Op::Return => return Ok(Flow::Return),
            Op::Exit => return Ok(Flow::Stop(QuantumEnd::Exit)),
            Op::Fence { reach, sc } => self.fence(t, inst.line, reach, sc)?,
            Op::Nop => {}
            Op::Trap => return Err(self.fault(inst.line, self.trap_reason(inst.line))),
            Op::AssertFail => {
                return Err(self.fault(inst.line, "device-side assert failed (__assertfail)"))
            }
            _ => unreachable!("step dispatches only control ops to step_control"),
        }
        Ok(Flow::Next)
    }

    /// Copies the arguments of call `site` into the callee's frame; returns the callee's entry.
    fn call(&mut self, t: usize, site: u32, return_pc: usize) -> usize {
        let k = self.k;
        let cs = &k.calls[site as usize];
        let base = t * self.local_size;
        for &(dst, src, size) in &cs.args {
            let (dst, src) = (base + dst as usize, base + src as usize);
            self.local.copy_within(src..src + size as usize, dst);
        }
        self.threads[t].stack.push((return_pc as u32, site));
        cs.target as usize
    }

    /// Returns from a device function: copies the result back, gives the return pc (`None` when
    /// no call is in progress, i.e. `ret` of the kernel itself).
    fn ret(&mut self, t: usize) -> Option<usize> {
        let (to, site) = self.threads[t].stack.pop()?;
        if let Some((dst, src, size)) = self.k.calls[site as usize].ret {
            let base = t * self.local_size;
            let (dst, src) = (base + dst as usize, base + src as usize);
            self.local.copy_within(src..src + size as usize, dst);
        }
        Some(to as usize)
    }

    fn active_mask(&self, t: usize) -> u32 {
        let th = &self.threads[t];
        let first = t - (th.lin % 32) as usize;
        let mut m = 0;
        for l in 0..32 {
            let u = first + l;
            if u < self.threads.len()
                && self.threads[u].block == th.block
                && self.threads[u].state != super::sched::State::Exited
            {
                m |= 1 << l;
            }
        }
        m
    }

    /// The bytes from generic address `addr` of thread `t` to the end of its allocation
    /// (global) or of the block's shared or the thread's local memory: what `printf` reads its
    /// arguments and strings from.
    pub(crate) fn generic_bytes(&self, t: usize, addr: u64) -> Result<&[u8], MemFault> {
        let (region, at) = resolve(Space::Generic, addr);
        let (memory, size, index) = match region {
            Region::Shared => (
                &self.shared,
                self.shared_size,
                self.threads[t].block as usize,
            ),
            Region::Local => (&self.local, self.local_size, t),
            _ => return self.mem.bytes_from(at),
        };
        let at = usize::try_from(at)
            .ok()
            .filter(|&at| at < size)
            .ok_or(MemFault::Unmapped)?;
        Ok(&memory[index * size + at..(index + 1) * size])
    }

    #[inline]
    fn address(&self, base: usize, addr: Addr) -> u64 {
        let b = addr.base.map_or(0, |r| self.regs[base + r as usize]);
        b.wrapping_add(addr.offset as u64)
    }

    /// The first address of a load or store and the size of one element; a vector access must
    /// be aligned to its whole size.
    fn vector_start(
        &self,
        base: usize,
        line: u32,
        access: Access,
        mem: MemRef,
    ) -> Result<(u64, u64), BackendError> {
        let at = self.address(base, mem.addr);
        let size = mem.size();
        let bytes = size * u64::from(mem.n);
        if mem.n > 1 && !at.is_multiple_of(bytes) {
            return Err(self.mem_fault(line, access, "vector", at, bytes, MemFault::Misaligned));
        }
        Ok((at, size))
    }

    /// `ld`: each element into its register (sign-extended for signed types); a plain global
    /// load under the PTX model may be deferred instead.
    fn exec_ld(
        &mut self,
        t: usize,
        base: usize,
        line: u32,
        d: [Reg; 4],
        mem: MemRef,
    ) -> Result<(), BackendError> {
        let (at, size) = self.vector_start(base, line, Access::Load, mem)?;
        let MemRef {
            space, ty, order, ..
        } = mem;
        // A load queued behind a deferred load of its bytes is always deferred.
        if mem.n == 1
            && self.ptx
            && (self.must_defer_load(t, base, mem) || self.may_defer(t, space, at))
        {
            self.check_global(line, Access::Load, at, size)?;
            // An acquire load that later accesses overtake must not synchronise with what it
            // reads; it still ends an acquire pattern begun by an earlier strong read, so what
            // that read collected is taken now, before anything after it.
            let restricted = match self.orders_others(t, order) {
                true => match self.restriction(t, at, size, order, None) {
                    Some(r) => {
                        self.model.acquire_pattern(self.model_access(t, order));
                        Some(r)
                    }
                    None => return self.exec_ld_now(t, base, line, d, mem, at, size),
                },
                false => None,
            };
            let race_pos = self.races.as_mut().map_or(0, |r| r.reserve(t));
            self.push_deferred(
                t,
                Deferred {
                    d: d[0],
                    addr: at,
                    ty,
                    line,
                    order,
                    restricted,
                    rmw: None,
                    reserved: None,
                    race_pos,
                    before_own: None,
                },
            );
            return Ok(());
        }
        self.exec_ld_now(t, base, line, d, mem, at, size)
    }

    /// `ld` performed when it executes.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn exec_ld_now(
        &mut self,
        t: usize,
        base: usize,
        line: u32,
        d: [Reg; 4],
        mem: MemRef,
        at: u64,
        size: u64,
    ) -> Result<(), BackendError> {
        let MemRef {
            space, ty, order, ..
        } = mem;
        for (k, r) in d.iter().take(mem.n as usize).enumerate() {
            let v = self.load(
                t,
                line,
                space,
                at.wrapping_add(k as u64 * size),
                size,
                order,
            )?;
            self.set(base, *r, alu::extend(ty, v));
        }
        Ok(())
    }

    /// Whether an `atom` may be deferred: a global one on the dice, and, if it releases or
    /// acquires at a scope where it may synchronise, only as an overtaken RMW (see
    /// `ptx_model/overtaken.rs`) with a message it may read that way.
    fn may_defer_rmw(&mut self, t: usize, mem: MemRef, at: u64) -> bool {
        if !self.orders_others(t, mem.order) {
            return self.may_defer(t, mem.space, at);
        }
        let a = self.model_access(t, mem.order);
        self.may_defer(t, mem.space, at) && self.model.rmw_floor(a, at, mem.size()).is_some()
    }

    /// Defers an `atom`: later accesses that need neither its register nor its address
    /// overtake it, and it is performed whole when its turn comes
    /// ([`Machine::resolve_deferred`]), so it stays atomic (load buffering through
    /// read-modify-writes). One that releases or acquires at a scope where it may synchronise
    /// is overtaken from the start: it acquires what its thread collected now, reserves its
    /// write and reads only what makes no synchronisation (see `ptx_model/overtaken.rs`).
    #[allow(clippy::too_many_arguments)]
    fn defer_rmw(
        &mut self,
        t: usize,
        line: u32,
        d: Reg,
        op: AtomOp,
        mem: MemRef,
        at: u64,
        [b, c]: [u64; 2],
    ) -> Result<(), BackendError> {
        let size = mem.size();
        self.check_global(line, Access::Atomic, at, size)?;
        // Its floor comes before what it acquires: an acquire orders what follows it.
        let reserved = match self.orders_others(t, mem.order) {
            true => {
                // [`Machine::may_defer_rmw`] found a floor just now, in the same state.
                let Some(reserved) = self.reserve_rmw(t, mem, at) else {
                    return Err(self.fault(line, "internal error: no floor for a deferred atomic"));
                };
                self.model.acquire_pattern(self.model_access(t, mem.order));
                Some(reserved)
            }
            false => None,
        };
        self.push_deferred(
            t,
            Deferred {
                d,
                addr: at,
                ty: mem.ty,
                line,
                order: mem.order,
                restricted: None,
                rmw: Some((op, mem, b, c)),
                reserved,
                race_pos: 0,
                before_own: None,
            },
        );
        Ok(())
    }

    /// Queues `pending` behind thread `t`'s deferred accesses (the caller checked there is room:
    /// [`Machine::may_defer`]).
    fn push_deferred(&mut self, t: usize, pending: Deferred) {
        let th = &mut self.threads[t];
        th.pending[th.deferred as usize] = pending;
        th.deferred += 1;
    }

    /// Faults an access of `size` bytes at global address `at` that falls outside every
    /// allocation or is misaligned.
    fn check_global(
        &self,
        line: u32,
        access: Access,
        at: u64,
        size: u64,
    ) -> Result<(), BackendError> {
        self.mem
            .check(at, size)
            .map_err(|why| self.mem_fault(line, access, "global", at, size, why))
    }

    /// `st`: each element, truncated to the element size.
    fn exec_st(
        &mut self,
        t: usize,
        base: usize,
        line: u32,
        s: [Src; 4],
        mem: MemRef,
    ) -> Result<(), BackendError> {
        let (at, size) = self.vector_start(base, line, Access::Store, mem)?;
        for (k, src) in s.iter().take(mem.n as usize).enumerate() {
            let v = self.val(base, t, *src) & alu::mask(size as u8 * 8);
            let at = at.wrapping_add(k as u64 * size);
            self.store(t, line, mem.space, at, size, v, mem.order)?;
        }
        Ok(())
    }

    /// A byte range of a per-block or per-thread memory, checked.
    fn local_range(
        &self,
        line: u32,
        access: Access,
        target: Region,
        t: usize,
        off: u64,
        size: u64,
    ) -> Result<usize, BackendError> {
        let (region, region_size, name) = match target {
            Region::Shared => (self.threads[t].block as usize, self.shared_size, "shared"),
            Region::Local => (t, self.local_size, "local"),
            _ => (0, self.params.len(), "param"),
        };
        let why = if !off.is_multiple_of(size) {
            Some(MemFault::Misaligned)
        } else if off
            .checked_add(size)
            .is_none_or(|end| end > region_size as u64)
        {
            Some(MemFault::Unmapped)
        } else {
            None
        };
        match why {
            Some(why) => Err(self.mem_fault(line, access, name, off, size, why)),
            None => Ok(region * region_size + off as usize),
        }
    }

    fn load(
        &mut self,
        t: usize,
        line: u32,
        space: Space,
        addr: u64,
        size: u64,
        order: Order,
    ) -> Result<u64, BackendError> {
        let (target, a) = resolve(space, addr);
        let bytes = match target {
            Region::Global => return self.load_global(t, line, a, size, order),
            Region::Const => {
                return self
                    .mem
                    .read(a, size)
                    .map_err(|why| self.mem_fault(line, Access::Load, "const", a, size, why))
            }
            Region::Shared => {
                let at = self.local_range(line, Access::Load, target, t, a, size)?;
                if self.ptx {
                    return self.load_shared(t, line, at, size, order);
                }
                &self.shared[at..at + size as usize]
            }
            Region::Local => {
                let at = self.local_range(line, Access::Load, target, t, a, size)?;
                &self.local[at..at + size as usize]
            }
            Region::Param => {
                let at = self.local_range(line, Access::Load, target, t, a, size)?;
                &self.params[at..at + size as usize]
            }
        };
        Ok(super::memory::read_le(bytes))
    }

    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        t: usize,
        line: u32,
        space: Space,
        addr: u64,
        size: u64,
        value: u64,
        order: Order,
    ) -> Result<(), BackendError> {
        let (target, a) = resolve(space, addr);
        let bytes = match target {
            Region::Global | Region::Const => {
                return self.store_global(t, line, a, size, value, order)
            }
            Region::Shared => {
                let at = self.local_range(line, Access::Store, target, t, a, size)?;
                if self.ptx {
                    return self.store_shared(t, line, at, size, value, order);
                }
                &mut self.shared[at..at + size as usize]
            }
            Region::Local => {
                let at = self.local_range(line, Access::Store, target, t, a, size)?;
                &mut self.local[at..at + size as usize]
            }
            Region::Param => return Err(self.fault(line, "store to the parameter space")),
        };
        super::memory::write_le(bytes, value);
        Ok(())
    }

    /// A shared-memory load under the PTX model, at byte `at` of the blocks' shared memory
    /// (see [`shared_location`]). Never deferred: only global loads are.
    fn load_shared(
        &mut self,
        t: usize,
        line: u32,
        at: usize,
        size: u64,
        order: Order,
    ) -> Result<u64, BackendError> {
        let in_memory = super::memory::read_le(&self.shared[at..at + size as usize]);
        let addr = shared_location(at);
        self.model_load(t, line, Bytes { addr, size }, in_memory, order)
    }

    /// A shared-memory store under the PTX model (see [`Machine::load_shared`]).
    fn store_shared(
        &mut self,
        t: usize,
        line: u32,
        at: usize,
        size: u64,
        value: u64,
        order: Order,
    ) -> Result<(), BackendError> {
        let bytes = at..at + size as usize;
        let old = super::memory::read_le(&self.shared[bytes.clone()]);
        let addr = shared_location(at);
        if self.model_store(t, line, Bytes { addr, size }, old, value, order)? {
            super::memory::write_le(&mut self.shared[bytes], value);
        }
        Ok(())
    }

    /// A load under the PTX model of `at` (a global address, or a shared-memory location),
    /// where memory holds `in_memory`: the value it reads.
    fn model_load(
        &mut self,
        t: usize,
        line: u32,
        at: Bytes,
        in_memory: u64,
        order: Order,
    ) -> Result<u64, BackendError> {
        let Bytes { addr, size } = at;
        let a = self.model_access(t, order);
        if order.acquires {
            let what = Syncing::Acquire {
                access: a,
                addr,
                size,
            };
            self.settle(t, what)?;
        }
        let pick = self.rng.random::<u32>();
        let v = self.model.load(a, addr, size, in_memory, pick, self.older);
        if let Some(races) = &mut self.races {
            let pos = self.deferred_race_pos.take();
            races.load(t, pos, line, at, order, self.model.last_read);
        }
        Ok(v)
    }

    /// A store of `value` under the PTX model to `at` (a global address, or a shared-memory
    /// location), where memory holds `old`: whether memory must hold `value` afterwards.
    fn model_store(
        &mut self,
        t: usize,
        line: u32,
        at: Bytes,
        old: u64,
        value: u64,
        order: Order,
    ) -> Result<bool, BackendError> {
        let Bytes { addr, size } = at;
        let a = self.model_access(t, order);
        self.settle(
            t,
            Syncing::Write {
                access: a,
                addr,
                size,
            },
        )?;
        let place = placement(self.rng, self.older);
        let newest = self.model.store(a, addr, size, old, value, place);
        if let Some(races) = &mut self.races {
            let ts = ptx_model::tracked(size).then(|| self.model.clock());
            races.store_at(t, self.deferred_race_pos.take(), line, at, order, ts);
            if let Some(kept) = self.model.kept(addr, size) {
                races.keep_written(addr, &kept);
            }
        }
        Ok(newest)
    }

    fn load_global(
        &mut self,
        t: usize,
        line: u32,
        addr: u64,
        size: u64,
        order: Order,
    ) -> Result<u64, BackendError> {
        let in_memory = self
            .mem
            .read(addr, size)
            .map_err(|why| self.mem_fault(line, Access::Load, "global", addr, size, why))?;
        if self.ptx {
            return self.model_load(t, line, Bytes { addr, size }, in_memory, order);
        }
        if !self.weak {
            return Ok(in_memory);
        }
        let th = &self.threads[t];
        if !th.buffer.is_empty() && th.buffer.overlaps(addr, size) {
            return Ok(th.buffer.forward(addr, size, in_memory));
        }
        if !self.stale {
            return Ok(in_memory);
        }
        let b = th.block as usize;
        if order.acquire() {
            self.blocks[b].cache.clear();
        } else if order.may_be_stale() {
            if let Some(old) = self.blocks[b].cache.lookup(addr, size) {
                if old != in_memory && self.rng.random_bool(self.cfg.stale_probability) {
                    return Ok(old);
                }
            }
        }
        let victim = if self.blocks[b].cache.is_full() {
            self.rng.random_range(0..usize::MAX)
        } else {
            0
        };
        self.blocks[b].cache.observe(addr, size, in_memory, victim);
        Ok(in_memory)
    }

    fn store_global(
        &mut self,
        t: usize,
        line: u32,
        addr: u64,
        size: u64,
        value: u64,
        order: Order,
    ) -> Result<(), BackendError> {
        self.check_global(line, Access::Store, addr, size)?;
        if self.ptx {
            let old = self.mem.read(addr, size).unwrap_or(0);
            if self.model_store(t, line, Bytes { addr, size }, old, value, order)? {
                let _ = self.mem.write(addr, size, value);
            }
            return Ok(());
        }
        if !self.weak {
            let _ = self.mem.write(addr, size, value);
            return Ok(());
        }
        if order.release() {
            self.drain_all(t);
            let _ = self.mem.write(addr, size, value);
            self.evict(t, addr, size);
            return Ok(());
        }
        self.threads[t].buffer.push(Pending { addr, size, value });
        let len = self.threads[t].buffer.len();
        if len > self.cfg.store_buffer_capacity.max(1) {
            let pick = self.rng.random_range(0..len);
            self.drain_one(t, pick);
        }
        Ok(())
    }

    fn evict(&mut self, t: usize, addr: u64, size: u64) {
        if self.stale {
            let b = self.threads[t].block as usize;
            self.blocks[b].cache.evict(addr, size);
        }
    }

    /// `atom` and `red` at `addr` (already computed from `mem.addr`): returns the old value.
    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &mut self,
        t: usize,
        line: u32,
        op: AtomOp,
        mem: MemRef,
        addr: u64,
        b: u64,
        c: u64,
    ) -> Result<u64, BackendError> {
        let MemRef {
            space, ty, order, ..
        } = mem;
        let size = mem.size();
        let (target, a) = resolve(space, addr);
        match target {
            Region::Global | Region::Const => {}
            Region::Shared if self.ptx => {
                let at = self.local_range(line, Access::Atomic, target, t, a, size)?;
                return self.atomic_shared(t, line, op, mem, at, [b, c]);
            }
            Region::Shared | Region::Local => {
                let at = self.local_range(line, Access::Atomic, target, t, a, size)?;
                let region = if target == Region::Shared {
                    &mut self.shared
                } else {
                    &mut self.local
                };
                let bytes = &mut region[at..at + size as usize];
                let old = super::memory::read_le(bytes);
                super::memory::write_le(bytes, alu::atom(op, ty, old, b, c));
                return Ok(old);
            }
            Region::Param => return Err(self.fault(line, "atomic on the parameter space")),
        }
        self.check_global(line, Access::Atomic, a, size)?;
        if self.weak {
            if order.release() {
                self.drain_all(t);
            } else {
                let th = &mut self.threads[t];
                let cache = &mut self.blocks[th.block as usize].cache;
                let stale = self.stale;
                th.buffer.drain_overlapping(a, size, self.mem, |e| {
                    if stale {
                        cache.evict(e.addr, e.size);
                    }
                });
            }
            if order.acquire() && self.stale {
                let blk = self.threads[t].block as usize;
                self.blocks[blk].cache.clear();
            }
        }
        if self.ptx {
            self.settle_rmw(t, order, Bytes { addr: a, size })?;
            let in_memory = self.mem.read(a, size).unwrap_or(0);
            let (old, memory_gets) = self.ptx_atomic(t, line, op, mem, a, in_memory, b, c);
            if let Some(new) = memory_gets {
                let _ = self.mem.write(a, size, new);
            }
            return Ok(old);
        }
        let in_memory = self.mem.read(a, size).unwrap_or(0);
        let new = alu::atom(op, ty, in_memory, b, c);
        let _ = self.mem.write(a, size, new);
        self.evict(t, a, size);
        Ok(in_memory)
    }

    /// A shared-memory `atom` under the PTX model, at byte `at` of the blocks' shared memory
    /// (see [`shared_location`]): returns the old value.
    fn atomic_shared(
        &mut self,
        t: usize,
        line: u32,
        op: AtomOp,
        mem: MemRef,
        at: usize,
        [b, c]: [u64; 2],
    ) -> Result<u64, BackendError> {
        let size = mem.size();
        let bytes = at..at + size as usize;
        let addr = shared_location(at);
        self.settle_rmw(t, mem.order, Bytes { addr, size })?;
        let in_memory = super::memory::read_le(&self.shared[bytes.clone()]);
        let (old, memory_gets) = self.ptx_atomic(t, line, op, mem, addr, in_memory, b, c);
        if let Some(new) = memory_gets {
            super::memory::write_le(&mut self.shared[bytes], new);
        }
        Ok(old)
    }

    /// What an `atom` at `at` waits for under the PTX model before it reads memory: as a write,
    /// and (with acquire semantics) as an acquire (see [`Machine::settle`]).
    fn settle_rmw(&mut self, t: usize, order: Order, at: Bytes) -> Result<(), BackendError> {
        let (access, Bytes { addr, size }) = (self.model_access(t, order), at);
        self.settle(t, Syncing::Write { access, addr, size })?;
        if order.acquires {
            self.settle(t, Syncing::Acquire { access, addr, size })?;
        }
        Ok(())
    }

    /// An atomic under the PTX model: it reads the newest value or, with the chance of reading
    /// an older one, a message the model lets it read instead (an RMW that is not morally strong
    /// with a newer write may read before it: a lost update). The dice are thrown only when
    /// there is a choice, so RMWs that must read the newest draw nothing. Returns the value
    /// read, and what memory must hold at `addr` afterwards when that changes.
    #[allow(clippy::too_many_arguments)]
    fn ptx_atomic(
        &mut self,
        t: usize,
        line: u32,
        op: AtomOp,
        mem: MemRef,
        addr: u64,
        in_memory: u64,
        b: u64,
        c: u64,
    ) -> (u64, Option<u64>) {
        let size = mem.size();
        let access = self.model_access(t, mem.order);
        let written = |old| {
            let new = alu::atom(op, mem.ty, old, b, c);
            (op != AtomOp::Cas || old != new).then_some(new)
        };
        let choices = self.model.rmw_choices(access, addr, size, written);
        let back = if !choices.is_empty() && self.rng.random::<u32>() < self.older {
            choices[self.rng.random_range(0..choices.len())]
        } else {
            0
        };
        let old = self.model.rmw_value(addr, size, back, in_memory);
        let wrote = written(old);
        let place = placement(self.rng, self.older);
        let newest = self
            .model
            .atomic(access, addr, size, back, in_memory, wrote, place);
        let writes = wrote.is_some();
        if let Some(races) = &mut self.races {
            let ts = (writes && ptx_model::tracked(size)).then(|| self.model.clock());
            let (at, read) = (Bytes { addr, size }, self.model.last_read);
            races.atomic(t, line, at, mem.order, read, writes, ts);
            if let Some(kept) = self.model.kept(addr, size).filter(|_| writes) {
                races.keep_written(addr, &kept);
            }
        }
        (old, wrote.filter(|_| newest))
    }

    /// How an access of thread `t` with `order` takes part in the PTX model.
    fn model_access(&self, t: usize, order: Order) -> ModelAccess {
        ModelAccess {
            thread: t as u32,
            block: self.threads[t].block,
            reach: order.reach,
            acquires: order.acquires,
            releases: order.releases,
            reduction: order.reduction,
        }
    }

    /// A fence under the model in force.
    fn fence(&mut self, t: usize, line: u32, reach: Reach, sc: bool) -> Result<(), BackendError> {
        if self.ptx {
            let block = self.threads[t].block;
            self.settle(t, Syncing::Fence { block, reach, sc })?;
            if sc {
                self.model.fence_sc(t as u32, block, reach);
            } else {
                self.model.fence_acq_rel(t as u32, reach);
            }
            if let Some(races) = &mut self.races {
                races.fence(t, reach, sc, line);
            }
        } else if self.weak && (reach >= Reach::Gpu || self.cfg.cta_drains) {
            self.drain_all(t);
            if self.stale && reach >= Reach::Gpu {
                let b = self.threads[t].block as usize;
                self.blocks[b].cache.clear();
            }
        }
        Ok(())
    }

    /// Before thread `t` does `what` (an acquire, a fence, a write): performs the overtaken
    /// read-modify-write of another thread that must come first (see
    /// [`PtxMemory::must_perform_first`](super::ptx_model::PtxMemory::must_perform_first)),
    /// so that nobody synchronises with a release that overtook it before its write exists.
    #[inline(always)]
    fn settle(&mut self, t: usize, what: Syncing) -> Result<(), BackendError> {
        if !self.model.has_overtaken() {
            return Ok(());
        }
        if let Some(o) = self.model.must_perform_first(t as u32, what) {
            self.resolve_deferred(o as usize)?;
            if self.model.has_overtaken() {
                // Only the overtaken RMW's own thread performs deferred accesses while it
                // waits, and it performs it: unreachable.
                return Err(self.fault(0, "internal error: an overtaken atomic was not performed"));
            }
        }
        Ok(())
    }

    /// Reserves the write of thread `t`'s `atom` at `at` (see `ptx_model/overtaken.rs`), if it
    /// may be overtaken now.
    fn reserve_rmw(&mut self, t: usize, mem: MemRef, at: u64) -> Option<Reserved> {
        let a = self.model_access(t, mem.order);
        let floor = self.model.rmw_floor(a, at, mem.size())?;
        let seq = self.model.reserve(a, at, mem.size());
        Some(Reserved { floor, seq })
    }

    /// Whether an access of thread `t` with `order` orders other threads' view of it (PTX
    /// model): it acquires or releases at a scope where another thread may synchronise.
    fn orders_others(&self, t: usize, order: Order) -> bool {
        (order.acquires || order.releases) && !self.alone_in_scope(t, order.reach)
    }

    /// Whether an ordering of thread `t` at `reach` can synchronise with no other thread (see
    /// [`PtxMemory::synchronises_with_nobody`](super::ptx_model::PtxMemory::synchronises_with_nobody)).
    fn alone_in_scope(&self, t: usize, reach: Reach) -> bool {
        let block = self.threads[t].block;
        let live = self.blocks[block as usize].live;
        self.model
            .synchronises_with_nobody(t as u32, block, live, reach)
    }

    /// Whether a load may be deferred: a global load, with room left, on the dice. A deferred
    /// load is performed later (see [`Machine::hazard`]), so later independent accesses of the
    /// thread overtake it (load-load and load-store reordering).
    fn may_defer(&mut self, t: usize, space: Space, at: u64) -> bool {
        self.threads[t].deferred < super::sched::MAX_DEFERRED
            && resolve(space, at).0 == Region::Global
            && self.rng.sample(self.defer_coin)
    }

    /// What a deferred load of thread `t` may read once something it must not synchronise
    /// with, or (with `mark`) a release, overtakes it: a value it could read now with no
    /// effect. `None` when it has none (it must then be performed first).
    fn restriction(
        &mut self,
        t: usize,
        addr: u64,
        size: u64,
        order: Order,
        mark: Option<Mark>,
    ) -> Option<Restriction> {
        let fallback = self.effectless_value(t, addr, size, order)?;
        Some(Restriction {
            fallback,
            mark,
            may_observe: true,
        })
    }

    /// A value a load of thread `t` may read now with no effect on the model; `None` when it
    /// has none.
    fn effectless_value(&mut self, t: usize, addr: u64, size: u64, order: Order) -> Option<u64> {
        let newest = self.mem.read(addr, size).ok()?;
        let pick = self.rng.random::<u32>();
        let a = self.model_access(t, order);
        self.model.effectless_value(a, addr, size, newest, pick)
    }

    /// A fence or release of thread `t` about to overtake its deferred loads and RMWs: on the
    /// dice, restricts the loads (each keeps the first release that overtook it), reserves the
    /// write of an RMW (see `ptx_model/overtaken.rs`) and returns true; false when they must be
    /// performed first (the dice, a load with nothing it may still read, an RMW that may not be
    /// overtaken now). A `fence` overtaking a load keeps it from ever observing (the load and
    /// the fence would form an acquire pattern).
    fn overtake_deferred(&mut self, t: usize, fence: bool) -> bool {
        if !self.rng.sample(self.half_coin) {
            return false;
        }
        let n = self.threads[t].deferred as usize;
        let mut restrictions = [None; super::sched::MAX_DEFERRED as usize];
        let mut unreserved = None;
        for (i, slot) in restrictions.iter_mut().enumerate().take(n) {
            let p = self.threads[t].pending[i];
            let size = u64::from(p.ty.bytes());
            if let Some((_, mem, _, _)) = p.rmw {
                if p.reserved.is_none() {
                    let a = self.model_access(t, mem.order);
                    if unreserved.is_some() || self.model.rmw_floor(a, p.addr, size).is_none() {
                        return false;
                    }
                    unreserved = Some((i, mem));
                }
                continue;
            }
            *slot = match (p.restricted, p.before_own) {
                (Some(r), _) => Some(r),
                // Its own store took effect already: what it could read now may be that store.
                (None, Some(b)) => Some(Restriction {
                    fallback: b.fallback,
                    mark: None,
                    may_observe: true,
                }),
                (None, None) => match self.restriction(t, p.addr, size, p.order, None) {
                    Some(r) => Some(r),
                    None => return false,
                },
            };
        }
        if let Some((i, mem)) = unreserved {
            let at = self.threads[t].pending[i].addr;
            self.threads[t].pending[i].reserved = self.reserve_rmw(t, mem, at);
        }
        let mark = self.model.mark(t as u32, self.threads[t].block);
        for (i, r) in restrictions.into_iter().enumerate().take(n) {
            self.threads[t].pending[i].restricted = r.map(|r| Restriction {
                mark: r.mark.or(Some(mark)),
                may_observe: r.may_observe && !fence,
                ..r
            });
        }
        true
    }

    /// Performs the thread's deferred loads, oldest first.
    pub fn resolve_deferred(&mut self, t: usize) -> Result<(), BackendError> {
        let n = std::mem::take(&mut self.threads[t].deferred) as usize;
        let base = t * self.nregs;
        for i in 0..n {
            let p = self.threads[t].pending[i];
            let size = u64::from(p.ty.bytes());
            if let Some((op, mem, b, c)) = p.rmw {
                let old = match p.reserved {
                    Some(r) => self.perform_overtaken(t, (op, mem, p.addr, b, c), r),
                    None => self.atomic(t, p.line, op, mem, p.addr, b, c)?,
                };
                self.set(base, p.d, old);
                continue;
            }
            self.deferred_race_pos = (p.race_pos != 0).then_some(p.race_pos);
            let v = match (p.restricted, p.before_own) {
                (Some(r), b) => self.restricted_load(t, &p, r, b.map(|b| b.floor)),
                (None, Some(b)) => self.load_before_own(t, &p, b),
                (None, None) => self.load_global(t, p.line, p.addr, size, p.order)?,
            };
            self.set(base, p.d, alu::extend(p.ty, v));
        }
        self.perform_held(t, base)
    }

    /// An overtaken RMW of thread `t` performed now: it reads the newest message it may read
    /// that way or, with the chance of reading an older one, an older such one, and writes with
    /// its reserved number (see `ptx_model/overtaken.rs`). Returns the value read.
    fn perform_overtaken(&mut self, t: usize, rmw: OvertakenAtom, r: Reserved) -> u64 {
        let (op, mem, addr, b, c) = rmw;
        let size = mem.size();
        let in_memory = self.mem.read(addr, size).unwrap_or(0);
        let access = self.model_access(t, mem.order);
        let choices = self.model.overtaken_choices(access, addr, size, r.floor);
        let back = match choices.len() {
            0 => 0,
            n if n > 1 && self.rng.random::<u32>() < self.older => {
                choices[self.rng.random_range(0..n - 1)]
            }
            n => choices[n - 1],
        };
        let old = self.model.rmw_value(addr, size, back, in_memory);
        let new = alu::atom(op, mem.ty, old, b, c);
        let writes = !(op == AtomOp::Cas && old == new);
        let place = placement(self.rng, self.older);
        let new_value = writes.then_some(new);
        if self
            .model
            .perform_overtaken(access, addr, size, back, in_memory, new_value, r.seq, place)
        {
            let _ = self.mem.write(addr, size, new);
        }
        old
    }

    /// A restricted deferred load performed now: what it may read with no effect and not
    /// caused by the release that overtook it (from `floor` where its own later access of
    /// the same bytes took effect first), else its fallback.
    fn restricted_load(
        &mut self,
        t: usize,
        p: &Deferred,
        r: Restriction,
        floor: Option<u64>,
    ) -> u64 {
        let size = u64::from(p.ty.bytes());
        let newest = self.mem.read(p.addr, size).unwrap_or(0);
        let pick = self.rng.random::<u32>();
        let a = self.model_access(t, p.order);
        let limits = ptx_model::ReadLimits {
            mark: r.mark,
            observing: r.may_observe,
            floor,
        };
        let v = self
            .model
            .restricted_load(a, (p.addr, size), newest, (pick, self.older), limits);
        self.record_deferred_load(t, p);
        v.unwrap_or(r.fallback)
    }

    /// Records deferred load `p` of thread `t`, just performed, while races are recorded.
    fn record_deferred_load(&mut self, t: usize, p: &Deferred) {
        if let Some(races) = &mut self.races {
            let pos = self.deferred_race_pos.take();
            let at = Bytes {
                addr: p.addr,
                size: u64::from(p.ty.bytes()),
            };
            races.load(t, pos, p.line, at, p.order, self.model.last_read);
        }
    }

    /// Whether `inst` must wait for the thread's deferred loads: it uses or overwrites their
    /// registers or touches their addresses (`Wait`, or `Hold` for arithmetic and stores that
    /// may be held back behind them, see `exec/held.rs`), is a fence, a release store, an
    /// acquire load or an RMW that releases or acquires (`Boundary`: it may overtake them if
    /// they become restricted and no store is held), or is anything else but plain
    /// arithmetic, a branch, or a relaxed or weak load or store (`Wait`).
    fn hazard(&self, t: usize, base: usize, inst: &Inst) -> Hazard {
        match self.needs_deferred(t, base, inst) {
            true if self.may_overtake_own_loads(t, base, inst) => Hazard::OwnStore,
            true if self.may_queue_behind_loads(t, base, inst) => Hazard::QueueLoad,
            true => self.hold_or_wait(t, base, inst),
            false => match inst.op {
                Op::Fence { reach, .. } if !self.alone_in_scope(t, reach) => Hazard::Boundary,
                Op::Ld { mem, .. } | Op::St { mem, .. } if self.orders_others(t, mem.order) => {
                    Hazard::Boundary
                }
                Op::Fence { .. } | Op::Ld { .. } | Op::St { .. } => Hazard::None,
                Op::Atom { mem, .. } if !self.orders_others(t, mem.order) => Hazard::None,
                Op::Atom { .. } => Hazard::Boundary,
                Op::Mov { .. }
                | Op::Unary { .. }
                | Op::Cvt { .. }
                | Op::Cvta { .. }
                | Op::Int { .. }
                | Op::Float { .. }
                | Op::MulWide { .. }
                | Op::Mad { .. }
                | Op::Fma { .. }
                | Op::Selp { .. }
                | Op::Setp { .. }
                | Op::Half { .. }
                | Op::HalfSetp { .. }
                | Op::HalfSet { .. }
                | Op::HalfCvt { .. }
                | Op::Shf { .. }
                | Op::Dot { .. }
                | Op::Lop3 { .. }
                | Op::Simd { .. }
                | Op::Fns { .. }
                | Op::Bra { .. }
                | Op::Nop => Hazard::None,
                _ => Hazard::Wait,
            },
        }
    }

    /// Whether `inst` uses or overwrites a deferred load's register (or one held arithmetic
    /// writes), overwrites a register held arithmetic reads, or touches the address of a
    /// deferred load or held store.
    fn needs_deferred(&self, t: usize, base: usize, inst: &Inst) -> bool {
        let reg = |r: Reg| self.overwrites(t, r);
        let src = |s: Src| matches!(s, Src::Reg(r) if self.unknown(t, r));
        if inst.guard != NO_GUARD && self.unknown(t, inst.guard & !GUARD_NEGATED) {
            return true;
        }
        let touches = |mem: MemRef| self.touches_unperformed(t, base, mem);
        match inst.op {
            Op::Mov { d, a, .. } | Op::Unary { d, a, .. } | Op::Cvt { d, a, .. } => {
                reg(d) || src(a)
            }
            Op::Cvta { d, a, .. } => reg(d) || src(a),
            Op::Int { d, a, b, .. } | Op::Float { d, a, b, .. } | Op::MulWide { d, a, b, .. } => {
                reg(d) || src(a) || src(b)
            }
            Op::Mad { d, a, b, c, .. }
            | Op::Fma { d, a, b, c, .. }
            | Op::Selp { d, a, b, c, .. }
            | Op::Half { d, a, b, c, .. }
            | Op::Shf { d, a, b, c, .. }
            | Op::Dot { d, a, b, c, .. }
            | Op::Lop3 { d, a, b, c, .. }
            | Op::Fns { d, a, b, c, .. } => reg(d) || src(a) || src(b) || src(c),
            Op::HalfCvt { d, a, b, .. } | Op::Simd { d, a, b, .. } => reg(d) || src(a) || src(b),
            Op::HalfSet {
                d, a, b, combine, ..
            } => reg(d) || src(a) || src(b) || combine.is_some_and(|c| src(c.c)),
            Op::Setp {
                p,
                q,
                a,
                b,
                combine,
                ..
            }
            | Op::HalfSetp {
                p,
                q,
                a,
                b,
                combine,
                ..
            } => {
                reg(p)
                    || q.is_some_and(reg)
                    || src(a)
                    || src(b)
                    || combine.is_some_and(|c| src(c.c))
            }
            Op::Ld { d, mem } => d[..mem.n as usize].iter().any(|r| reg(*r)) || touches(mem),
            Op::St { s, mem } => s[..mem.n as usize].iter().any(|s| src(*s)) || touches(mem),
            Op::Atom { d, b, c, mem, .. } => reg(d) || src(b) || src(c) || touches(mem),
            _ => false,
        }
    }
}

/// An `atom`'s operation, memory reference, address and operand values.
type OvertakenAtom = (AtomOp, MemRef, u64, u64, u64);

/// How an instruction meets a thread's deferred loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hazard {
    None,
    /// Arithmetic on a deferred load's value, or a store of it: held back and performed after
    /// the load (`exec/held.rs`).
    Hold,
    /// A fence, release store, acquire load or an RMW that releases or acquires: it may
    /// overtake them, restricting them.
    Boundary,
    /// A store or RMW of a deferred load's bytes that may take effect first
    /// (`exec/one_location.rs`), else it waits.
    OwnStore,
    /// A load of a deferred load's bytes: deferred behind it (`exec/one_location.rs`).
    QueueLoad,
    /// It must wait until they are performed.
    Wait,
}

/// How far below the newest writes of its location a global write goes in coherence, given
/// that it may go below `n` of them (PTX model): with the chance of reading an older value,
/// uniformly 1 to `n`; else 0 (it is the newest).
fn placement(rng: &mut rand_chacha::ChaCha8Rng, older: u32) -> impl FnOnce(usize) -> usize + '_ {
    move |n| {
        if rng.random::<u32>() < older {
            1 + rng.random_range(0..n)
        } else {
            0
        }
    }
}

/// What happens after an instruction.
enum Flow {
    Next,
    Jump(u32),
    Call(u32),
    Return,
    Stop(QuantumEnd),
}

/// Whether `inst` is a fence (a deferred load it overtakes would form an acquire pattern with
/// it, reading a release).
fn is_fence(inst: &Inst) -> bool {
    matches!(inst.op, Op::Fence { .. })
}

//! Litmus tests as generated PTX: message passing (MP), store buffering (SB), load buffering (LB)
//! and coherence of read-read (CoRR), with the two communicating threads in different blocks.
//!
//! The kernels are generated rather than compiled from CUDA so that the distance between the
//! locations is an immediate offset (the optcheck can then see in SASS that the accesses stayed in
//! program order) and so that any fence kind can be placed between the two accesses of a thread.
//! Instances run in parallel: block `2i` plays thread 0 of instance `i`, block `2i + 1` thread 1.
//! Tests written as files (any shape, scopes, atomics, barriers) are in [`file`].

pub mod file;
pub mod run;

use crate::ptx::passes::fences::FenceKind;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::str::FromStr;

/// The shape of a litmus test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LitmusShape {
    Mp,
    Sb,
    Lb,
    Corr,
}

impl LitmusShape {
    pub const ALL: [LitmusShape; 4] = [
        LitmusShape::Mp,
        LitmusShape::Sb,
        LitmusShape::Lb,
        LitmusShape::Corr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LitmusShape::Mp => "mp",
            LitmusShape::Sb => "sb",
            LitmusShape::Lb => "lb",
            LitmusShape::Corr => "corr",
        }
    }

    /// Whether the outcome `(r0, r1)` is the weak (non-SC) one.
    pub fn is_weak(self, r0: u32, r1: u32) -> bool {
        match self {
            // T1 read y = 1 (r0), then x = 0 (r1).
            LitmusShape::Mp => r0 == 1 && r1 == 0,
            // Each thread missed the other's store.
            LitmusShape::Sb => r0 == 0 && r1 == 0,
            // Each thread read the store that comes after the other's load.
            LitmusShape::Lb => r0 == 1 && r1 == 1,
            // T1 read the new value of x, then the old one.
            LitmusShape::Corr => r0 == 1 && r1 == 0,
        }
    }

    /// The ops of thread 0 and thread 1.
    fn program(self) -> [[Op; 2]; 2] {
        use Loc::{X, Y};
        use Op::{Load, Store};
        match self {
            LitmusShape::Mp => [[Store(X), Store(Y)], [Load(Y, 0), Load(X, 1)]],
            LitmusShape::Sb => [[Store(X), Load(Y, 0)], [Store(Y), Load(X, 1)]],
            LitmusShape::Lb => [[Load(X, 0), Store(Y)], [Load(Y, 1), Store(X)]],
            LitmusShape::Corr => [[Store(X), Op::Nop], [Load(X, 0), Load(X, 1)]],
        }
    }
}

display_by_name!(LitmusShape, name);

/// Unlike [`parse_by_name`]'s, any case: `MP` is `mp`.
impl FromStr for LitmusShape {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LitmusShape::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown litmus test '{s}' (expected mp, sb, lb or corr)"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Loc {
    X,
    Y,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Store(Loc),
    /// Load into result slot 0 or 1 of the instance.
    Load(Loc, u8),
    Nop,
}

/// How the test's accesses are spelled in PTX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessFlavour {
    /// `ld.volatile.global` / `st.volatile.global`: relaxed at system scope, never reordered or
    /// merged by the compiler.
    #[default]
    Volatile,
    /// `ld.relaxed.gpu.global` / `st.relaxed.gpu.global`.
    Relaxed,
    /// `ld.global.cg` / `st.global.cg`: cache at L2, as in the ASPLOS 2015 litmus tests.
    Cg,
}

impl AccessFlavour {
    pub const ALL: [AccessFlavour; 3] = [
        AccessFlavour::Volatile,
        AccessFlavour::Relaxed,
        AccessFlavour::Cg,
    ];

    /// The name as the command line (`--access`) and results spell it.
    pub fn name(self) -> &'static str {
        match self {
            AccessFlavour::Volatile => "volatile",
            AccessFlavour::Relaxed => "relaxed",
            AccessFlavour::Cg => "cg",
        }
    }

    fn load(self) -> &'static str {
        match self {
            AccessFlavour::Volatile => "ld.volatile.global.u32",
            AccessFlavour::Relaxed => "ld.relaxed.gpu.global.u32",
            AccessFlavour::Cg => "ld.global.cg.u32",
        }
    }

    fn store(self) -> &'static str {
        match self {
            AccessFlavour::Volatile => "st.volatile.global.u32",
            AccessFlavour::Relaxed => "st.relaxed.gpu.global.u32",
            AccessFlavour::Cg => "st.global.cg.u32",
        }
    }
}

display_by_name!(AccessFlavour, name);
parse_by_name!(AccessFlavour, name, String, |s| format!(
    "unknown access flavour '{s}' (expected volatile, relaxed or cg)"
));

/// One instantiation of a litmus test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LitmusTest {
    pub shape: LitmusShape,
    /// Distance between `x` and `y`, in 32-bit words (at least 1).
    pub distance: u32,
    /// Fence between the two accesses of thread 0 and of thread 1.
    pub fences: [Option<FenceKind>; 2],
    pub access: AccessFlavour,
    /// Read the distance from a third kernel parameter (`u32`, in words, at most `distance`)
    /// instead of writing it into the PTX, so that one module serves every distance (tuning
    /// sweeps hundreds). The optcheck of the SASS wants the immediate form.
    pub distance_from_param: bool,
}

/// Name of the generated kernel.
pub const KERNEL: &str = "litmus";

impl LitmusTest {
    pub fn new(shape: LitmusShape, distance: u32) -> LitmusTest {
        LitmusTest {
            shape,
            distance: distance.max(1),
            fences: [None, None],
            access: AccessFlavour::default(),
            distance_from_param: false,
        }
    }

    /// Words of memory one instance occupies: `x`, `y` at `distance`, padded to 32-word patches.
    pub fn stride_words(&self) -> u32 {
        (self.distance + 1).div_ceil(32) * 32
    }

    /// The kernel `litmus(u64 mem, u64 out)` (with [`Self::distance_from_param`],
    /// `litmus(u64 mem, u64 out, u32 distance)`): launch `2 * instances` blocks of any size;
    /// thread 0 of each block plays its role. Instance `i` uses words
    /// `[i * stride, (i + 1) * stride)` of `mem` and writes its two results to `out[2i]` and
    /// `out[2i + 1]`.
    pub fn ptx(&self) -> String {
        let mut p = String::new();
        let (what, distance_param, registers) = match self.distance_from_param {
            true => (
                "maximum distance",
                format!(",\n\t.param .u32 {KERNEL}_param_distance"),
                9,
            ),
            false => ("distance", String::new(), 8),
        };
        let _ = write!(
            p,
            "// gpuwmm litmus test {} {what} {} fences {:?}\n\
             .version 7.0\n.target sm_70\n.address_size 64\n\n\
             .visible .entry {KERNEL}(\n\t.param .u64 {KERNEL}_param_mem,\n\t.param .u64 {KERNEL}_param_out{distance_param}\n)\n{{\n\
             \t.reg .pred \t%p<3>;\n\t.reg .b32 \t%r<{registers}>;\n\t.reg .b64 \t%rd<{registers}>;\n",
            self.shape, self.distance, self.fences
        );
        p.push_str(&self.prologue());
        for (thread, ops) in self.shape.program().iter().enumerate() {
            let _ = writeln!(p, "$T{thread}:");
            for (n, op) in ops.iter().enumerate() {
                p.push_str(&self.op_text(*op));
                if n == 0 {
                    if let Some(kind) = self.fences[thread] {
                        let _ = writeln!(p, "\t{};", kind.opcode());
                    }
                }
            }
            // Results are stored after both accesses, so that a store of a loaded value does not
            // sit between the test's own accesses (it would order them on an in-order machine).
            for op in ops {
                if let Op::Load(_, slot) = op {
                    let _ = writeln!(p, "\tst.global.u32 \t[%rd6+{}], %r{};", slot * 4, 6 + slot);
                }
            }
            p.push_str("\tbra.uni \t$DONE;\n");
        }
        p.push_str("$DONE:\n\tret;\n}\n");
        p
    }

    /// Picks the instance and role from `%ctaid.x`, computes `x` (`%rd4`) and the result slots
    /// (`%rd6`), and jumps to the role's code.
    fn prologue(&self) -> String {
        format!(
            "\tmov.u32 \t%r1, %tid.x;\n\
             \tsetp.ne.u32 \t%p1, %r1, 0;\n\
             \t@%p1 bra \t$DONE;\n\
             \tmov.u32 \t%r2, %ctaid.x;\n\
             \tshr.u32 \t%r3, %r2, 1;\n\
             \tand.b32 \t%r4, %r2, 1;\n\
             \tld.param.u64 \t%rd1, [{KERNEL}_param_mem];\n\
             \tcvta.to.global.u64 \t%rd1, %rd1;\n\
             \tld.param.u64 \t%rd2, [{KERNEL}_param_out];\n\
             \tcvta.to.global.u64 \t%rd2, %rd2;\n\
             \tmul.wide.u32 \t%rd3, %r3, {stride};\n\
             \tadd.s64 \t%rd4, %rd1, %rd3;\n\
             \tmul.wide.u32 \t%rd5, %r3, 8;\n\
             \tadd.s64 \t%rd6, %rd2, %rd5;\n\
             \tmov.u32 \t%r5, 1;\n\
             {y}\
             \tsetp.eq.u32 \t%p2, %r4, 1;\n\
             \t@%p2 bra \t$T1;\n\
             \tbra.uni \t$T0;\n",
            stride = self.stride_words() * 4,
            y = if self.distance_from_param {
                format!(
                    "\tld.param.u32 \t%r8, [{KERNEL}_param_distance];\n\
                     \tmul.wide.u32 \t%rd7, %r8, 4;\n\
                     \tadd.s64 \t%rd8, %rd4, %rd7;\n"
                )
            } else {
                String::new()
            }
        )
    }

    fn address(&self, loc: Loc) -> String {
        match loc {
            Loc::X => "[%rd4]".to_string(),
            Loc::Y if self.distance_from_param => "[%rd8]".to_string(),
            Loc::Y => format!("[%rd4+{}]", self.distance * 4),
        }
    }

    fn op_text(&self, op: Op) -> String {
        match op {
            Op::Store(loc) => format!("\t{} \t{}, %r5;\n", self.access.store(), self.address(loc)),
            Op::Load(loc, slot) => format!(
                "\t{} \t%r{}, {};\n",
                self.access.load(),
                6 + slot,
                self.address(loc),
            ),
            Op::Nop => String::new(),
        }
    }
}

/// Outcome counts of a litmus campaign.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Histogram {
    /// `(r0, r1) -> count`, sorted.
    pub outcomes: std::collections::BTreeMap<(u32, u32), u64>,
}

impl Histogram {
    /// Adds the results of one launch: `out` holds `2 * instances` words.
    pub fn add(&mut self, out: &[u32]) {
        for pair in out.chunks_exact(2) {
            *self.outcomes.entry((pair[0], pair[1])).or_default() += 1;
        }
    }

    pub fn total(&self) -> u64 {
        self.outcomes.values().sum()
    }

    pub fn weak(&self, shape: LitmusShape) -> u64 {
        self.outcomes
            .iter()
            .filter(|((r0, r1), _)| shape.is_weak(*r0, *r1))
            .map(|(_, n)| n)
            .sum()
    }

    /// A herd-style report ending in `Observation mp Sometimes 123 99877`.
    pub fn report(&self, shape: LitmusShape) -> String {
        let mut text = format!("Test {shape}\nHistogram ({} states)\n", self.outcomes.len());
        for ((r0, r1), n) in &self.outcomes {
            let mark = if shape.is_weak(*r0, *r1) { "*>" } else { ":>" };
            let _ = writeln!(text, "{n:<10}{mark}r0={r0}; r1={r1};");
        }
        let weak = self.weak(shape);
        let verdict = match weak {
            0 => "Never",
            w if w == self.total() => "Always",
            _ => "Sometimes",
        };
        let _ = writeln!(
            text,
            "Observation {shape} {verdict} {weak} {}",
            self.total() - weak
        );
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::{parse, print};

    #[test]
    fn generated_tests_parse_and_print_stably() {
        for shape in LitmusShape::ALL {
            let mut test = LitmusTest::new(shape, 64);
            test.fences = [Some(FenceKind::ScGpu), Some(FenceKind::MembarCta)];
            let printed = print(&parse(&test.ptx()).unwrap());
            assert_eq!(print(&parse(&printed).unwrap()), printed, "{shape}");
        }
    }

    #[test]
    fn mp_has_stores_then_loads_in_program_order() {
        insta::assert_snapshot!(LitmusTest::new(LitmusShape::Mp, 64).ptx());
    }

    #[test]
    fn fences_go_between_the_two_accesses() {
        let mut test = LitmusTest::new(LitmusShape::Sb, 3);
        test.fences = [Some(FenceKind::ScGpu), None];
        let ptx = test.ptx();
        let t0 = &ptx[ptx.find("$T0:").unwrap()..ptx.find("$T1:").unwrap()];
        let store = t0.find("st.volatile").unwrap();
        let fence = t0.find("fence.sc.gpu").unwrap();
        let load = t0.find("ld.volatile").unwrap();
        assert!(store < fence && fence < load, "{t0}");
        assert!(!ptx[ptx.find("$T1:").unwrap()..].contains("fence"));
    }

    #[test]
    fn weak_outcomes() {
        assert!(LitmusShape::Mp.is_weak(1, 0));
        assert!(!LitmusShape::Mp.is_weak(1, 1));
        assert!(LitmusShape::Sb.is_weak(0, 0));
        assert!(LitmusShape::Lb.is_weak(1, 1));
        assert!(LitmusShape::Corr.is_weak(1, 0));
        assert!(!LitmusShape::Corr.is_weak(0, 1));
    }

    #[test]
    fn histogram_report_is_herd_like() {
        let mut h = Histogram::default();
        h.add(&[1, 0, 1, 1, 0, 0, 1, 1]);
        let report = h.report(LitmusShape::Mp);
        assert!(
            report.ends_with("Observation mp Sometimes 1 3\n"),
            "{report}"
        );
        assert!(report.contains("*>r0=1; r1=0;"));
        let mut never = Histogram::default();
        never.add(&[1, 1]);
        assert!(never
            .report(LitmusShape::Mp)
            .contains("Observation mp Never 0 1"));
    }

    #[test]
    fn stride_covers_the_distance() {
        assert_eq!(LitmusTest::new(LitmusShape::Mp, 1).stride_words(), 32);
        assert_eq!(LitmusTest::new(LitmusShape::Mp, 31).stride_words(), 32);
        assert_eq!(LitmusTest::new(LitmusShape::Mp, 32).stride_words(), 64);
        assert_eq!(LitmusTest::new(LitmusShape::Mp, 0).distance, 1);
    }

    #[test]
    fn shapes_parse_case_insensitively() {
        assert_eq!("MP".parse::<LitmusShape>().unwrap(), LitmusShape::Mp);
        assert!("iriw".parse::<LitmusShape>().is_err());
    }
}

//! A parser for `cuobjdump -sass` text and a classification of SASS memory instructions.
//!
//! gpuwmm works on PTX, but the JIT (`ptxas` or the driver) decides what runs: it may merge,
//! move or drop accesses and fences. Tests therefore assemble transformed PTX and check the SASS:
//! that inserted fences are there, that litmus accesses keep their order, that stress accesses
//! survive. This module turns the disassembly into data for those checks. It is a pure function
//! of the text and never fails: lines it does not recognise are skipped.
//!
//! # What PTX fences become (CUDA 12.9 `ptxas`, identical on sm_80 and sm_90)
//!
//! | PTX                                  | SASS                                        |
//! |--------------------------------------|---------------------------------------------|
//! | `fence.sc.gpu`, `membar.gl`, `__threadfence()` | `MEMBAR.SC.GPU` + companions      |
//! | `fence.acq_rel.gpu`                  | `MEMBAR.ALL.GPU` + companions               |
//! | `fence.sc.sys`, `membar.sys`         | `MEMBAR.SC.SYS` + companions                |
//! | `fence.acq_rel.sys`                  | `MEMBAR.ALL.SYS` + companions               |
//! | `membar.cta`, `fence.sc.cta`         | `MEMBAR.SC.CTA` alone                       |
//! | `fence.acq_rel.cta`                  | `MEMBAR.ALL.CTA` alone                      |
//!
//! The companions of gpu- and sys-scope fences are `ERRBAR; CCTL.IVALL` on sm_80 and
//! `ERRBAR; CGAERRBAR; CCTL.IVALL` on sm_90 (`CCTL.IVALL` invalidates the L1 cache, which is what
//! makes later loads see other SMs' writes). So each PTX fence is exactly one `MEMBAR`, and
//! [`SassInstruction::is_fence`] counts `MEMBAR` only. The table is checked against the committed
//! fixtures `tests/fixtures/sass/fences.sm_{80,90}.sass` (unit tests below) and against a live
//! `ptxas` run (`tests/toolchain.rs`).
//!
//! # Memory accesses
//!
//! Global accesses are `LDG`/`STG`; generic ones (a pointer that may be global or shared) are
//! `LD`/`ST`. `volatile` accesses carry `.STRONG.SYS` (`LDG.E.STRONG.SYS`, `ST.E.STRONG.SYS`),
//! plain ones no strength (`LDG.E`). Atomics are `ATOMG` (global), `ATOM` (generic), `ATOMS`
//! (shared), and `RED` (sm_80) / `REDG` (sm_90) when the result is unused; all global/generic
//! atomics carry `.STRONG.GPU`.

#![forbid(unsafe_code)]

/// One kernel (or device function) of the disassembly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SassFunction {
    /// The function's (unmangled, for `extern "C"`) name.
    pub name: String,
    /// The architecture from the preceding `code for sm_XY` line, if any.
    pub arch: Option<String>,
    pub instructions: Vec<SassInstruction>,
}

/// One SASS instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SassInstruction {
    /// Byte offset in the function (`/*0070*/`).
    pub offset: u32,
    /// The predicate guard without `@`, e.g. `P0` or `!P1`.
    pub guard: Option<String>,
    /// The full opcode with modifiers, e.g. `STG.E.STRONG.SYS`.
    pub opcode: String,
    /// Everything after the opcode, e.g. `[R2.64], R5`.
    pub operands: String,
}

impl SassInstruction {
    /// The opcode without modifiers: `STG` for `STG.E.STRONG.SYS`.
    pub fn base_opcode(&self) -> &str {
        self.opcode.split('.').next().unwrap_or("")
    }

    /// The opcode's modifiers: `["E", "STRONG", "SYS"]` for `STG.E.STRONG.SYS`.
    pub fn modifiers(&self) -> impl Iterator<Item = &str> {
        self.opcode.split('.').skip(1)
    }

    /// True for `MEMBAR.*`, which every PTX `fence`/`membar` becomes (see the module docs).
    pub fn is_fence(&self) -> bool {
        self.base_opcode() == "MEMBAR"
    }

    /// True for the instructions `ptxas` emits after a gpu- or sys-scope `MEMBAR`
    /// (`ERRBAR`, `CGAERRBAR`, `CCTL`): part of the fence, not fences themselves.
    pub fn is_fence_companion(&self) -> bool {
        matches!(self.base_opcode(), "ERRBAR" | "CGAERRBAR" | "CCTL")
    }

    /// True for loads that may read global memory: `LDG` (global), `LD` (generic) and `LDGSTS`
    /// (global-to-shared copy). Shared (`LDS`), local (`LDL`) and constant (`LDC`) loads are not.
    pub fn is_global_load(&self) -> bool {
        matches!(self.base_opcode(), "LDG" | "LD" | "LDGSTS")
    }

    /// True for stores that may write global memory: `STG` (global) and `ST` (generic).
    pub fn is_global_store(&self) -> bool {
        matches!(self.base_opcode(), "STG" | "ST")
    }

    /// True for atomics that may act on global memory: `ATOMG`, `ATOM` (generic), `RED`, `REDG`.
    /// Shared-memory atomics (`ATOMS`) are not included.
    pub fn is_atomic(&self) -> bool {
        matches!(self.base_opcode(), "ATOMG" | "ATOM" | "RED" | "REDG")
    }

    /// True when the access is `volatile`-strong (`.STRONG.SYS`).
    pub fn is_strong_sys(&self) -> bool {
        let mut mods = self.modifiers().skip_while(|m| *m != "STRONG");
        mods.next().is_some() && mods.next() == Some("SYS")
    }
}

impl SassFunction {
    /// The instructions for which `pred` holds.
    pub fn filter(&self, pred: impl Fn(&SassInstruction) -> bool) -> Vec<&SassInstruction> {
        self.instructions.iter().filter(|i| pred(i)).collect()
    }

    /// The number of fences (`MEMBAR`s).
    pub fn fence_count(&self) -> usize {
        self.instructions.iter().filter(|i| i.is_fence()).count()
    }
}

/// Parses `cuobjdump -sass` output into its functions, in order of appearance.
pub fn parse_sass(text: &str) -> Vec<SassFunction> {
    let mut functions: Vec<SassFunction> = Vec::new();
    let mut arch: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("code for ") {
            arch = Some(rest.trim().to_string());
        } else if let Some(name) = function_name(trimmed) {
            functions.push(SassFunction {
                name: name.to_string(),
                arch: arch.clone(),
                instructions: Vec::new(),
            });
        } else if let (Some(function), Some(instruction)) =
            (functions.last_mut(), parse_instruction(trimmed))
        {
            function.instructions.push(instruction);
        }
    }
    functions
}

/// `Function : name` → `name`.
fn function_name(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("Function")?
        .trim_start()
        .strip_prefix(':')?;
    Some(rest.trim()).filter(|name| !name.is_empty())
}

/// `/*0070*/  @!P0 STG.E [R2.64], R5 ;  /* 0x… */` → an instruction. Encoding-only lines
/// (`/* 0x… */`) and anything else return `None`.
fn parse_instruction(line: &str) -> Option<SassInstruction> {
    let rest = line.strip_prefix("/*")?;
    let (offset_text, rest) = rest.split_once("*/")?;
    let offset = u32::from_str_radix(offset_text, 16).ok()?;
    let text = rest.split(';').next()?.trim();
    let mut tokens = text.splitn(2, char::is_whitespace);
    let mut first = tokens.next().filter(|t| !t.is_empty())?;
    let mut remainder = tokens.next().unwrap_or("").trim();
    let guard = match first.strip_prefix('@') {
        Some(guard) => {
            let mut next = remainder.splitn(2, char::is_whitespace);
            first = next.next().filter(|t| !t.is_empty())?;
            remainder = next.next().unwrap_or("").trim();
            Some(guard.to_string())
        }
        None => None,
    };
    Some(SassInstruction {
        offset,
        guard,
        opcode: first.to_string(),
        operands: remainder.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SM80: &str = include_str!("../../tests/fixtures/sass/fences.sm_80.sass");
    const SM90: &str = include_str!("../../tests/fixtures/sass/fences.sm_90.sass");

    fn function<'a>(functions: &'a [SassFunction], name: &str) -> &'a SassFunction {
        functions.iter().find(|f| f.name == name).unwrap()
    }

    fn opcodes(f: &SassFunction, pred: impl Fn(&SassInstruction) -> bool) -> Vec<&str> {
        f.filter(pred).iter().map(|i| i.opcode.as_str()).collect()
    }

    #[test]
    fn parses_one_instruction_line() {
        let i = parse_instruction(
            "/*02b0*/                   @!P0 RED.E.ADD.STRONG.GPU [R2.64+0x4], R7 ;  /* 0x0 */",
        )
        .unwrap();
        assert_eq!(i.offset, 0x2b0);
        assert_eq!(i.guard.as_deref(), Some("!P0"));
        assert_eq!(i.opcode, "RED.E.ADD.STRONG.GPU");
        assert_eq!(i.base_opcode(), "RED");
        assert_eq!(i.operands, "[R2.64+0x4], R7");
        assert!(i.is_atomic());
    }

    #[test]
    fn operandless_and_unspaced_instructions() {
        let i = parse_instruction("/*0090*/ ERRBAR; /* 0x00000000000079ab */").unwrap();
        assert_eq!((i.opcode.as_str(), i.operands.as_str()), ("ERRBAR", ""));
        let i = parse_instruction("/*00a0*/ BRA 0xa0; /* 0x0 */").unwrap();
        assert_eq!((i.opcode.as_str(), i.operands.as_str()), ("BRA", "0xa0"));
    }

    #[test]
    fn non_instruction_lines_are_skipped() {
        for line in [
            "/* 0x000fe40000000f00 */",
            "/*zz*/ NOP ;",
            "/**/ NOP ;",
            "/*0010*/",
            "/*0010*/ @P0",
            "..........",
            "",
        ] {
            assert!(parse_instruction(line).is_none(), "{line:?}");
        }
        assert!(parse_sass("/*0000*/ NOP ;\nFunction :\n").is_empty());
    }

    #[test]
    fn fixture_functions_and_arch() {
        for (text, arch) in [(SM80, "sm_80"), (SM90, "sm_90")] {
            let functions = parse_sass(text);
            let names: Vec<&str> = functions.iter().map(|f| f.name.as_str()).collect();
            assert_eq!(names, ["accesses", "fences"]);
            assert!(functions.iter().all(|f| f.arch.as_deref() == Some(arch)));
            let fences = function(&functions, "fences");
            assert_eq!(fences.instructions[0].offset, 0);
            assert_eq!(fences.instructions.last().unwrap().base_opcode(), "NOP");
        }
    }

    /// The fence table of the module docs: one MEMBAR per PTX fence, in source order
    /// fence.sc.gpu, membar.gl, fence.acq_rel.gpu, membar.cta, fence.sc.sys, membar.sys,
    /// fence.acq_rel.sys, fence.sc.cta, fence.acq_rel.cta, __threadfence().
    #[test]
    fn fence_kinds_map_to_membar() {
        let expected = [
            "MEMBAR.SC.GPU",
            "MEMBAR.SC.GPU",
            "MEMBAR.ALL.GPU",
            "MEMBAR.SC.CTA",
            "MEMBAR.SC.SYS",
            "MEMBAR.SC.SYS",
            "MEMBAR.ALL.SYS",
            "MEMBAR.SC.CTA",
            "MEMBAR.ALL.CTA",
            "MEMBAR.SC.GPU",
        ];
        for text in [SM80, SM90] {
            let functions = parse_sass(text);
            let fences = function(&functions, "fences");
            assert_eq!(opcodes(fences, SassInstruction::is_fence), expected);
            assert_eq!(fences.fence_count(), 10);
            assert_eq!(opcodes(fences, SassInstruction::is_global_store).len(), 11);
        }
    }

    #[test]
    fn gpu_and_sys_fences_have_companions_cta_fences_do_not() {
        for (text, companions) in [
            (SM80, vec!["ERRBAR", "CCTL.IVALL"]),
            (SM90, vec!["ERRBAR", "CGAERRBAR", "CCTL.IVALL"]),
        ] {
            let functions = parse_sass(text);
            let body = &function(&functions, "fences").instructions;
            for (index, fence) in body.iter().enumerate().filter(|(_, i)| i.is_fence()) {
                let after: Vec<&str> = body[index + 1..]
                    .iter()
                    .filter(|i| i.is_fence_companion() || i.is_fence() || i.is_global_store())
                    .take_while(|i| i.is_fence_companion())
                    .map(|i| i.opcode.as_str())
                    .collect();
                let expected: Vec<&str> = if fence.opcode.ends_with(".CTA") {
                    vec![]
                } else {
                    companions.clone()
                };
                assert_eq!(after, expected, "after {}", fence.opcode);
            }
        }
    }

    #[test]
    fn access_kinds_in_the_fixture() {
        for (text, red) in [(SM80, "RED"), (SM90, "REDG")] {
            let functions = parse_sass(text);
            let f = function(&functions, "accesses");
            let loads = opcodes(f, SassInstruction::is_global_load);
            assert_eq!(loads, ["LDG.E.STRONG.SYS", "LD.E"]);
            let stores = opcodes(f, SassInstruction::is_global_store);
            assert_eq!(stores, ["STG.E.STRONG.SYS", "ST.E", "STG.E"]);
            let atomics: Vec<&str> = f
                .filter(SassInstruction::is_atomic)
                .iter()
                .map(|i| i.base_opcode())
                .collect();
            assert_eq!(atomics, ["ATOMG", red, "ATOM"]);
            assert_eq!(f.fence_count(), 0);
            let shared_atomic = f.filter(|i| i.base_opcode() == "ATOMS");
            assert_eq!(shared_atomic.len(), 1);
            assert!(!shared_atomic[0].is_atomic());
            assert_eq!(shared_atomic[0].guard.as_deref(), Some("P2"));
        }
    }

    #[test]
    fn volatile_accesses_are_strong_sys() {
        let functions = parse_sass(SM80);
        let f = function(&functions, "accesses");
        let strong: Vec<&str> = opcodes(f, SassInstruction::is_strong_sys);
        assert_eq!(strong, ["STG.E.STRONG.SYS", "LDG.E.STRONG.SYS"]);
        assert!(!f.filter(SassInstruction::is_atomic)[0].is_strong_sys());
    }
}

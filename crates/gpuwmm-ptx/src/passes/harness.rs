//! The harness pass: stressing blocks and thread randomisation for one kernel.
//!
//! The core paper (`seeds/004_…`, sections 3 and 4.2) stresses an application with extra
//! *stressing blocks* that run next to the application's blocks, and randomises which hardware
//! block and warp runs which part of the application. Both need the kernel's cooperation; this
//! pass adds it to the kernel's PTX, so no application source is ever edited:
//!
//! - one parameter, `.param .u64 <kernel>_gpuwmm_ctrl`, points to a *control block* in global
//!   memory (layout in [`layout`], host side in `crate::control`);
//! - the kernel is launched as a 1-D grid of `app_blocks + stress_blocks` blocks of
//!   `ntid.x * ntid.y * ntid.z` threads; blocks with linear id ≥ `app_blocks` run the stress code
//!   of [`super::stress`] and return;
//! - application blocks compute *virtual* ids at entry: virtual block = `block_perm[ctaid.x]`,
//!   virtual thread = `warp_perm[virtual block][tid.x / 32] * 32 + tid.x % 32`, decomposed into
//!   `%tid.{x,y,z}` and `%ctaid.{x,y,z}` with the application's `%ntid.*` / `%nctaid.*` read from
//!   the control block. Every later read of `%tid.*`, `%ntid.*`, `%ctaid.*` and `%nctaid.*` reads a
//!   register holding the virtual value instead. Warps move as a whole, so warp membership and
//!   lane ids (`%laneid`) are kept; `%laneid`, `%warpid` and `%smid` are left alone.
//!
//! With the identity permutations (randomisation off) the virtual ids equal the ids of a native
//! launch with the original grid and block, since CUDA numbers threads and blocks x-fastest.

use super::stress::{stress_code, StressCode, StressError, StressStrategy};
use crate::ir::*;
use crate::parse::ParseError;
use std::collections::HashSet;
use thiserror::Error;

/// Word offsets (in little-endian `u32` words) of the control block. The header has fixed
/// offsets; the three variable-length sections follow it at the word offsets the header holds.
pub mod layout {
    /// Number of application blocks (`nctaid.x * nctaid.y * nctaid.z` of the original launch).
    pub const APP_BLOCKS: u32 = 0;
    /// The application's grid, `%nctaid.{x,y,z}`.
    pub const NCTAID_X: u32 = 1;
    pub const NCTAID_Y: u32 = 2;
    pub const NCTAID_Z: u32 = 3;
    /// The application's block, `%ntid.{x,y,z}`.
    pub const NTID_X: u32 = 4;
    pub const NTID_Y: u32 = 5;
    pub const NTID_Z: u32 = 6;
    /// Threads per block, `ntid.x * ntid.y * ntid.z`: the real (1-D) block size.
    pub const BLOCK_THREADS: u32 = 7;
    /// Warps per block, `ceil(BLOCK_THREADS / 32)`: the row length of the warp permutation.
    pub const WARPS_PER_BLOCK: u32 = 8;
    pub const STRESS_BLOCKS: u32 = 9;
    pub const STRESS_ITERATIONS: u32 = 10;
    /// Scratchpad size in 32-bit words.
    pub const SCRATCH_WORDS: u32 = 11;
    /// Number of `sys` stress locations.
    pub const SPREAD: u32 = 12;
    pub const PATCH_WORDS: u32 = 13;
    /// The run's seed (low and high half); `rand` stress seeds its generators from it.
    pub const SEED_LO: u32 = 14;
    pub const SEED_HI: u32 = 15;
    /// Device address of the scratchpad, a `u64` in words 16 and 17 (byte 64, 8-aligned).
    pub const SCRATCH_ADDRESS: u32 = 16;
    /// Word offset of `block_perm`: `APP_BLOCKS` words, real block → virtual block.
    pub const BLOCK_PERM_OFFSET: u32 = 18;
    /// Word offset of `warp_perm`: `APP_BLOCKS` rows of `WARPS_PER_BLOCK` words, indexed by
    /// virtual block, then real warp → virtual warp.
    pub const WARP_PERM_OFFSET: u32 = 19;
    /// Word offset of the `sys` locations: `SPREAD` scratchpad word indices.
    pub const LOCATIONS_OFFSET: u32 = 20;
    /// 1 when the permutations are random, 0 for the identity (informational).
    pub const RANDOMISED: u32 = 21;
    /// [`VERSION`] (informational, for tools that read a control block back).
    pub const LAYOUT_VERSION: u32 = 22;
    /// Words of the header; `block_perm` starts here.
    pub const HEADER_WORDS: u32 = 24;
    /// The version of this layout.
    pub const VERSION: u32 = 1;

    /// The byte offset of a word, as used in an address operand.
    pub const fn byte_offset(word: u32) -> u64 {
        word as u64 * 4
    }
}

/// Options of the harness pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HarnessOptions {
    pub stress: StressStrategy,
}

/// Why a kernel cannot be instrumented.
#[derive(Debug, Error, PartialEq)]
pub enum HarnessError {
    #[error("no kernel (.entry with a body) named '{0}' in the module")]
    KernelNotFound(String),
    #[error("kernel '{0}' is already instrumented: it has a parameter ending in '{CTRL_SUFFIX}'")]
    AlreadyInstrumented(String),
    #[error("kernel '{kernel}' uses '{name}', which has the reserved prefix 'gwmm_'")]
    ReservedName { kernel: String, name: String },
    #[error(
        "device function '{function}' (reachable from kernel '{kernel}') reads {register}; the \
         harness only virtualises special registers read in the kernel itself"
    )]
    SpecialRegisterInFunction {
        kernel: String,
        function: String,
        register: String,
    },
    #[error("kernel '{kernel}': {what} is not supported by the harness")]
    Unsupported { kernel: String, what: String },
    #[error(transparent)]
    Stress(#[from] StressError),
    #[error("internal error: generated harness code does not parse: {0}")]
    Generated(#[from] ParseError),
}

/// The appended parameter is named `<kernel>` followed by this suffix.
pub const CTRL_SUFFIX: &str = "_gpuwmm_ctrl";
/// Registers (`%gwmm_…`) and labels (`$gwmm_…`) added by the pass use this prefix.
pub const RESERVED_PREFIX: &str = "gwmm_";
/// The register holding the global address of the control block.
pub const CTRL_REGISTER: &str = "%gwmm_ctrl";
/// The label where application blocks continue after the stress dispatch; every special
/// register read of the instrumented kernel comes before it.
pub const APP_LABEL: &str = "$gwmm_app";

/// The special registers whose reads are virtualised.
const VIRTUALISED: [&str; 4] = ["%tid", "%ntid", "%ctaid", "%nctaid"];

/// The register that holds the virtual value of `special` (`%tid.x` → `%gwmm_tid_x`), or `None`
/// when `special` is not one of the twelve virtualised components.
pub fn virtual_register(special: &str) -> Option<String> {
    let (family, component) = special.split_once('.')?;
    (VIRTUALISED.contains(&family) && matches!(component, "x" | "y" | "z"))
        .then(|| format!("%{RESERVED_PREFIX}{}_{component}", &family[1..]))
}

/// True for `%tid`, `%tid.x`, … : any spelling of a register this pass must virtualise.
fn is_virtualised_family(register: &str) -> bool {
    let family = register.split('.').next().unwrap_or(register);
    VIRTUALISED.contains(&family)
}

/// Instruments `kernel` of `module`: see the module documentation.
pub fn harness(
    module: &Module,
    kernel: &str,
    options: &HarnessOptions,
) -> Result<Module, HarnessError> {
    harness_kernels(module, &[kernel], options)
}

/// [`harness`] applied to several kernels of one module, copying the module once.
pub fn harness_kernels(
    module: &Module,
    kernels: &[&str],
    options: &HarnessOptions,
) -> Result<Module, HarnessError> {
    let mut out = module.clone();
    for kernel in kernels {
        let original = find_kernel(module, kernel)?;
        check_kernel(module, original)?;
        let stress = stress_code(&options.stress, CTRL_REGISTER)?;
        let target = out
            .functions_mut()
            .find(|f| is_kernel_named(f, kernel))
            .ok_or_else(|| HarnessError::KernelNotFound(kernel.to_string()))?;
        instrument(target, stress)?;
    }
    Ok(out)
}

fn is_kernel_named(f: &Function, name: &str) -> bool {
    f.kind == FunctionKind::Entry && f.body.is_some() && f.name == name
}

fn find_kernel<'m>(module: &'m Module, kernel: &str) -> Result<&'m Function, HarnessError> {
    module
        .functions()
        .find(|f| is_kernel_named(f, kernel))
        .ok_or_else(|| HarnessError::KernelNotFound(kernel.to_string()))
}

/// Everything that makes a kernel impossible to instrument, found before any change.
fn check_kernel(module: &Module, kernel: &Function) -> Result<(), HarnessError> {
    if kernel.params.iter().any(|p| p.name.ends_with(CTRL_SUFFIX)) {
        return Err(HarnessError::AlreadyInstrumented(kernel.name.clone()));
    }
    check_names(kernel)?;
    if let Some(register) = registers_read(kernel)
        .into_iter()
        .find(|r| is_virtualised_family(r) && virtual_register(r).is_none())
    {
        return Err(HarnessError::Unsupported {
            kernel: kernel.name.clone(),
            what: format!("the vector special register {register}"),
        });
    }
    for directive in &kernel.directives {
        rewrite_directive(&kernel.name, directive)?;
    }
    check_device_functions(module, kernel)
}

/// Fails when the kernel already uses a register or label with the reserved prefix.
fn check_names(kernel: &Function) -> Result<(), HarnessError> {
    let labels = kernel.body.iter().flatten().filter_map(|s| match s {
        Statement::Label(l) => Some(l.clone()),
        _ => None,
    });
    let mut names = registers_read(kernel).into_iter().chain(labels);
    match names.find(|n| n.get(1..).is_some_and(|n| n.starts_with(RESERVED_PREFIX))) {
        Some(name) => Err(HarnessError::ReservedName {
            kernel: kernel.name.clone(),
            name,
        }),
        None => Ok(()),
    }
}

/// Every register named by an operand or guard of `f`, in order, with repetitions.
fn registers_read(f: &Function) -> Vec<String> {
    let mut names = Vec::new();
    for instruction in f.instructions() {
        if let Some(guard) = &instruction.guard {
            names.push(guard.predicate.clone());
        }
        for operand in &instruction.operands {
            let mut operand = operand.clone();
            operand.for_each_register_mut(&mut |r| names.push(r.clone()));
        }
    }
    names
}

/// Fails when a device function reachable from `kernel` reads a virtualised special register:
/// it would see real, not virtual, ids.
fn check_device_functions(module: &Module, kernel: &Function) -> Result<(), HarnessError> {
    let mut seen = HashSet::new();
    let mut pending = callees(module, kernel);
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(function) = module.functions().find(|f| f.name == name) else {
            continue;
        };
        if let Some(register) = registers_read(function)
            .into_iter()
            .find(|r| is_virtualised_family(r))
        {
            return Err(HarnessError::SpecialRegisterInFunction {
                kernel: kernel.name.clone(),
                function: name,
                register,
            });
        }
        pending.extend(callees(module, function));
    }
    Ok(())
}

/// Names of the functions `f` may call; an indirect call may reach every `.func`.
fn callees(module: &Module, f: &Function) -> Vec<String> {
    let mut names = Vec::new();
    for call in f.instructions().filter(|i| i.opcode.base == "call") {
        match call
            .operands
            .iter()
            .find(|o| !matches!(o, Operand::List(_)))
        {
            Some(Operand::Symbol(name)) => names.push(name.clone()),
            _ => names.extend(
                module
                    .functions()
                    .filter(|g| g.kind == FunctionKind::Func)
                    .map(|g| g.name.clone()),
            ),
        }
    }
    names
}

/// Rewrites `.maxntid` / `.reqntid` to the 1-D product of their dimensions; refuses cluster
/// directives (the real launch has no clusters). Other directives are kept verbatim.
fn rewrite_directive(kernel: &str, directive: &str) -> Result<String, HarnessError> {
    let mut chunks: Vec<Vec<&str>> = Vec::new();
    for word in directive.split_whitespace() {
        match chunks.last_mut() {
            Some(chunk) if !word.starts_with('.') => chunk.push(word),
            _ => chunks.push(vec![word]),
        }
    }
    if !chunks.iter().any(|c| is_rewritten_directive(c[0])) {
        return Ok(directive.to_string());
    }
    let rewritten: Vec<String> = chunks
        .iter()
        .map(|c| rewrite_chunk(kernel, c))
        .collect::<Result<_, _>>()?;
    Ok(rewritten.join(" "))
}

const CLUSTER_DIRECTIVES: [&str; 3] = [".reqnctapercluster", ".explicitcluster", ".maxclusterrank"];

fn is_rewritten_directive(name: &str) -> bool {
    matches!(name, ".maxntid" | ".reqntid") || CLUSTER_DIRECTIVES.contains(&name)
}

fn rewrite_chunk(kernel: &str, chunk: &[&str]) -> Result<String, HarnessError> {
    let unsupported = |what: String| HarnessError::Unsupported {
        kernel: kernel.to_string(),
        what,
    };
    let name = chunk[0];
    if CLUSTER_DIRECTIVES.contains(&name) {
        return Err(unsupported(format!("the cluster directive {name}")));
    }
    if !is_rewritten_directive(name) {
        return Ok(chunk.join(" "));
    }
    let arguments = chunk[1..].concat();
    let product = arguments
        .split(',')
        .map(|d| d.trim().parse::<u64>().ok())
        .try_fold(1u64, |acc, d| d.and_then(|d| acc.checked_mul(d)))
        .filter(|_| !arguments.is_empty())
        .ok_or_else(|| unsupported(format!("the directive '{}'", chunk.join(" "))))?;
    Ok(format!("{name} {product}, 1, 1"))
}

/// Applies the pass to a checked kernel.
fn instrument(kernel: &mut Function, stress: StressCode) -> Result<(), HarnessError> {
    kernel.directives = kernel
        .directives
        .iter()
        .map(|d| rewrite_directive(&kernel.name, d))
        .collect::<Result<_, _>>()?;
    let param = format!("{}{CTRL_SUFFIX}", kernel.name);
    kernel.params.push(Param {
        decl: format!(".param .u64 {param}"),
        name: param.clone(),
    });
    let mut original = kernel.body.take().unwrap_or_default();
    virtualise(&mut original);
    let entry = original
        .iter()
        .position(|s| {
            !matches!(
                s,
                Statement::Directive(_) | Statement::Comment(_) | Statement::Loc(_)
            )
        })
        .unwrap_or(original.len());
    let mut body = super::stress::parse_snippet(DECLARATIONS)?;
    body.extend(stress.declarations);
    body.extend(original.drain(..entry));
    body.extend(super::stress::parse_snippet(&dispatch(&param))?);
    body.extend(stress.body);
    body.extend(super::stress::parse_snippet(&virtual_ids())?);
    body.append(&mut original);
    kernel.body = Some(body);
    Ok(())
}

/// Replaces every read of a virtualised special register by its virtual register.
fn virtualise(body: &mut [Statement]) {
    for statement in body {
        if let Statement::Instruction(instruction) = statement {
            for operand in &mut instruction.operands {
                operand.for_each_register_mut(&mut |r| {
                    if let Some(v) = virtual_register(r) {
                        *r = v;
                    }
                });
            }
        }
    }
}

const DECLARATIONS: &str = "\
.reg .pred %gwmm_is_app;
.reg .b32 %gwmm_rblock, %gwmm_rthread, %gwmm_vblock, %gwmm_vthread, %gwmm_t, %gwmm_w;
.reg .b32 %gwmm_tid_x, %gwmm_tid_y, %gwmm_tid_z, %gwmm_ntid_x, %gwmm_ntid_y, %gwmm_ntid_z;
.reg .b32 %gwmm_ctaid_x, %gwmm_ctaid_y, %gwmm_ctaid_z;
.reg .b32 %gwmm_nctaid_x, %gwmm_nctaid_y, %gwmm_nctaid_z;
.reg .b64 %gwmm_ctrl, %gwmm_a;
";

/// `[%gwmm_ctrl+offset]` for a control-block word.
fn ctrl(word: u32) -> String {
    format!("[{CTRL_REGISTER}+{}]", layout::byte_offset(word))
}

/// Loads the control block's address and sends blocks past the application's to the stress
/// code, which follows.
fn dispatch(param: &str) -> String {
    format!(
        "\
// gpuwmm harness: blocks with linear id >= app_blocks stress, the others run the application
ld.param.u64 %gwmm_ctrl, [{param}];
cvta.to.global.u64 %gwmm_ctrl, %gwmm_ctrl;
mov.u32 %gwmm_rblock, %ctaid.x;
mov.u32 %gwmm_rthread, %tid.x;
ld.global.u32 %gwmm_t, {app_blocks};
setp.lt.u32 %gwmm_is_app, %gwmm_rblock, %gwmm_t;
@%gwmm_is_app bra {APP_LABEL};
",
        app_blocks = ctrl(layout::APP_BLOCKS),
    )
}

/// Computes the virtual ids of an application thread.
fn virtual_ids() -> String {
    use layout::*;
    format!(
        "\
{APP_LABEL}:
// virtual block = block_perm[real block]
ld.global.u32 %gwmm_t, {block_perm};
add.u32 %gwmm_t, %gwmm_t, %gwmm_rblock;
mul.wide.u32 %gwmm_a, %gwmm_t, 4;
add.s64 %gwmm_a, %gwmm_ctrl, %gwmm_a;
ld.global.u32 %gwmm_vblock, [%gwmm_a];
// virtual thread = warp_perm[virtual block][real warp] * 32 + lane
ld.global.u32 %gwmm_t, {warps};
mul.lo.u32 %gwmm_t, %gwmm_vblock, %gwmm_t;
shr.u32 %gwmm_w, %gwmm_rthread, 5;
add.u32 %gwmm_t, %gwmm_t, %gwmm_w;
ld.global.u32 %gwmm_w, {warp_perm};
add.u32 %gwmm_t, %gwmm_t, %gwmm_w;
mul.wide.u32 %gwmm_a, %gwmm_t, 4;
add.s64 %gwmm_a, %gwmm_ctrl, %gwmm_a;
ld.global.u32 %gwmm_w, [%gwmm_a];
shl.b32 %gwmm_w, %gwmm_w, 5;
and.b32 %gwmm_t, %gwmm_rthread, 31;
add.u32 %gwmm_vthread, %gwmm_w, %gwmm_t;
// the application's %ntid and %nctaid; virtual %tid and %ctaid, x fastest
ld.global.u32 %gwmm_ntid_x, {ntid_x};
ld.global.u32 %gwmm_ntid_y, {ntid_y};
ld.global.u32 %gwmm_ntid_z, {ntid_z};
ld.global.u32 %gwmm_nctaid_x, {nctaid_x};
ld.global.u32 %gwmm_nctaid_y, {nctaid_y};
ld.global.u32 %gwmm_nctaid_z, {nctaid_z};
rem.u32 %gwmm_tid_x, %gwmm_vthread, %gwmm_ntid_x;
div.u32 %gwmm_t, %gwmm_vthread, %gwmm_ntid_x;
rem.u32 %gwmm_tid_y, %gwmm_t, %gwmm_ntid_y;
div.u32 %gwmm_tid_z, %gwmm_t, %gwmm_ntid_y;
rem.u32 %gwmm_ctaid_x, %gwmm_vblock, %gwmm_nctaid_x;
div.u32 %gwmm_t, %gwmm_vblock, %gwmm_nctaid_x;
rem.u32 %gwmm_ctaid_y, %gwmm_t, %gwmm_nctaid_y;
div.u32 %gwmm_ctaid_z, %gwmm_t, %gwmm_nctaid_y;
// gpuwmm harness: end of prologue
",
        block_perm = ctrl(BLOCK_PERM_OFFSET),
        warps = ctrl(WARPS_PER_BLOCK),
        warp_perm = ctrl(WARP_PERM_OFFSET),
        ntid_x = ctrl(NTID_X),
        ntid_y = ctrl(NTID_Y),
        ntid_z = ctrl(NTID_Z),
        nctaid_x = ctrl(NCTAID_X),
        nctaid_y = ctrl(NCTAID_Y),
        nctaid_z = ctrl(NCTAID_Z),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_register_names() {
        assert_eq!(virtual_register("%tid.x").as_deref(), Some("%gwmm_tid_x"));
        assert_eq!(
            virtual_register("%nctaid.z").as_deref(),
            Some("%gwmm_nctaid_z")
        );
        assert_eq!(virtual_register("%tid"), None);
        assert_eq!(virtual_register("%laneid"), None);
        assert_eq!(virtual_register("%tid.w"), None);
        assert!(is_virtualised_family("%tid") && is_virtualised_family("%ctaid.w"));
        assert!(!is_virtualised_family("%warpid") && !is_virtualised_family("%clusterid.x"));
    }

    #[test]
    fn launch_directives_become_one_dimensional() {
        let rewrite = |d: &str| rewrite_directive("k", d);
        assert_eq!(rewrite(".maxntid 256, 1, 1").unwrap(), ".maxntid 256, 1, 1");
        assert_eq!(rewrite(".reqntid 8,4,2").unwrap(), ".reqntid 64, 1, 1");
        assert_eq!(rewrite(".maxntid 32").unwrap(), ".maxntid 32, 1, 1");
        assert_eq!(rewrite(".maxnreg   32").unwrap(), ".maxnreg   32");
        assert!(rewrite(".maxntid").is_err());
        assert!(rewrite(".maxntid 99999999999, 99999999999, 99999999999").is_err());
        assert!(rewrite(".explicitcluster").is_err());
    }

    #[test]
    fn layout_offsets_are_distinct_and_inside_the_header() {
        use layout::*;
        let words = [
            APP_BLOCKS,
            NCTAID_X,
            NCTAID_Y,
            NCTAID_Z,
            NTID_X,
            NTID_Y,
            NTID_Z,
            BLOCK_THREADS,
            WARPS_PER_BLOCK,
            STRESS_BLOCKS,
            STRESS_ITERATIONS,
            SCRATCH_WORDS,
            SPREAD,
            PATCH_WORDS,
            SEED_LO,
            SEED_HI,
            SCRATCH_ADDRESS,
            SCRATCH_ADDRESS + 1,
            BLOCK_PERM_OFFSET,
            WARP_PERM_OFFSET,
            LOCATIONS_OFFSET,
            RANDOMISED,
            LAYOUT_VERSION,
        ];
        let distinct: HashSet<u32> = words.iter().copied().collect();
        assert_eq!(distinct.len(), words.len());
        assert!(words.iter().all(|&w| w < HEADER_WORDS));
        assert_eq!(byte_offset(SCRATCH_ADDRESS) % 8, 0);
    }
}

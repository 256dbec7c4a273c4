//! Integration tests of the CUDA toolchain layer against the real tools (no GPU needed).
//!
//! They compile every kernel of the round-trip corpus with NVRTC, assemble the PTX with `ptxas`
//! for sm_70, sm_80 and sm_90, and check the SASS of sm_80/sm_90 cubins. Without the tools they
//! print a skip line and pass, unless `GPUWMM_REQUIRE_TOOLS=1` (then they fail); install the tools
//! with `scripts/setup-cuda-tools.sh`.
//!
//! `GPUWMM_BLESS_SASS=1` rewrites `tests/fixtures/sass/fences.sm_{80,90}.sass` from a live run.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gpuwmm::toolchain::{
    assemble, disassemble, parse_sass, tools_for_tests, CompileOptions, CudaTools, Nvrtc,
    NvrtcError, PtxCache, SassFunction, SassInstruction, ToolchainError,
};

const ARCHS: [&str; 3] = ["sm_70", "sm_80", "sm_90"];
/// cuobjdump/nvdisasm 13.x refuse sm_70 cubins, so SASS is checked on these.
const SASS_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// A kernel of the corpus: source file (from the repository root) and its entry point.
struct Kernel {
    path: &'static str,
    entry: &'static str,
}

const KERNELS: [Kernel; 4] = [
    Kernel {
        path: "apps/cbe-dot/kernel.cu",
        entry: "dot",
    },
    Kernel {
        path: "apps/cbe-ht/kernel.cu",
        entry: "ht_insert",
    },
    Kernel {
        path: "apps/sdk-red/kernel.cu",
        entry: "reduce",
    },
    Kernel {
        path: "tests/fixtures/kernels/shapes.cu",
        entry: "shapes",
    },
];

fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

fn read_source(relative: &str) -> String {
    std::fs::read_to_string(repo_path(relative)).unwrap()
}

/// NVRTC, loaded once for all tests of this file.
fn nvrtc(tools: &CudaTools) -> &'static Nvrtc {
    static NVRTC: OnceLock<Nvrtc> = OnceLock::new();
    NVRTC.get_or_init(|| Nvrtc::load(tools.require_nvrtc().unwrap()).unwrap())
}

/// PTX of `relative` with the default options (sm_70, line info), through a per-process cache.
fn compile(tools: &CudaTools, relative: &str) -> String {
    static CACHE: OnceLock<(tempfile::TempDir, PtxCache)> = OnceLock::new();
    let (_, cache) = CACHE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let cache = PtxCache::new(dir.path());
        (dir, cache)
    });
    let source = read_source(relative);
    let opts = CompileOptions::default();
    cache
        .get_or_compile(nvrtc(tools), &source, relative, &opts)
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
        .ptx
}

fn sass_of(tools: &CudaTools, relative: &str, arch: &str) -> Vec<SassFunction> {
    let cubin = assemble(tools, &compile(tools, relative), arch).unwrap();
    parse_sass(&disassemble(tools, &cubin).unwrap())
}

/// The SASS of kernel `name` (an app's file may also hold its check kernel).
fn only_function(functions: Vec<SassFunction>, name: &str) -> SassFunction {
    let names: Vec<String> = functions.iter().map(|f| f.name.clone()).collect();
    functions
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("no SASS function {name} among {names:?}"))
}

fn opcodes(f: &SassFunction, pred: impl Fn(&SassInstruction) -> bool) -> Vec<String> {
    f.filter(pred).iter().map(|i| i.opcode.clone()).collect()
}

#[test]
fn nvrtc_loads_and_reports_a_cuda_12_or_newer_version() {
    let tools = common::or_skip!(tools_for_tests());
    let (major, minor) = nvrtc(&tools).version();
    assert!(major >= 12, "NVRTC {major}.{minor}");
}

#[test]
fn kernels_compile_with_line_info_and_extern_c_entries() {
    let tools = common::or_skip!(tools_for_tests());
    for kernel in &KERNELS {
        let ptx = compile(&tools, kernel.path);
        assert!(ptx.contains(".target sm_70"), "{}", kernel.path);
        assert!(ptx.contains("\n\t.loc\t"), "{}: no .loc", kernel.path);
        let entry = format!(".visible .entry {}(", kernel.entry);
        assert!(ptx.contains(&entry), "{}: no {entry}", kernel.path);
        assert!(ptx.contains(kernel.path), "{}: .file names it", kernel.path);
    }
}

#[test]
fn kernels_assemble_for_sm_70_80_90() {
    let tools = common::or_skip!(tools_for_tests());
    for kernel in &KERNELS {
        let ptx = compile(&tools, kernel.path);
        for arch in ARCHS {
            let cubin = assemble(&tools, &ptx, arch)
                .unwrap_or_else(|e| panic!("{} for {arch}: {e}", kernel.path));
            assert!(cubin.starts_with(b"\x7fELF"), "{} {arch}", kernel.path);
        }
    }
}

#[test]
fn cbe_dot_locks_with_cas_and_exch_and_has_no_fence() {
    let tools = common::or_skip!(tools_for_tests());
    for arch in SASS_ARCHS {
        let dot = only_function(sass_of(&tools, "apps/cbe-dot/kernel.cu", arch), "dot");
        assert_eq!(dot.arch.as_deref(), Some(arch));
        let atomics = opcodes(&dot, SassInstruction::is_atomic);
        assert_eq!(
            atomics,
            ["ATOMG.E.CAS.STRONG.GPU", "ATOMG.E.EXCH.STRONG.GPU"],
            "{arch}"
        );
        assert_eq!(dot.fence_count(), 0, "{arch}");
        // The critical section: a plain load and a plain store of *result.
        assert_eq!(opcodes(&dot, SassInstruction::is_global_store), ["STG.E"]);
    }
}

#[test]
fn cbe_ht_locks_per_bucket_and_has_no_fence() {
    let tools = common::or_skip!(tools_for_tests());
    for arch in SASS_ARCHS {
        let ht = only_function(sass_of(&tools, "apps/cbe-ht/kernel.cu", arch), "ht_insert");
        let atomics: Vec<String> = opcodes(&ht, SassInstruction::is_atomic);
        assert_eq!(
            atomics,
            [
                "ATOMG.E.ADD.STRONG.GPU",
                "ATOMG.E.CAS.STRONG.GPU",
                "ATOMG.E.EXCH.STRONG.GPU"
            ],
            "{arch}"
        );
        assert_eq!(ht.fence_count(), 0, "{arch}");
        assert_eq!(ht.filter(SassInstruction::is_global_store).len(), 3);
    }
}

#[test]
fn sdk_red_has_exactly_one_fence_before_its_ticket() {
    let tools = common::or_skip!(tools_for_tests());
    for arch in SASS_ARCHS {
        let red = only_function(sass_of(&tools, "apps/sdk-red/kernel.cu", arch), "reduce");
        assert_eq!(opcodes(&red, SassInstruction::is_fence), ["MEMBAR.SC.GPU"]);
        let fence = red.filter(SassInstruction::is_fence)[0].offset;
        let ticket = red.filter(SassInstruction::is_atomic);
        assert_eq!(ticket.len(), 1, "{arch}");
        assert_eq!(ticket[0].opcode, "ATOMG.E.INC.STRONG.GPU");
        assert!(fence < ticket[0].offset, "{arch}: fence after the ticket");
        // The last block reads the partial sums through volatile loads.
        assert!(red
            .filter(SassInstruction::is_global_load)
            .iter()
            .any(|i| i.opcode == "LDG.E.STRONG.SYS"));
    }
}

#[test]
fn shapes_reads_every_geometry_register() {
    let tools = common::or_skip!(tools_for_tests());
    let ptx = compile(&tools, "tests/fixtures/kernels/shapes.cu");
    for register in [
        "%tid.x",
        "%tid.y",
        "%tid.z",
        "%ntid.x",
        "%ntid.y",
        "%ntid.z",
        "%ctaid.x",
        "%ctaid.y",
        "%nctaid.x",
    ] {
        assert!(ptx.contains(register), "shapes PTX lacks {register}");
    }
    assert!(ptx.contains(".extern .shared"), "no dynamic shared memory");
    assert!(ptx.contains("bar.sync"), "no __syncthreads()");
}

/// Live check of the fence table in `src/toolchain/sass.rs` (and of its fixtures).
#[test]
fn fence_kinds_become_membar_on_sm_80_and_sm_90() {
    let tools = common::or_skip!(tools_for_tests());
    let ptx = compile(&tools, "tests/fixtures/sass/fences.cu");
    for arch in SASS_ARCHS {
        let cubin = assemble(&tools, &ptx, arch).unwrap();
        let text = disassemble(&tools, &cubin).unwrap();
        bless_or_compare(arch, &text);
        let functions = parse_sass(&text);
        let fences = functions.iter().find(|f| f.name == "fences").unwrap();
        assert_eq!(
            opcodes(fences, SassInstruction::is_fence),
            [
                "MEMBAR.SC.GPU",  // fence.sc.gpu
                "MEMBAR.SC.GPU",  // membar.gl
                "MEMBAR.ALL.GPU", // fence.acq_rel.gpu
                "MEMBAR.SC.CTA",  // membar.cta
                "MEMBAR.SC.SYS",  // fence.sc.sys
                "MEMBAR.SC.SYS",  // membar.sys
                "MEMBAR.ALL.SYS", // fence.acq_rel.sys
                "MEMBAR.SC.CTA",  // fence.sc.cta
                "MEMBAR.ALL.CTA", // fence.acq_rel.cta
                "MEMBAR.SC.GPU",  // __threadfence()
            ],
            "{arch}"
        );
        let accesses = functions.iter().find(|f| f.name == "accesses").unwrap();
        let strong = opcodes(accesses, SassInstruction::is_strong_sys);
        assert_eq!(strong, ["STG.E.STRONG.SYS", "LDG.E.STRONG.SYS"], "{arch}");
    }
}

/// With `GPUWMM_BLESS_SASS=1`, rewrites the fixture; otherwise checks that the fixture's
/// instructions (offsets and text) are those of the live run.
fn bless_or_compare(arch: &str, text: &str) {
    let fixture = repo_path(&format!("tests/fixtures/sass/fences.{arch}.sass"));
    if std::env::var("GPUWMM_BLESS_SASS").is_ok_and(|v| v == "1") {
        std::fs::write(&fixture, text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&fixture).unwrap();
    assert_eq!(
        parse_sass(&committed),
        parse_sass(text),
        "{} is stale: rerun with GPUWMM_BLESS_SASS=1",
        fixture.display()
    );
}

#[test]
fn sm_70_cubins_cannot_be_disassembled_by_cuobjdump_13() {
    let tools = common::or_skip!(tools_for_tests());
    let cubin = assemble(&tools, &compile(&tools, "apps/cbe-dot/kernel.cu"), "sm_70").unwrap();
    match disassemble(&tools, &cubin) {
        // A toolkit older than 13 still disassembles sm_70.
        Ok(text) => assert!(text.contains("sm_70")),
        Err(ToolchainError::Cuobjdump { stderr, .. }) => {
            assert!(stderr.contains("SM70"), "{stderr}")
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[test]
fn ptxas_errors_carry_ptx_line_numbers() {
    let tools = common::or_skip!(tools_for_tests());
    let ptx = compile(&tools, "apps/cbe-dot/kernel.cu").replace("atom.global.cas", "atom.bogus");
    let err = assemble(&tools, &ptx, "sm_80").unwrap_err();
    let ToolchainError::Ptxas { arch, stderr, .. } = &err else {
        panic!("unexpected error: {err}");
    };
    assert_eq!(arch, "sm_80");
    assert!(stderr.contains("input.ptx, line "), "{stderr}");
    assert!(!stderr.contains("/tmp/"), "scratch path leaked: {stderr}");
}

#[test]
fn garbage_cubin_is_an_error() {
    let tools = common::or_skip!(tools_for_tests());
    let err = disassemble(&tools, b"not a cubin").unwrap_err();
    assert!(matches!(err, ToolchainError::Cuobjdump { .. }), "{err}");
}

#[test]
fn nvrtc_compile_errors_return_the_log() {
    let tools = common::or_skip!(tools_for_tests());
    let source = "extern \"C\" __global__ void k(int *x) { *x = undeclared; }\n";
    let err = nvrtc(&tools)
        .compile(source, "broken.cu", &CompileOptions::default())
        .unwrap_err();
    let NvrtcError::Compile { file, log } = &err else {
        panic!("unexpected error: {err}");
    };
    assert_eq!(file, "broken.cu");
    assert!(log.contains("broken.cu(1)"), "{log}");
    assert!(log.contains("undeclared"), "{log}");
}

#[test]
fn nvrtc_rejects_an_unknown_architecture() {
    let tools = common::or_skip!(tools_for_tests());
    let opts = CompileOptions {
        arch: "sm_11".into(),
        ..CompileOptions::default()
    };
    let err = nvrtc(&tools)
        .compile("__global__ void k() {}", "k.cu", &opts)
        .unwrap_err();
    assert!(matches!(err, NvrtcError::Options { .. }), "{err}");
}

/// NVRTC loaded through a lone symlink (no builtins beside it, so `$ORIGIN` does not help) in a
/// fresh process without `LD_LIBRARY_PATH`: it still compiles, because `Nvrtc::load` preloads
/// `libnvrtc-builtins` from the library's real folder. A fresh process, because in this one other
/// tests have already made NVRTC load its builtins.
#[test]
fn nvrtc_finds_its_builtins_without_ld_library_path() {
    common::or_skip!(tools_for_tests());
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "nvrtc_through_a_lone_symlink", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// Run by [`nvrtc_finds_its_builtins_without_ld_library_path`] in a process of its own.
#[test]
#[ignore = "run in a fresh process by nvrtc_finds_its_builtins_without_ld_library_path"]
fn nvrtc_through_a_lone_symlink() {
    let tools = common::or_skip!(tools_for_tests());
    let real = std::fs::canonicalize(tools.require_nvrtc().unwrap()).unwrap();
    let lone = tempfile::tempdir().unwrap();
    let link = lone.path().join(real.file_name().unwrap());
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let loaded = Nvrtc::load(&link).unwrap();
    let ptx = loaded
        .compile(
            "extern \"C\" __global__ void k(int *x) { *x = 1; }",
            "k.cu",
            &CompileOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(ptx.ptx.contains(".entry k("));
}

//! Applications: the registry, the manifest format and its errors, the launcher hook, and every
//! kernel through NVRTC and ptxas (sm_70, sm_80, sm_90). The simulator runs are in
//! `tests/apps_sim.rs`.

mod common;

use common::*;
use gpuwmm::apps::manifest::Manifest;
use gpuwmm::apps::{
    builtin_apps, find_app, linear, load_app_dir, App, AppError, DirectLauncher, KernelSource,
    Launch, Launcher, LoadedApp, ManifestError, Problem, RunContext, RunOptions, Size, Verdict,
    DEFAULT_ARCH,
};
use gpuwmm::backend::{
    Backend, BackendError, BackendKind, Buffer, Device, DeviceInfo, KernelArg, KernelLaunch,
    KernelStats, LaunchConfig, ModuleId,
};
use gpuwmm::ptx::passes::fences::{fence_sites, Granularity};
use gpuwmm::ptx::{print, Module};
use gpuwmm::toolchain::tools_for_tests;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// A backend with memory but no execution: kernels do nothing, launches are recorded.

#[derive(Debug, Clone, PartialEq)]
struct Recorded {
    module: ModuleId,
    kernel: String,
    config: LaunchConfig,
    args: Vec<KernelArg>,
}

struct MemBackend {
    info: DeviceInfo,
    memory: HashMap<u64, Vec<u8>>,
    next: u64,
    modules: Vec<String>,
    launches: Vec<Recorded>,
    freed: usize,
}

impl MemBackend {
    fn new() -> MemBackend {
        MemBackend {
            info: DeviceInfo {
                backend: BackendKind::Sim,
                name: "memory only".into(),
                sm_count: 1,
                max_threads_per_sm: 64,
                max_resident_threads: 64,
                l2_bytes: 0,
                compute_capability: (7, 0),
                energy_counter: false,
                power_readable: false,
                driver: "none".into(),
            },
            memory: HashMap::new(),
            next: 1,
            modules: Vec::new(),
            launches: Vec::new(),
            freed: 0,
        }
    }

    fn bytes(&mut self, b: Buffer) -> Result<&mut Vec<u8>, BackendError> {
        self.memory
            .get_mut(&b.id)
            .ok_or_else(|| BackendError::Fault(format!("buffer {} is not allocated", b.id)))
    }
}

impl Backend for MemBackend {}

impl Device for MemBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn alloc(&mut self, bytes: usize) -> Result<Buffer, BackendError> {
        let id = self.next;
        self.next += 1;
        self.memory.insert(id, vec![0; bytes]);
        Ok(Buffer {
            id,
            address: id << 32,
            bytes,
        })
    }
    fn free(&mut self, buffer: Buffer) -> Result<(), BackendError> {
        self.memory.remove(&buffer.id);
        self.freed += 1;
        Ok(())
    }
    fn copy_in(&mut self, b: Buffer, offset: usize, data: &[u8]) -> Result<(), BackendError> {
        self.bytes(b)?[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }
    fn copy_out(&mut self, b: Buffer, offset: usize, out: &mut [u8]) -> Result<(), BackendError> {
        let len = out.len();
        out.copy_from_slice(&self.bytes(b)?[offset..offset + len]);
        Ok(())
    }
    fn memset(&mut self, b: Buffer, byte: u8) -> Result<(), BackendError> {
        self.bytes(b)?.fill(byte);
        Ok(())
    }
    fn load_module(&mut self, ptx: &str) -> Result<ModuleId, BackendError> {
        self.modules.push(ptx.to_string());
        Ok(ModuleId(self.modules.len() - 1))
    }
    fn module_global(&mut self, _module: ModuleId, name: &str) -> Result<Buffer, BackendError> {
        Err(BackendError::NoVariable(name.to_string()))
    }
    fn start(&mut self, launch: KernelLaunch<'_>) -> Result<(), BackendError> {
        if launch.kernel == "hang" {
            return Err(BackendError::Timeout(Duration::from_secs(1)));
        }
        self.launches.push(Recorded {
            module: launch.module,
            kernel: launch.kernel.to_string(),
            config: *launch.config,
            args: launch.args.to_vec(),
        });
        Ok(())
    }
    fn synchronize(&mut self, _deadline: Duration) -> Result<(), BackendError> {
        Ok(())
    }
    fn last_kernel_stats(&self) -> KernelStats {
        KernelStats::default()
    }
}

/// An app with two launches and a host check that passes when the first word of its buffer
/// is 0 (nothing runs kernels on a [`MemBackend`], so it always passes there).
struct TwoLaunches {
    source: KernelSource,
}

impl TwoLaunches {
    fn new() -> TwoLaunches {
        TwoLaunches {
            source: KernelSource::single(PathBuf::from("two.cu"), String::new()),
        }
    }

    /// The app's buffers on `backend`, its (empty) module as it is.
    fn load(&self, backend: &mut MemBackend) -> LoadedApp<'_> {
        LoadedApp::load(self, backend, &Module::default(), DEFAULT_ARCH, Size::Sim).unwrap()
    }
}

impl App for TwoLaunches {
    fn name(&self) -> &str {
        "two-launches"
    }
    fn description(&self) -> &str {
        "test app"
    }
    fn postcondition(&self) -> &str {
        "word 0 is 0"
    }
    fn source(&self) -> &KernelSource {
        &self.source
    }
    fn kernels(&self, _size: Size) -> Vec<String> {
        vec!["first".into(), "second".into()]
    }
    fn parameters(&self, _size: Size) -> Vec<(String, i64)> {
        vec![("blocks".into(), 3)]
    }
    fn module(&self, _arch: &str, _size: Size) -> Result<Module, AppError> {
        Ok(Module::default())
    }
    fn run(&self, ctx: &mut RunContext<'_>) -> Result<Verdict, AppError> {
        let data = ctx.upload("data", &[0u32, 5, 6])?;
        ctx.launch(
            "first",
            linear(3, 32),
            vec![KernelArg::ptr(data), KernelArg::I32(3)],
        )?;
        ctx.launch("second", linear(1, 64), vec![KernelArg::ptr(data)])?;
        if ctx.size() == Size::Gpu {
            ctx.launch("hang", linear(1, 1), vec![])?;
        }
        let words: Vec<u32> = ctx.download("data", data, 3)?;
        Ok(if words == [0, 5, 6] {
            Verdict::Pass
        } else {
            Verdict::fail(format!("data is {words:?}"))
        })
    }
}

/// What a stress harness does to a launch: swap the module, grow the grid, append an argument.
#[derive(Default)]
struct Harness {
    module: Option<ModuleId>,
    seen: Vec<Launch>,
    after: usize,
}

impl Launcher for Harness {
    fn launch(
        &mut self,
        backend: &mut dyn Backend,
        launch: &mut Launch,
    ) -> Result<(), BackendError> {
        self.seen.push(launch.clone());
        let module = match self.module {
            Some(m) => m,
            None => *self.module.insert(backend.load_module("// harnessed")?),
        };
        let control = backend.alloc(16)?;
        launch.module = module;
        launch.config.grid.0 += 2;
        launch.args.push(KernelArg::ptr(control));
        launch.start(backend)
    }
    fn after(&mut self, _backend: &mut dyn Backend, launch: &Launch) -> Result<(), BackendError> {
        assert_eq!(
            launch.config.grid.0,
            self.seen[launch.index].config.grid.0 + 2
        );
        self.after += 1;
        Ok(())
    }
}

#[test]
fn launcher_sees_every_app_launch_and_may_rewrite_it() {
    let app = TwoLaunches::new();
    let mut backend = MemBackend::new();
    let loaded = app.load(&mut backend);
    let mut harness = Harness::default();
    let verdict = loaded
        .run(&mut backend, &mut harness, &RunOptions::new(Size::Sim, 1))
        .unwrap();
    assert_eq!(verdict, Verdict::Pass);
    // The hook saw what the app asked for ...
    let asked: Vec<(usize, &str, u32)> = harness
        .seen
        .iter()
        .map(|l| (l.index, l.kernel.as_str(), l.config.grid.0))
        .collect();
    assert_eq!(asked, vec![(0, "first", 3), (1, "second", 1)]);
    assert_eq!(harness.seen[0].module, loaded.module());
    assert_eq!(harness.seen[0].args[1], KernelArg::I32(3));
    assert_eq!(harness.after, 2);
    // ... and the backend got what the hook made of it.
    let harnessed = harness.module.unwrap();
    assert!(backend.launches.iter().all(|l| l.module == harnessed));
    assert_eq!(backend.launches[0].config.grid, (5, 1, 1));
    assert_eq!(backend.launches[0].args.len(), 3);
    assert_eq!(backend.launches[1].args.len(), 2);
    // The app's buffer was freed after the run (the harness's control blocks are its own).
    assert_eq!(backend.freed, 1);
}

#[test]
fn backend_errors_come_back_typed_and_buffers_are_still_freed() {
    let app = TwoLaunches::new();
    let mut backend = MemBackend::new();
    let loaded = app.load(&mut backend);
    let err = loaded
        .run(
            &mut backend,
            &mut DirectLauncher,
            &RunOptions::new(Size::Gpu, 1),
        )
        .unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("launch 2 (kernel hang)"), "{err}");
    assert_eq!(backend.freed, 1);
}

// ---------------------------------------------------------------------------------------------
// The registry.

#[test]
fn registry_has_the_case_studies_and_unknown_names_list_them() {
    let names: Vec<String> = builtin_apps()
        .unwrap()
        .iter()
        .map(|a| a.name().to_string())
        .collect();
    let table_4_order = "cbe-ht cbe-dot ct-octree tpo-tm ls-bh ls-bh-nf sdk-red sdk-red-nf \
                         cub-scan cub-scan-nf cccl-scan cccl-scan-nf cccl-scan-rlx";
    assert_eq!(names.join(" "), table_4_order);
    for app in builtin_apps().unwrap() {
        assert!(!app.description().is_empty() && !app.postcondition().is_empty());
        assert!(app.source().path.ends_with("kernel.cu"));
        assert!(
            app.source().path.exists(),
            "{}",
            app.source().path.display()
        );
        for size in Size::ALL {
            assert!(!app.parameters(size).is_empty());
        }
    }
    let err = find_app("cbe-dott").err().unwrap();
    assert!(matches!(err, AppError::UnknownApp { .. }));
    let message = err.to_string();
    assert!(message.contains("'cbe-dott'"), "{message}");
    assert!(
        message
            .contains("cbe-dot, ct-octree, tpo-tm, ls-bh, ls-bh-nf, sdk-red, sdk-red-nf, cub-scan"),
        "{message}"
    );
}

#[test]
fn variants_share_the_source_and_inputs_of_their_base() {
    for (base, nf) in [
        ("sdk-red", "sdk-red-nf"),
        ("cub-scan", "cub-scan-nf"),
        ("ls-bh", "ls-bh-nf"),
    ] {
        let (base, nf) = (find_app(base).unwrap(), find_app(nf).unwrap());
        assert_eq!(base.source(), nf.source());
        assert_eq!(base.kernels(Size::Sim), nf.kernels(Size::Sim));
        assert_eq!(base.parameters(Size::Sim), nf.parameters(Size::Sim));
        assert!(nf.description().contains("strip-fences"));
    }
}

// ---------------------------------------------------------------------------------------------
// Kernels through NVRTC and ptxas.

#[test]
fn every_app_compiles_and_assembles_for_sm70_sm80_sm90() {
    let tools = common::or_skip!(tools_for_tests());
    for app in builtin_apps().unwrap() {
        let module = app
            .module(DEFAULT_ARCH, Size::Sim)
            .unwrap_or_else(|e| panic!("{e}"));
        let kernels: Vec<String> = module.kernels().map(|k| k.name.clone()).collect();
        assert_eq!(
            kernels,
            app.kernels(Size::Sim),
            "{}: module kernels",
            app.name()
        );
        let check = app.check_module(DEFAULT_ARCH, Size::Sim).unwrap();
        for arch in ARCHS {
            assemble_or_panic(&tools, &module, arch, app.name());
            if let Some(check) = &check {
                assemble_or_panic(&tools, check, arch, app.name());
            }
        }
        // Fence sites only ever cover app kernels.
        for site in fence_sites(&module, Granularity::SourceLine) {
            assert!(
                app.kernels(Size::Sim).contains(&site.function),
                "{}",
                site.function
            );
        }
    }
}

#[test]
fn nf_variants_have_no_fences_and_the_originals_have_theirs() {
    common::or_skip!(tools_for_tests());
    let fences = |name: &str| {
        find_app(name)
            .unwrap()
            .module(DEFAULT_ARCH, Size::Sim)
            .unwrap()
            .fence_count()
    };
    assert_eq!(fences("sdk-red"), 1);
    assert_eq!(fences("cub-scan"), 2);
    assert_eq!(fences("sdk-red-nf"), 0);
    assert_eq!(fences("cub-scan-nf"), 0);
    assert_eq!(fences("cbe-dot"), 0);
    assert_eq!(fences("cbe-ht"), 0);
    assert_eq!(fences("ct-octree"), 0);
    assert_eq!(fences("tpo-tm"), 0);
    assert_eq!(fences("ls-bh"), 3);
    assert_eq!(fences("ls-bh-nf"), 0);
}

#[test]
fn check_kernels_are_not_in_the_app_module_but_in_the_check_module() {
    common::or_skip!(tools_for_tests());
    let app = find_app("sdk-red").unwrap();
    let module = print(&app.module(DEFAULT_ARCH, Size::Sim).unwrap());
    let check = print(&app.check_module(DEFAULT_ARCH, Size::Sim).unwrap().unwrap());
    assert!(!module.contains(".entry reduce_check"));
    assert!(check.contains(".entry reduce_check"));
}

#[test]
fn manifest_check_kernel_runs_from_the_check_module_without_the_launcher() {
    common::or_skip!(tools_for_tests());
    let app = find_app("cub-scan").unwrap();
    let mut backend = MemBackend::new();
    let module = app.module(DEFAULT_ARCH, Size::Sim).unwrap();
    let loaded =
        LoadedApp::load(app.as_ref(), &mut backend, &module, DEFAULT_ARCH, Size::Sim).unwrap();
    let mut harness = Harness::default();
    // Nothing executes on a MemBackend, so the status word keeps the value set before the
    // check kernel: no verdict, and never a pass.
    let result = loaded.run(&mut backend, &mut harness, &RunOptions::new(Size::Sim, 3));
    assert!(
        matches!(result, Err(AppError::ResultNotWritten { .. })),
        "{result:?}"
    );
    let seen: Vec<&str> = harness.seen.iter().map(|l| l.kernel.as_str()).collect();
    assert_eq!(seen, ["scan_init", "scan"]);
    let last = backend.launches.last().unwrap();
    assert_eq!(last.kernel, "scan_check");
    assert_eq!(last.module, ModuleId(1), "the check module, loaded second");
    assert_eq!(last.config, linear(1, 1));
    // scan: grid = tiles, block = threads, six arguments, n last.
    let scan = &harness.seen[1];
    assert_eq!(scan.config, linear(4, 32));
    assert_eq!(scan.args.len(), 6);
    assert_eq!(scan.args[5], KernelArg::I32(512));
}

// ---------------------------------------------------------------------------------------------
// Manifest errors: each names the file and the field.

const GOOD: &str = r#"
name = "toy"
description = "a toy"
postcondition = "status is 0"

[sizes]
sim = { n = 64, blocks = 2, threads = 32 }
gpu = { n = 4096, blocks = 16, threads = 256 }

[[buffers]]
name = "data"
type = "u32"
length = "n"
init = { random = [0, 9] }

[[buffers]]
name = "sums"
type = "f32"
length = "blocks*threads"
init = "iota"

[[buffers]]
name = "status"
type = "u32"
length = 2

[[launches]]
kernel = "toy"
grid = "blocks"
block = ["threads", 1]
shared_bytes = "threads*4"
args = ["data", "sums", "n", { u32 = "n/2" }, { f32 = 0.5 }, { u64 = 7 }]

[check]
kernel = "toy_check"
args = ["data", "status"]
result = "status"
codes = { 1 = "data is wrong" }
"#;

/// The kernels of the GOOD manifest: six parameters for `toy`, two for `toy_check`.
const TOY_KERNEL: &str = r#"
extern "C" __global__ void toy(unsigned *data, float *sums, int n, unsigned half, float x,
                               unsigned long long y) { if (threadIdx.x == 0) data[0] = half; }
extern "C" __global__ void toy_check(const unsigned *data, unsigned *status) { status[0] = 0; }
"#;

fn parse(text: &str) -> Result<Manifest, ManifestError> {
    Manifest::parse(Path::new("/apps/toy/app.toml"), text)
}

/// `message` without the line number after `app.toml` (`app.toml:12: x` → `app.toml: x`).
fn unlocated(message: &str) -> String {
    let (file, rest) = message.split_once("app.toml").unwrap();
    let rest = rest.trim_start_matches(':');
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    format!("{file}app.toml{rest}")
}

/// Parses GOOD with `from` replaced by `to`, expecting an error about `field`.
fn bad(from: &str, to: &str, field: &str) -> (Problem, String) {
    assert!(GOOD.contains(from), "{from}");
    let err = parse(&GOOD.replacen(from, to, 1)).unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("/apps/toy/app.toml"), "{message}");
    assert_eq!(err.field(), Some(field), "{message}");
    assert!(message.contains(field), "{message}");
    (err.problem().unwrap().clone(), message)
}

#[test]
fn a_good_manifest_resolves_for_both_sizes() {
    let m = parse(GOOD).unwrap();
    assert_eq!(m.sim.lengths, vec![64, 64, 2]);
    assert_eq!(m.gpu.lengths, vec![4096, 4096, 2]);
    let sim = &m.sim.launches[0];
    assert_eq!(sim.config.grid, (2, 1, 1));
    assert_eq!(sim.config.block, (32, 1, 1));
    assert_eq!(sim.config.shared_bytes, 128);
    assert_eq!(m.gpu.launches[0].config.block, (256, 1, 1));
    use gpuwmm::apps::manifest::PlannedArg::*;
    assert_eq!(
        sim.args,
        vec![
            Buffer(0),
            Buffer(1),
            Scalar(KernelArg::I32(64)),
            Scalar(KernelArg::U32(32)),
            Scalar(KernelArg::F32(0.5)),
            Scalar(KernelArg::U64(7))
        ]
    );
    assert_eq!(m.sim.check.config, linear(1, 1));
    assert_eq!(m.app_kernels(), vec!["toy".to_string()]);
}

#[test]
fn manifest_syntax_and_missing_keys() {
    let err = parse("name = ").unwrap_err();
    assert!(matches!(err, ManifestError::Syntax { .. }));
    assert!(
        err.to_string()
            .starts_with("/apps/toy/app.toml: invalid TOML"),
        "{err}"
    );

    let (p, _) = bad("name = \"toy\"\n", "", "name");
    assert!(matches!(p, Problem::Missing { .. }));
    let (p, _) = bad(
        "[sizes]\nsim = { n = 64, blocks = 2, threads = 32 }\n",
        "[sizes]\n",
        "sizes.sim",
    );
    assert!(matches!(p, Problem::Missing { .. }));
    let (p, _) = bad("length = \"n\"\n", "", "buffers[0].length");
    assert!(matches!(p, Problem::Missing { .. }));
    let (p, _) = bad("kernel = \"toy\"\n", "", "launches[0].kernel");
    assert!(matches!(p, Problem::Missing { .. }));
    let (p, _) = bad("result = \"status\"\n", "", "check.result");
    assert!(matches!(p, Problem::Missing { .. }));
}

#[test]
fn manifest_unknown_keys_and_wrong_types() {
    let (p, m) = bad("length = \"n\"", "lenght = \"n\"", "buffers[0].lenght");
    assert!(matches!(p, Problem::UnknownKey { .. }), "{m}");
    assert!(m.contains("name, type, length, init"), "{m}");
    let (p, _) = bad("description", "descripton", "descripton");
    assert!(matches!(p, Problem::UnknownKey { .. }));
    let (p, m) = bad("grid = \"blocks\"", "grid = true", "launches[0].grid");
    assert!(matches!(p, Problem::WrongType { .. }), "{m}");
    assert!(m.contains("the boolean true"), "{m}");
    let (p, _) = bad("n = 64,", "n = \"64\",", "sizes.sim.n");
    assert!(matches!(p, Problem::WrongType { .. }));
}

#[test]
fn manifest_bad_types_buffers_and_parameters() {
    let (p, m) = bad("type = \"u32\"", "type = \"f16\"", "buffers[0].type");
    assert_eq!(
        p,
        Problem::BadElementType {
            found: "f16".into()
        }
    );
    assert!(m.contains("u32, i32, f32 or u64"), "{m}");

    let (p, m) = bad(
        "args = [\"data\", \"sums\"",
        "args = [\"data\", \"sumz\"",
        "launches[0].args[1]",
    );
    assert!(matches!(p, Problem::UnknownBufferOrParameter { .. }), "{m}");
    assert!(
        m.contains("'sumz'") && m.contains("data, sums, status"),
        "{m}"
    );

    let (p, m) = bad("result = \"status\"", "result = \"stat\"", "check.result");
    assert!(matches!(p, Problem::UnknownBuffer { .. }), "{m}");

    let (p, m) = bad(
        "length = \"blocks*threads\"",
        "length = \"blocks*warps\"",
        "buffers[1].length",
    );
    assert!(matches!(p, Problem::UnknownParameter { .. }), "{m}");
    assert!(
        m.contains("'warps'") && m.contains("blocks, n, threads"),
        "{m}"
    );

    // A parameter only one size defines.
    let (p, m) = bad(
        "gpu = { n = 4096,",
        "gpu = { m = 4096,",
        "buffers[0].length",
    );
    assert!(
        matches!(
            p,
            Problem::UnknownParameter {
                size: Size::Gpu,
                ..
            }
        ),
        "{m}"
    );

    let (p, m) = bad(
        "{ u32 = \"n/2\" }",
        "{ u16 = \"n/2\" }",
        "launches[0].args[3].u16",
    );
    assert!(matches!(p, Problem::BadElementType { .. }), "{m}");
}

#[test]
fn manifest_bad_values() {
    let (p, m) = bad(
        "grid = \"blocks\"",
        "grid = \"blocks-2\"",
        "launches[0].grid",
    );
    assert!(matches!(p, Problem::BadValue { .. }), "{m}");
    assert!(m.contains("is 0 at size sim"), "{m}");
    let (p, _) = bad(
        "grid = \"blocks\"",
        "grid = \"blocks*\"",
        "launches[0].grid",
    );
    assert!(matches!(p, Problem::BadExpression { .. }));
    let (p, m) = bad(
        "grid = \"blocks\"",
        "grid = \"n/(blocks-2)\"",
        "launches[0].grid",
    );
    assert!(m.contains("division by zero"), "{m}: {p:?}");
    bad(
        "random = [0, 9]",
        "random = [9, 0]",
        "buffers[0].init.random",
    );
    bad(
        "random = [0, 9]",
        "random = [-1, 9]",
        "buffers[0].init.random",
    );
    bad(
        "random = [0, 9]",
        "random_float = [0, 1]",
        "buffers[0].init.random_float",
    );
    bad("init = \"iota\"", "init = \"ones\"", "buffers[1].init");
    bad("length = 2", "length = 0", "buffers[2].length");
    bad("length = 2", "length = 99999999999", "buffers[2].length");
    bad("name = \"sums\"", "name = \"data\"", "buffers[1].name");
    bad("name = \"sums\"", "name = \"n\"", "buffers[1].name");
    bad(
        "1 = \"data is wrong\"",
        "0 = \"data is wrong\"",
        "check.codes.0",
    );
    let (_, m) = bad(
        "1 = \"data is wrong\"",
        "3735928559 = \"data is wrong\"",
        "check.codes.3735928559",
    );
    assert!(m.contains("0xdeadbeef"), "{m}");
    bad(
        "{ u32 = \"n/2\" }",
        "{ u32 = \"0-n\" }",
        "launches[0].args[3]",
    );
    let (_, m) = bad(
        "type = \"u32\"\nlength = 2",
        "type = \"f32\"\nlength = 2",
        "check.result",
    );
    assert!(m.contains("must be u32 or i32"), "{m}");
}

#[test]
fn manifest_kernel_names_and_parameter_counts_are_checked_against_the_source() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    std::fs::write(dir.path().join("kernel.cu"), TOY_KERNEL).unwrap();
    let write = |text: &str| std::fs::write(dir.path().join("app.toml"), text).unwrap();

    write(GOOD);
    let app = load_app_dir(dir.path()).unwrap();
    assert_eq!(app.name(), "toy");
    app.module(DEFAULT_ARCH, Size::Sim).unwrap();

    let module_error = |text: &str| {
        write(text);
        let app = load_app_dir(dir.path()).unwrap();
        let err = app.module(DEFAULT_ARCH, Size::Sim).err().unwrap();
        match err {
            AppError::Manifest(e) => e,
            other => panic!("expected a manifest error, got {other}"),
        }
    };
    let e = module_error(&GOOD.replace("kernel = \"toy\"", "kernel = \"toi\""));
    assert_eq!(e.field(), Some("launches[0].kernel"));
    assert!(e.to_string().contains("kernels: toy, toy_check"), "{e}");
    let e = module_error(&GOOD.replace(", { u64 = 7 }]", "]"));
    assert_eq!(e.field(), Some("launches[0].args"));
    assert!(e.to_string().contains("takes 6 parameters, but 5"), "{e}");
    let e = module_error(&GOOD.replace("{ u64 = 7 }", "7"));
    assert_eq!(e.field(), Some("launches[0].args[5]"));
    let e = module_error(&GOOD.replace("kernel = \"toy_check\"", "kernel = \"check\""));
    assert_eq!(e.field(), Some("check.kernel"));

    // A folder without the files.
    let empty = tempfile::tempdir().unwrap();
    let err = load_app_dir(empty.path()).err().unwrap();
    assert!(err.to_string().contains("app.toml"), "{err}");
    std::fs::write(empty.path().join("app.toml"), GOOD).unwrap();
    let err = load_app_dir(empty.path()).err().unwrap();
    assert!(err.to_string().contains("kernel.cu"), "{err}");
}

/// The error lines `apps/README.md` shows, each produced to the letter from the test manifest
/// (a guard for any rewrite of the manifest reader: the documented messages must not change).
#[test]
fn every_manifest_error_in_the_apps_readme_is_produced_as_written() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/README.md"))
            .unwrap();
    let prefix = "apps/toy/app.toml:";
    let documented: Vec<&str> = readme.lines().filter(|l| l.starts_with(prefix)).collect();
    /// `apps/toy/app.toml:32: field: problem` without `apps/toy/app.toml:32: `.
    fn after_location(l: &str) -> &str {
        let rest = l["apps/toy/app.toml:".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
        rest.trim_start_matches(':').trim_start()
    }
    assert_eq!(documented.len(), 7, "{documented:#?}");
    // (field, mutation of GOOD, needs the compiled kernels)
    let cases: [(&str, &str, &str, bool); 7] = [
        (
            "launches[0].args[1]",
            "args = [\"data\", \"sums\"",
            "args = [\"data\", \"sumz\"",
            false,
        ),
        ("buffers[0].type", "type = \"u32\"", "type = \"f16\"", false),
        (
            "buffers[1].length",
            "length = \"blocks*threads\"",
            "length = \"warps\"",
            false,
        ),
        (
            "buffers[0].lenght",
            "length = \"n\"",
            "lenght = \"n\"",
            false,
        ),
        ("check.result", "result = \"status\"\n", "", false),
        (
            "launches[0].kernel",
            "kernel = \"toy\"",
            "kernel = \"toi\"",
            true,
        ),
        ("launches[0].args", ", { u64 = 7 }]", "]", true),
    ];
    let tools = tools_for_tests();
    for (field, from, to, compiled) in cases {
        let line = documented
            .iter()
            .find(|l| after_location(l).starts_with(&format!("{field}: ")))
            .unwrap_or_else(|| panic!("apps/README.md shows no error for {field}"));
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        if !compiled {
            let err = Manifest::parse(Path::new("apps/toy/app.toml"), &text).unwrap_err();
            assert_eq!(err.to_string(), *line);
            continue;
        }
        if tools.is_none() {
            continue;
        }
        let err = compiled_manifest_error(&text);
        let message = err.to_string();
        let tail = &line["apps/toy/".len()..];
        assert!(message.ends_with(tail), "{message}\nvs {line}");
    }
}

/// The manifest error `text` gives once checked against the test kernels (NVRTC needed).
fn compiled_manifest_error(text: &str) -> ManifestError {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kernel.cu"), TOY_KERNEL).unwrap();
    std::fs::write(dir.path().join("app.toml"), text).unwrap();
    let app = load_app_dir(dir.path()).unwrap();
    match app.module(DEFAULT_ARCH, Size::Sim).err().unwrap() {
        AppError::Manifest(e) => e,
        other => panic!("expected a manifest error, got {other}"),
    }
}

/// The errors serde finds (unknown keys, and tables, arrays or strings of the wrong type) read
/// to the letter as those of the hand-written reader they replaced, at the same field paths.
#[test]
fn manifest_shape_errors_found_by_serde_keep_their_wording() {
    let cases: [(&str, &str, &str); 11] = [
        (
            "description = \"a toy\"",
            "description = \"a toy\"\nsim = 1",
            "sim: unknown key (allowed here: name, description, postcondition, source, sizes, \
             buffers, launches, check)",
        ),
        (
            "[sizes]\n",
            "[sizes]\nsmall = {}\n",
            "sizes.small: unknown key (allowed here: sim, gpu)",
        ),
        (
            "kernel = \"toy\"",
            "kernel = \"toy\"\nblocks = 2",
            "launches[0].blocks: unknown key (allowed here: kernel, repeat, grid, block, \
             shared_bytes, cooperative, args)",
        ),
        (
            "kernel = \"toy\"",
            "kernel = \"toy\"\ncooperative = 1",
            "launches[0].cooperative: expected a boolean, found the integer 1",
        ),
        (
            "result = \"status\"",
            "result = \"status\"\ncode = 1",
            "check.code: unknown key (allowed here: kernel, grid, block, shared_bytes, args, \
             result, codes)",
        ),
        (
            "name = \"toy\"",
            "name = 5",
            "name: expected a string, found the integer 5",
        ),
        (
            "name = \"toy\"",
            "name = 1979-05-27",
            "name: expected a string, found a date",
        ),
        (
            "kernel = \"toy\"",
            "kernel = [\"toy\"]",
            "launches[0].kernel: expected a string, found an array",
        ),
        (
            "args = [\"data\", \"status\"]",
            "args = \"data\"",
            "check.args: expected an array of arguments, found the string \"data\"",
        ),
        (
            "codes = { 1 = \"data is wrong\" }",
            "codes = 1979-05-27",
            "check.codes: expected a table, found a date",
        ),
        (
            "sim = { n = 64, blocks = 2, threads = 32 }",
            "sim = true",
            "sizes.sim: expected a table, found the boolean true",
        ),
    ];
    for (from, to, expected) in cases {
        let field = expected.split(": ").next().unwrap();
        let (_, message) = bad(from, to, field);
        assert_eq!(
            unlocated(&message),
            format!("/apps/toy/app.toml: {expected}")
        );
    }
    // An array of tables written as a plain value (the `[[launches]]` block taken out).
    let start = GOOD.find("[[launches]]").unwrap();
    let end = GOOD.find("[check]").unwrap();
    let without_launches = format!("{}{}", &GOOD[..start], &GOOD[end..]);
    for (value, expected) in [
        (
            "5",
            "launches: expected an array of [[launches]] tables, found the integer 5",
        ),
        (
            "[1.5]",
            "launches[0]: expected a table, found the float 1.5",
        ),
    ] {
        let text = format!("launches = {value}\n{without_launches}");
        let err = parse(&text).unwrap_err();
        assert_eq!(
            unlocated(&err.to_string()),
            format!("/apps/toy/app.toml: {expected}")
        );
    }
}

/// Two misspelt keys in one table: the error names the first in key order, wherever the keys
/// stand in the text (serde alone would name the first in the text).
#[test]
fn manifest_two_unknown_keys_name_the_first_in_key_order() {
    let (_, message) = bad(
        "length = \"n\"",
        "zlength = \"n\"\nalength = 1",
        "buffers[0].alength",
    );
    assert!(message.ends_with("unknown key (allowed here: name, type, length, init)"));
}

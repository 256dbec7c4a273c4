//! Bringing an app as it is: the `stepred` fixture (headers from its folder and from an include
//! folder, a template kernel named by its C++ name, sizes passed as `-D`, a launch per step,
//! input from a file, the check kernel in a file of its own) under `check` and `harden` with its
//! files untouched; the manifest's new keys refused clearly when misused; host code named; and
//! `harden` stopping at once on a lockstep-warp reduction that no fence can fix.

use gpuwmm::apps::manifest::{Manifest, ManifestError};
use gpuwmm::apps::{load_app_dir, AppError, Size, DEFAULT_ARCH};
use std::path::{Path, PathBuf};

mod common;

use common::cli::{assert_bad_input, gpuwmm, gpuwmm_in_repo, ok, words};
use common::fixture_app;

/// The stepred fixture's files are as `before` (from [`stepred_files`]): gpuwmm never edits an
/// app's own files.
fn assert_stepred_untouched(before: &[(PathBuf, Vec<u8>)]) {
    assert_eq!(
        stepred_files(),
        before,
        "the app's files are left as they were"
    );
}

/// Every file of the stepred fixture with its bytes.
fn stepred_files() -> Vec<(PathBuf, Vec<u8>)> {
    let dir = fixture_app("stepred");
    let mut files: Vec<(PathBuf, Vec<u8>)> = ["stepred.cu", "stepred.cuh", "check.cu", "main.cu"]
        .iter()
        .map(|f| dir.join(f))
        .chain([dir.join("common/block_sum.cuh")])
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();
    files.sort();
    files
}

/// The 1-based line of stepred.cu that contains `needle`.
fn stepred_line(needle: &str) -> usize {
    let text = std::fs::read_to_string(fixture_app("stepred").join("stepred.cu")).unwrap();
    let lines: Vec<usize> = (text.lines().enumerate())
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "{needle}");
    lines[0]
}

#[test]
fn stepred_sources_need_no_extern_c_and_no_explicit_instantiation() {
    for (path, bytes) in stepred_files() {
        let text = String::from_utf8(bytes).unwrap();
        assert!(!text.contains("extern \"C\""), "{}", path.display());
        assert!(!text.contains("template __global__"), "{}", path.display());
    }
}

#[test]
fn stepred_compiles_its_template_kernel_with_the_sizes_defines() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let app = load_app_dir(&fixture_app("stepred")).unwrap();
    for size in Size::ALL {
        let kernels = app.kernels(size);
        assert_eq!(kernels.len(), 1);
        assert!(kernels[0].starts_with("_Z10stepReduceIiE"), "{kernels:?}");
        let module = app.module(DEFAULT_ARCH, size).unwrap();
        let names: Vec<&str> = module.kernels().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [kernels[0].as_str()],
            "the check kernel is not in the app module"
        );
        let check = app.check_module(DEFAULT_ARCH, size).unwrap().unwrap();
        assert_eq!(check.kernels().count(), 2);
        // NTHREADS sizes the shared array: 32 ints at sim size, 128 at gpu size.
        let shared = if size == Size::Sim { "[128]" } else { "[512]" };
        let ptx = gpuwmm::ptx::print(&module);
        assert!(ptx.contains(shared), "{size}: {shared} bytes of cache");
    }
    // Fence sites name the source file they come from.
    let sites = gpuwmm::ptx::passes::fences::fence_sites(
        &app.module(DEFAULT_ARCH, Size::Sim).unwrap(),
        gpuwmm::ptx::passes::fences::Granularity::SourceLine,
    );
    assert!(sites.iter().any(|s| s
        .source
        .as_ref()
        .is_some_and(|l| l.file.ends_with("stepred.cu"))));
}

#[test]
fn stepred_runs_under_check_fails_as_is_and_passes_with_every_fence() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let before = stepred_files();
    let app_dir = fixture_app("stepred");
    let app_dir = app_dir.to_str().unwrap();
    let check = |fences: &str, journal: &str| {
        let out = gpuwmm(
            &[
                &words("check stepred --backend sim --env sys-str+ --runs 100 --fences")[..],
                &[fences, "--journal", journal, "--app-dir", app_dir],
            ]
            .concat(),
            dir.path(),
        );
        ok(&out)
    };
    let as_is = check("as-is", "as-is.csv");
    assert!(!as_is.contains("outcomes: pass 100,"), "{as_is}");
    assert!(as_is.contains("a step's total is wrong"), "{as_is}");
    let fenced = check("all", "all.csv");
    assert!(fenced.contains("outcomes: pass 100, fail 0"), "{fenced}");
    assert_stepred_untouched(&before);
}

#[test]
fn stepred_hardens_to_the_release_and_acquire_fences_of_its_last_block_pattern() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let before = stepred_files();
    let journal = dir.path().join("h.csv");
    let out = gpuwmm_in_repo(
        &[
            &words("harden stepred --backend sim --stable-runs 1000 --minimise-kind off")[..],
            &["--app-dir", "tests/fixtures/apps/stepred", "--journal"],
            &[journal.to_str().unwrap()],
        ]
        .concat(),
    );
    let stdout = ok(&out);
    assert!(
        stdout.contains("round 0 all #0: fences {0 1 2 3 4 5 6 7} x 32 runs -> passes"),
        "{stdout}"
    );
    assert!(stdout.contains("stable: yes"), "{stdout}");
    let file = "tests/fixtures/apps/stepred/stepred.cu";
    for needle in ["partial[blockIdx.x] = sum;", "unsigned ticket = atomicInc("] {
        let place = format!("{file}:{} ", stepred_line(needle));
        assert!(stdout.contains(&place), "{place}\n{stdout}");
    }
    let patch = std::fs::read_to_string(journal.with_extension("patch")).unwrap();
    assert!(
        patch.starts_with(&format!("--- a/{file}\n+++ b/{file}\n")),
        "{patch}"
    );
    assert_eq!(patch.matches("+    __threadfence();").count(), 2, "{patch}");
    // The app rebuilt from the patch (its listed file compiled from the patched text in
    // memory) passed harden's own check of the patch.
    let checked = "patch check: the app built from the patch passed 1000 of 1000 runs";
    assert!(stdout.contains(checked), "{stdout}");
    assert_stepred_untouched(&before);
}

/// harden's check of its patch builds an app compiled from its files on disk from the patched
/// texts instead, headers included: a header's text in memory is what NVRTC compiles (a broken
/// one does not build), the listed file's too, and nothing on disk changes.
#[test]
fn a_patch_check_compiles_the_patched_header_and_file_of_an_app_with_a_source_table() {
    use gpuwmm::harden::verify::PatchCheck;
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let before = stepred_files();
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/apps/stepred");
    let check =
        |files: &[(PathBuf, String)]| common::check_patch_on_sim("stepred", &app, 20, files);
    let header = std::path::absolute(app.join("stepred.cuh")).unwrap();
    let text = std::fs::read_to_string(&header).unwrap();
    match check(&[(header.clone(), format!("{text}\nthis is not C++;\n"))]) {
        PatchCheck::DoesNotBuild { error } => assert!(error.contains("stepred.cuh"), "{error}"),
        other => panic!("{other:?}"),
    }
    let file = std::path::absolute(app.join("stepred.cu")).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let fenced = text
        .replace(
            "partial[blockIdx.x] = sum;",
            "partial[blockIdx.x] = sum; __threadfence();",
        )
        .replace("T total = 0;", "__threadfence(); T total = 0;");
    match check(&[(file, fenced)]) {
        PatchCheck::Ran(runs) => assert_eq!((runs.made, runs.failure), (20, None)),
        other => panic!("{other:?}"),
    }
    assert_stepred_untouched(&before);
}

#[test]
fn harden_stops_at_once_on_a_lockstep_warp_reduction_fences_cannot_fix() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let journal = dir.path().join("h.csv");
    let out = gpuwmm_in_repo(
        &[
            &words("harden lockstep --backend sim --app-dir tests/fixtures/apps/lockstep")[..],
            &["--journal", journal.to_str().unwrap()],
        ]
        .concat(),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("round 0 all #0: fences {0 1 2 3 4 5 6 7 8} x 32 runs -> fails"),
        "{stdout}"
    );
    // The diagnosis is the command's error.
    let stdout = stderr.clone().into_owned();
    assert!(
        stdout.contains("fails with a fence at every site: fences cannot fix this"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "fails under sequential consistency too (--sim-model sc, fail at run 0: check kernel \
             checkSums reported code 1"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("not a memory-ordering bug (e.g. warp-synchronous code, a logic race)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("error: fails with a fence at every site"),
        "{stderr}"
    );
    // One query only: the search never started.
    assert!(!stdout.contains("binary #1"), "{stdout}");
    let journal = std::fs::read_to_string(&journal).unwrap();
    assert!(
        journal.lines().skip(1).all(|l| l.starts_with("0,all,")),
        "{journal}"
    );
}

/// The stepred manifest with `from` replaced by `to`, parsed as if in the fixture's folder.
fn stepred_manifest(from: &str, to: &str) -> Result<Manifest, ManifestError> {
    let path = fixture_app("stepred").join("app.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{from}");
    Manifest::parse(&path, &text.replacen(from, to, 1))
}

#[test]
fn each_new_manifest_key_misused_is_an_error_naming_file_line_and_field() {
    // (replace, with, field, part of the message)
    let cases = [
        (
            "files = [\"stepred.cu\"]",
            "files = []",
            "source.files",
            "at least one source file",
        ),
        (
            "files = [\"stepred.cu\"]",
            "files = \"stepred.cu\"",
            "source.files",
            "expected an array of paths, found the string",
        ),
        (
            "include = [\"common\"]",
            "includes = [\"common\"]",
            "source.includes",
            "unknown key (allowed here: files, check_files, include, defines)",
        ),
        (
            "NBLOCKS = \"blocks\"",
            "NBLOCKS = \"blockz\"",
            "source.defines.NBLOCKS",
            "unknown parameter 'blockz'",
        ),
        (
            "NBLOCKS = \"blocks\"",
            "\"N-BLOCKS\" = \"blocks\"",
            "source.defines.N-BLOCKS",
            "'N-BLOCKS' is not a macro name",
        ),
        (
            "repeat = \"steps\"",
            "repeat = \"steps - 3\"",
            "launches[0].repeat",
            "repeat is 0 at size sim (must be 1 to 1000000)",
        ),
        (
            "repeat = \"steps\"",
            "repeat = \"stepz\"",
            "launches[0].repeat",
            "unknown parameter 'stepz'",
        ),
        (
            "repeat = \"steps\"\n",
            "",
            "launches[0].args[3]",
            "'step' is defined only in a launch with `repeat`",
        ),
        (
            "steps = 3 }",
            "steps = 3, step = 1 }",
            "launches[0].repeat",
            "size sim has a parameter 'step'",
        ),
        (
            "init = { file = \"input.txt\" }",
            "init = { values = [1, 2] }",
            "buffers[0].init",
            "2 elements given, but the buffer has 128 elements at size sim",
        ),
        (
            "init = { file = \"input.txt\" }",
            "init = { values = [1, \"2\"] }",
            "buffers[0].init.values[1]",
            "expected an integer, found the string \"2\"",
        ),
        (
            "init = { file = \"input.txt\" }",
            "init = { file = \"absent.txt\" }",
            "buffers[0].init.file",
            "cannot read",
        ),
        (
            "init = { file = \"input.txt\" }",
            "init = { file = \"app.toml\" }",
            "buffers[0].init.file",
            "app.toml: line 1: '#' is not an integer (the buffer is i32)",
        ),
        (
            "init = { file = \"input.txt\" }",
            "init = { file = \"input.txt\", format = \"csv\" }",
            "buffers[0].init.format",
            "unknown format 'csv' (expected \"text\", \"binary\" or \"npy\")",
        ),
        (
            "init = { file = \"input.txt\" }",
            "init = { file = \"input.txt\", fromat = \"text\" }",
            "buffers[0].init.fromat",
            "unknown key (allowed here: file, format)",
        ),
        (
            "init = { copy = \"in\" }",
            "init = { copy = \"partial\" }",
            "buffers[1].init.copy",
            "unknown buffer 'partial' (buffers: in (a copy names a buffer declared before it))",
        ),
        (
            "init = { copy = \"in\" }",
            "init = { copy = 3 }",
            "buffers[1].init.copy",
            "expected the name of an earlier buffer, found the integer 3",
        ),
        (
            "name = \"input\"\ntype = \"i32\"",
            "name = \"input\"\ntype = \"u32\"",
            "buffers[1].init.copy",
            "'in' is i32, this buffer u32",
        ),
    ];
    let path = fixture_app("stepred").join("app.toml");
    for (from, to, field, problem) in cases {
        let err = stepred_manifest(from, to).unwrap_err();
        let message = err.to_string();
        assert_eq!(err.field(), Some(field), "{message}");
        let line = err.line().unwrap_or_else(|| panic!("no line: {message}"));
        let located = format!("{}:{line}: {field}: ", path.display());
        assert!(message.starts_with(&located), "{message}");
        assert!(message.contains(problem), "{problem:?} not in {message}");
    }
}

#[test]
fn misused_keys_are_exit_code_2_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    let (manifest, text) = copy_stepred(&app);
    std::fs::write(&manifest, text.replace("repeat = \"steps\"", "repeat = 0")).unwrap();
    let out = gpuwmm(
        &[
            &words("check stepred --backend sim --runs 1 --app-dir")[..],
            &[app.to_str().unwrap()],
        ]
        .concat(),
        dir.path(),
    );
    assert_bad_input(&out, "app.toml:");
    assert_bad_input(&out, ": launches[0].repeat: repeat is 0 at size sim");
}

/// Copies the stepred fixture into `to`; returns the path and text of its `app.toml`.
fn copy_stepred(to: &Path) -> (PathBuf, String) {
    let from = fixture_app("stepred");
    std::fs::create_dir_all(to.join("common")).unwrap();
    for file in [
        "app.toml",
        "stepred.cu",
        "stepred.cuh",
        "check.cu",
        "main.cu",
        "input.txt",
        "common/block_sum.cuh",
    ] {
        std::fs::copy(from.join(file), to.join(file)).unwrap();
    }
    let manifest = to.join("app.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    (manifest, text)
}

#[test]
fn missing_source_files_and_include_folders_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, text) = copy_stepred(dir.path());
    for (from, to, expected) in [
        (
            "files = [\"stepred.cu\"]",
            "files = [\"stepred.cu\", \"absent.cu\"]",
            "source.files[1]: cannot read",
        ),
        (
            "check_files = [\"check.cu\"]",
            "check_files = [\"absent.cu\"]",
            "source.check_files[0]: cannot read",
        ),
        (
            "include = [\"common\"]",
            "include = [\"absent\"]",
            "source.include[0]: no folder",
        ),
    ] {
        std::fs::write(&manifest, text.replace(from, to)).unwrap();
        let err = load_app_dir(dir.path()).err().unwrap();
        let message = err.to_string();
        assert!(matches!(err, AppError::Manifest(_)), "{message}");
        assert!(message.contains(expected), "{expected} not in {message}");
        assert!(message.contains("app.toml:"), "{message}");
    }
}

/// Listing the host file is answered by one error naming its first host line and the fix, not
/// NVRTC's errors about it.
#[test]
fn a_listed_host_file_gets_one_error_naming_its_first_host_line() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let dir = tempfile::tempdir().unwrap();
    let (manifest, text) = copy_stepred(dir.path());
    std::fs::write(&manifest, text.replace("[\"stepred.cu\"]", "[\"main.cu\"]")).unwrap();
    let app = load_app_dir(dir.path()).unwrap();
    let err = app.module(DEFAULT_ARCH, Size::Sim).err().unwrap();
    let message = err.to_string();
    let main = std::fs::read_to_string(dir.path().join("main.cu")).unwrap();
    // gpuwmm stands in for <cstdio>; NVRTC has no <vector>: the include it cannot open is the
    // first host line.
    let first_host = main
        .lines()
        .position(|l| l.contains("#include <vector>"))
        .unwrap()
        + 1;
    assert!(
        message.contains(&format!("main.cu:{first_host}: host code")),
        "{message}"
    );
    assert!(message.contains("`#include <vector>`"), "{message}");
    assert!(message.contains("#ifndef __CUDACC_RTC__"), "{message}");
    assert!(message.contains("list only the device files"), "{message}");
    assert_eq!(message.lines().count(), 1, "{message}");
}

/// A kernel name the source does not have is the manifest's error for that launch, also for a
/// template instance NVRTC cannot resolve.
#[test]
fn an_unknown_cxx_kernel_name_is_a_manifest_error_at_its_launch() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let dir = tempfile::tempdir().unwrap();
    let (manifest, text) = copy_stepred(dir.path());
    for (name, expected) in [
        (
            "stepReduse<int>",
            "launches[0].kernel: no kernel 'stepReduse<int>' in stepred.cu, check.cu: NVRTC says: \
             identifier \"stepReduse\" is undefined (kernels: ",
        ),
        (
            "checkStep",
            "check.kernel: no kernel 'checkStep' in stepred.cu, check.cu (kernels: ",
        ),
    ] {
        let changed = match name {
            "checkStep" => text.replace("kernel = \"checkSteps\"", "kernel = \"checkStep\""),
            _ => text.replace("stepReduce<int>", name),
        };
        std::fs::write(&manifest, changed).unwrap();
        let message = manifest_error_of_module(dir.path());
        assert!(message.contains(expected), "{expected} not in {message}");
    }
}

/// The manifest error building the module of the app in `dir` gives (panics on another error or
/// none).
fn manifest_error_of_module(dir: &Path) -> String {
    let err = load_app_dir(dir)
        .unwrap()
        .module(DEFAULT_ARCH, Size::Sim)
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(matches!(err, AppError::Manifest(_)), "{message}");
    message
}

/// Kernels were listed by their mangled PTX names (`_Z10checkStepsPKiS0_Pjii`) and template
/// kernels not at all, so a template named without its arguments got no hint; and NVRTC's
/// reason for a misspelt name was spliced into the quoted name. Kernels are listed by their C++
/// names, templates as `name<...>`, and a template's bare name says what to write.
#[test]
fn a_template_kernel_named_without_arguments_is_told_so_with_kernels_by_cxx_names() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let dir = tempfile::tempdir().unwrap();
    let (manifest, text) = copy_stepred(dir.path());
    for (from, to, expected) in [
        (
            "stepReduce<int>",
            "stepReduce",
            "launches[0].kernel: no kernel 'stepReduce' in stepred.cu, check.cu: 'stepReduce' is \
             a template kernel (template <typename T>): name it with its template arguments, \
             e.g. \"stepReduce<float>\" (kernels: ",
        ),
        (
            "kernel = \"checkSteps\"",
            "kernel = \"checkStep\"",
            "check.kernel: no kernel 'checkStep' in stepred.cu, check.cu (kernels: ",
        ),
    ] {
        std::fs::write(&manifest, text.replace(from, to)).unwrap();
        let message = manifest_error_of_module(dir.path());
        assert!(message.contains(expected), "{expected} not in {message}");
        assert!(message.contains("stepReduce<...>"), "{message}");
        assert!(!message.contains("_Z"), "{message}");
        assert!(!message.contains(")'"), "{message}");
    }
}

/// `#include <cooperative_groups.h>` was refused as host code: NVRTC ships none of the CUDA
/// runtime's device headers and gpuwmm gave it no folder holding them. The runtime's include
/// folder is now passed, so a kernel using cooperative groups compiles as it is and runs.
#[test]
fn a_kernel_including_cooperative_groups_compiles_as_it_is_and_runs() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let app = load_app_dir(&common::fixture_app("coop-reduce")).unwrap();
    let module = app.module(DEFAULT_ARCH, Size::Sim);
    assert!(module.is_ok(), "{}", module.err().unwrap());
    common::assert_fixture_passes_every_run_on_sim("coop-reduce", 5);
}

/// A persistent kernel split by `cooperative_groups::this_grid().sync()` needs a cooperative
/// launch: with `cooperative = true` on its launch it runs under stress (stressing blocks
/// beside it, ids randomised) and passes every run with no race; without the key each run
/// crashes with the header's trap, naming the sync's line and the key.
#[test]
fn a_grid_sync_app_runs_with_a_cooperative_launch_and_names_the_key_without_it() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let fixture = fixture_app("coop-grid-sync");
    let check = |app_dir: &Path, journal: &str| {
        let args = words("check --backend sim --env sys-str+ --runs 40 --races --app-dir");
        let out = gpuwmm(
            &[
                &args[..],
                &[app_dir.to_str().unwrap(), "--journal", journal],
            ]
            .concat(),
            dir.path(),
        );
        ok(&out)
    };
    let cooperative = check(&fixture, "coop.csv");
    assert!(
        cooperative.contains("outcomes: pass 40, fail 0"),
        "{cooperative}"
    );
    assert!(
        cooperative.contains("races: none recorded"),
        "{cooperative}"
    );
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::copy(fixture.join("kernel.cu"), plain.join("kernel.cu")).unwrap();
    let manifest = std::fs::read_to_string(fixture.join("app.toml")).unwrap();
    std::fs::write(
        plain.join("app.toml"),
        manifest.replace("cooperative = true\n", ""),
    )
    .unwrap();
    let not_cooperative = check(&plain, "plain.csv");
    assert!(not_cooperative.contains("crash 40"), "{not_cooperative}");
    let sync_line = common::fixture_kernel_line("coop-grid-sync", "grid.sync();");
    assert!(
        not_cooperative.contains(&format!("trap at kernel.cu:{sync_line}")),
        "{not_cooperative}"
    );
    assert!(
        not_cooperative.contains("`cooperative = true`"),
        "{not_cooperative}"
    );
}

/// Where no tools root has the runtime's headers, the error names the `#include` line and the
/// header, and says how to get it, instead of calling the include host code.
#[test]
fn a_missing_cuda_runtime_header_is_named_not_called_host_code() {
    let tools = common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let root = tempfile::tempdir().unwrap();
    // A tools root with the real NVRTC and binaries but no include folder.
    let real = tools.root.unwrap();
    for dir in ["bin", "lib"] {
        std::os::unix::fs::symlink(real.join(dir), root.path().join(dir)).unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let app_dir = common::fixture_app("coop-reduce");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gpuwmm"))
        .args(words(
            "check coop-reduce --backend sim --runs 1 --journal j.csv --app-dir",
        ))
        .arg(&app_dir)
        .env("GPUWMM_CUDA_TOOLS", root.path())
        .env("GPUWMM_CACHE_DIR", work.path().join("cache"))
        .current_dir(work.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let line = std::fs::read_to_string(app_dir.join("kernel.cu"))
        .unwrap()
        .lines()
        .position(|l| l.starts_with("#include <cooperative_groups.h>"))
        .unwrap()
        + 1;
    assert!(
        stderr.contains(&format!(
            "kernel.cu:{line}: NVRTC cannot open <cooperative_groups.h>, a device header of the \
             CUDA runtime"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("gpuwmm setup"), "{stderr}");
    assert!(!stderr.contains("host code"), "{stderr}");
}

/// A header shared by host and device code (`util.cuh`) that includes `<cstdio>`, `<cstdlib>`,
/// `<cstdint>`, `<cmath>`, `<climits>`, `<cstring>`, their C spellings and `<type_traits>` failed
/// with NVRTC's raw "cannot open source file" error: NVRTC has no host C++ library. gpuwmm
/// stands in for those headers; the app compiles as it is and its check passes.
#[test]
fn an_app_header_including_common_standard_headers_compiles_and_runs() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    common::assert_fixture_passes_every_run_on_sim("std-headers", 3);
}

/// A copy of the std-headers fixture in a temporary folder; returns the folder and the path of
/// its `src/util.cuh`.
fn copy_std_headers() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let from = fixture_app("std-headers");
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    for file in ["app.toml", "src/kernel.cu", "src/util.cuh"] {
        std::fs::copy(from.join(file), dir.path().join(file)).unwrap();
    }
    let util = dir.path().join("src/util.cuh");
    (dir, util)
}

/// A header NVRTC still cannot open was reported as NVRTC's raw error, naming the generated
/// unit and giving no hint. The error names the header's file and line, says why, lists the
/// headers gpuwmm supplies and how to fix it, and is bad input.
#[test]
fn an_unopenable_header_in_an_app_header_is_named_with_the_hint() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let (dir, util) = copy_std_headers();
    let text = std::fs::read_to_string(&util).unwrap();
    let text = text.replace(
        "#include <cstring>\n",
        "#include <cstring>\n#include <map>\n",
    );
    std::fs::write(&util, &text).unwrap();
    let line = text.lines().position(|l| l == "#include <map>").unwrap() + 1;
    let work = tempfile::tempdir().unwrap();
    let out = gpuwmm(
        &[
            &words("check std-headers --backend sim --runs 1 --journal j.csv --app-dir")[..],
            &[dir.path().to_str().unwrap()],
        ]
        .concat(),
        work.path(),
    );
    assert_bad_input(
        &out,
        &format!("src/util.cuh:{line}: NVRTC cannot open <map>: NVRTC compiles device code only"),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "no host C++ library",
        "<cstdio>",
        "<cstdint>",
        "<climits>",
        "#ifndef __CUDACC_RTC__",
        "add it to `include` in `[source]` of app.toml",
    ] {
        assert!(stderr.contains(needle), "{needle} not in {stderr}");
    }
    assert!(!stderr.contains("gpuwmm-sources.cu"), "{stderr}");
}

/// NVRTC takes an in-memory header before any folder, so a stand-in would hide an app's own
/// header of the same name: gpuwmm leaves the stand-in out then.
#[test]
fn a_stand_in_never_hides_a_header_the_app_brings_in_an_include_folder() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let (dir, util) = copy_std_headers();
    std::fs::create_dir_all(dir.path().join("stubs")).unwrap();
    std::fs::write(
        dir.path().join("stubs/climits"),
        "#pragma once\n#define APP_CLIMITS 1\n#include <limits.h>\n",
    )
    .unwrap();
    let manifest = dir.path().join("app.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let text = text.replace("[source]\n", "[source]\ninclude = [\"stubs\"]\n");
    std::fs::write(&manifest, text).unwrap();
    let mut header = std::fs::read_to_string(&util).unwrap();
    header.push_str("#ifndef APP_CLIMITS\n#error the app's own <climits> was hidden\n#endif\n");
    std::fs::write(&util, header).unwrap();
    let app = load_app_dir(dir.path()).unwrap();
    let module = app.module(DEFAULT_ARCH, Size::Sim);
    assert!(module.is_ok(), "{}", module.err().unwrap());
}

/// `defines` took only sizes: `REAL = "float"` was "unknown parameter 'float'" and `DEBUG = true`
/// was refused, so type and flag macros could not be passed. `{ text = "float" }` gives
/// `-DREAL=float`, `true` gives `-DDEBUG`, `false` leaves the macro undefined; the fixture's
/// check passes only if all three held.
#[test]
fn typed_and_flag_defines_reach_the_source_and_the_check_passes() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    common::assert_fixture_passes_every_run_on_sim("typed-defines", 2);
}

/// A plain string stays a size expression (a misspelt parameter is still an error), and the
/// error names the text and flag forms; a text table with another key is refused.
#[test]
fn a_define_string_that_is_no_size_names_the_text_and_flag_forms() {
    let from = fixture_app("typed-defines").join("app.toml");
    let text = std::fs::read_to_string(&from).unwrap();
    for (to, expected) in [
        (
            "REAL = \"float\"",
            "source.defines.REAL: unknown parameter 'float' (parameters of size sim: blocks, \
             threads); a define's string is a size expression: for a text value write \
             `REAL = { text = \"...\" }` (-DREAL=...), for a flag `REAL = true` (-DREAL)",
        ),
        (
            "REAL = { txt = \"float\" }",
            "source.defines.REAL.txt: unknown key (allowed here: text)",
        ),
        (
            "REAL = { text = \"\" }",
            "source.defines.REAL.text: a define's text is one line, not empty",
        ),
    ] {
        let changed = text.replace("REAL = { text = \"float\" }", to);
        let err = Manifest::parse(&from, &changed).err().unwrap().to_string();
        assert!(err.contains(expected), "{expected} not in {err}");
        assert!(err.contains("app.toml:9:"), "{err}");
    }
}

/// A resume compares the app's hashes: a changed text or flag define must change them (the
/// manifest is hashed, and the PTX the defines give).
#[test]
fn a_changed_typed_or_flag_define_changes_the_app_hash() {
    common::or_skip!(gpuwmm::toolchain::tools_for_tests());
    let hash = |from: &str, to: &str| {
        let dir = tempfile::tempdir().unwrap();
        for file in ["app.toml", "kernel.cu"] {
            let text = std::fs::read_to_string(fixture_app("typed-defines").join(file)).unwrap();
            std::fs::write(dir.path().join(file), text.replace(from, to)).unwrap();
        }
        let app = load_app_dir(dir.path()).unwrap();
        gpuwmm::apps::hash::AppHash::of(&*app, Size::Sim, Some(dir.path())).unwrap()
    };
    let base = hash("", "");
    for (from, to) in [
        ("DEBUG = true", "DEBUG = false"),
        ("text = \"float\"", "text = \"unsigned\""),
    ] {
        let changed = hash(from, to);
        assert_ne!(changed.sources_sha256, base.sources_sha256, "{to}");
        assert_ne!(changed.ptx_sha256, base.ptx_sha256, "{to}");
    }
}

/// An app folder whose kernel has fences of its own gets a `-nf` variant, as the built-in apps
/// do: `NAME-nf` with `--app-dir` strips them from the PTX, so a check shows what they prevent
/// and a hardening searches without them. The as-is hardening's warning names that command (it
/// named `gpuwmm harden sdk-red-nf`, a built-in app, whatever the app).
#[test]
fn an_app_folder_with_fences_of_its_own_has_a_no_fences_variant() {
    let dir = common::or_skip!(common::temp_dir_with_tools());
    let app_dir = fixture_app("shared-handoff-fenced");
    let app = app_dir.to_str().unwrap();
    let name = "shared-handoff-fenced-nf";
    let check = [
        "check",
        name,
        "--app-dir",
        app,
        "--backend",
        "sim",
        "--runs",
        "200",
    ];
    let stdout = ok(&gpuwmm(&check, dir.path()));
    assert!(stdout.contains(&format!("app {name} |")), "{stdout}");
    assert!(
        !stdout.contains(" fail 0,"),
        "the stripped handoff never failed:\n{stdout}"
    );
    let described = ok(&gpuwmm(&["apps", name, "--app-dir", app], dir.path()));
    assert!(described.contains("own fences removed"), "{described}");
    let as_is = common::cli::harden_on_sim(&app_dir, dir.path(), &["--stable-runs", "50"]);
    let stderr = String::from_utf8_lossy(&as_is.stderr);
    let hint = format!("`gpuwmm harden {name} --app-dir {app}`");
    assert!(stderr.contains(&hint), "{hint} not in:\n{stderr}");
    let other = gpuwmm(
        &["check", "other-nf", "--app-dir", app, "--runs", "1"],
        dir.path(),
    );
    assert_bad_input(
        &other,
        "or 'shared-handoff-fenced-nf' for it without its own fences",
    );
}

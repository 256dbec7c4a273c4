//! Round trip and optcheck: transformed PTX must assemble, and the SASS must show what the
//! transformation meant (as in the ASPLOS 2015 litmus work, which checked that the compiler did not
//! reorder or remove the accesses under test).
//!
//! Needs ptxas, NVRTC and cuobjdump (scripts/setup-cuda-tools.sh), no GPU.

mod common;

use common::*;
use gpuwmm::litmus::{LitmusShape, LitmusTest};
use gpuwmm::ptx::passes::fences::{
    fence_count, fence_sites, insert_fences, strip_fences, FenceKind, Granularity,
};
use gpuwmm::ptx::{parse, print, Module};
use gpuwmm::toolchain::{disassemble, parse_sass, tools_for_tests, SassInstruction};

/// Fences in one kernel (a corpus file may hold more kernels, e.g. an app's check kernel).
fn fences_in_kernel(module: &Module, kernel: &str) -> usize {
    module.function(kernel).map_or(0, |f| f.fence_count())
}

#[test]
fn corpus_round_trips_through_parse_and_print_and_assembles() {
    let tools = common::or_skip!(tools_for_tests());
    for (path, module) in corpus_modules(&tools) {
        let printed = print(&module);
        assert_eq!(
            print(&parse(&printed).unwrap()),
            printed,
            "{path}: print is not stable"
        );
        for arch in ARCHS {
            assemble_or_panic(&tools, &module, arch, path);
        }
    }
}

#[test]
fn every_fence_kind_at_every_site_assembles_and_shows_in_sass() {
    let tools = common::or_skip!(tools_for_tests());
    for (path, module) in corpus_modules(&tools) {
        for granularity in [Granularity::Instruction, Granularity::SourceLine] {
            let sites = fence_sites(&module, granularity);
            let all: Vec<_> = sites.iter().collect();
            for kind in FenceKind::ALL {
                let fenced = insert_fences(&module, &all, kind);
                assert_eq!(
                    fenced.fence_count(),
                    module.fence_count() + fence_count(&all)
                );
                for arch in ARCHS {
                    assemble_or_panic(&tools, &fenced, arch, path);
                }
            }
            // (a) the SASS has one MEMBAR per fence in the PTX: none was merged or dropped (in
            // every kernel of the file).
            let fenced = insert_fences(&module, &all, FenceKind::ScGpu);
            for arch in SASS_ARCHS {
                let cubin = assemble_or_panic(&tools, &fenced, arch, path);
                let functions = parse_sass(&disassemble(&tools, &cubin).unwrap());
                for kernel in fenced.kernels() {
                    let sass = functions
                        .iter()
                        .find(|f| f.name == kernel.name)
                        .unwrap_or_else(|| panic!("{path}: no SASS for {}", kernel.name));
                    assert_eq!(
                        sass.fence_count(),
                        fences_in_kernel(&fenced, &kernel.name),
                        "{path} {} {arch} {granularity:?}",
                        kernel.name
                    );
                }
            }
        }
    }
}

#[test]
fn stripping_removes_every_fence_from_the_sass() {
    let tools = common::or_skip!(tools_for_tests());
    let module = compile_corpus(&tools, "apps/sdk-red/kernel.cu");
    assert_eq!(
        module.fence_count(),
        1,
        "sdk-red has the idiom's __threadfence()"
    );
    let (stripped, removed) = strip_fences(&module);
    assert_eq!(removed, 1);
    for arch in SASS_ARCHS {
        assert_eq!(sass_of(&tools, &module, arch, "reduce").fence_count(), 1);
        assert_eq!(sass_of(&tools, &stripped, arch, "reduce").fence_count(), 0);
    }
}

/// The byte offset inside the brackets of a SASS memory operand: `[R2.64+0x100]` is 0x100.
fn address_offset(instruction: &SassInstruction) -> u64 {
    let inside = instruction.operands.rsplit('[').next().unwrap_or("");
    let inside = inside.split(']').next().unwrap_or("");
    match inside.split_once("+0x") {
        Some((_, hex)) => u64::from_str_radix(hex, 16).unwrap(),
        None => 0,
    }
}

/// The strong (volatile) global accesses of the litmus kernel, as (is_store, offset), in order.
fn litmus_accesses(
    tools: &gpuwmm::toolchain::CudaTools,
    test: &LitmusTest,
    arch: &str,
) -> Vec<(bool, u64)> {
    let module = parse(&test.ptx()).unwrap();
    let sass = sass_of(tools, &module, arch, gpuwmm::litmus::KERNEL);
    sass.instructions
        .iter()
        .filter(|i| i.is_strong_sys() && (i.is_global_load() || i.is_global_store()))
        .map(|i| (i.is_global_store(), address_offset(i)))
        .collect()
}

#[test]
fn mp_litmus_keeps_its_accesses_in_program_order() {
    let tools = common::or_skip!(tools_for_tests());
    for distance in [1, 64, 255] {
        let y = u64::from(distance) * 4;
        for fences in [
            [None, None],
            [Some(FenceKind::ScGpu), Some(FenceKind::ScGpu)],
        ] {
            let mut test = LitmusTest::new(LitmusShape::Mp, distance);
            test.fences = fences;
            for arch in SASS_ARCHS {
                let accesses = litmus_accesses(&tools, &test, arch);
                // Thread 0: st x; st y. Thread 1: ld y; ld x.
                assert_eq!(
                    accesses,
                    [(true, 0), (true, y), (false, y), (false, 0)],
                    "MP d={distance} {arch} {fences:?}"
                );
            }
        }
    }
}

#[test]
fn every_litmus_shape_assembles_with_and_without_fences() {
    let tools = common::or_skip!(tools_for_tests());
    for shape in LitmusShape::ALL {
        for kind in [None, Some(FenceKind::ScGpu), Some(FenceKind::MembarCta)] {
            let mut test = LitmusTest::new(shape, 32);
            test.fences = [kind, kind];
            let module = parse(&test.ptx()).unwrap();
            for arch in ARCHS {
                assemble_or_panic(&tools, &module, arch, shape.name());
            }
        }
    }
}

//! libcu++'s synchronisation primitives and warp match, as kernels use them: the
//! `libcxx-sync` fixture takes a `cuda::binary_semaphore` around a counter in every block, meets
//! at a `cuda::barrier`, and records `__match_any_sync` and `__match_all_sync` masks. The
//! simulator refused the module at load (`match.any.sync.b64`, which the barrier's arrive
//! uses), so no app using `cuda::barrier` could run. Simulator results.

mod common;

use common::assert_fixture_passes_every_run_on_sim;

#[test]
fn a_semaphore_a_barrier_and_warp_match_run_as_libcxx_and_ptx_define_them() {
    common::or_skip!(gpuwmm::toolchain::cccl_tools_for_tests());
    assert_fixture_passes_every_run_on_sim("libcxx-sync", 20);
}

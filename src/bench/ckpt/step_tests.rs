//! An async save's snapshot under the next training step: the restore
//! equals the state at snapshot time, never the stepped state, and the live
//! state is the original again after the save; a lazy snapshot (taken after
//! the step, a mode only tests reach) fails the same check, as a torn
//! snapshot would.

use std::sync::Arc;

use super::Verified;
use super::ops::{Ctx, NextStep, State, StateSpec, restore_flat, save_flat, verify};
use super::plan::ChunkChecksum;
use crate::format::ckpt::TensorSpec;
use crate::mem::{Buffer, Dest};
use crate::store::ObjectStore;

/// Save a small Adam-like state with `step`, restore it, and check it:
/// (the check's verdict, whether the live state was the original after the save).
async fn save_and_check(step: NextStep) -> (Verified, bool) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = crate::cli::store_config_of(&["--backend", "local", "--root", dir.path().to_str().unwrap(), "--bucket", "steps"]);
    let store: Arc<dyn ObjectStore> = Arc::from(crate::store::open(&cfg).unwrap());
    store.ensure_bucket(true).await.unwrap();
    let t = |path: &str, dtype: &'static str, shape: &[u64]| TensorSpec { path: path.into(), dtype, shape: shape.to_vec() };
    let tensors = vec![t("model.w", "BF16", &[300, 257]), t("optim.exp_avg", "F32", &[300, 257]), t("optim.step", "I64", &[1])];
    let spec = StateSpec { name: "steps".into(), workload: "synthetic", size_bytes: 0, tensors };
    let state = State::new(&spec, Dest::Host, None, 11, 0).unwrap();
    let original: Vec<Vec<u8>> = state.tensors.iter().map(|b| b.as_host().unwrap().to_vec()).collect();
    let ctx = Ctx {
        store: store.clone(),
        serial: store,
        chunk: 64 << 10,
        concurrency: 3,
        checksum: ChunkChecksum::Xxh3,
        seed: 11,
        staging: Arc::new(tokio::sync::Mutex::new(Vec::new())),
    };
    let mut snapshot = Buffer::host(state.total as usize);
    save_flat(&ctx, "ck/rank00000", &state, &mut snapshot, "g1", step, None).await.unwrap();
    let back = state.tensors.iter().zip(&original).all(|(b, o)| b.as_host().unwrap() == &o[..]);
    let mut restored = Buffer::host(state.total as usize);
    let (_, views) = restore_flat(&ctx, "ck/rank00000", &mut restored).await.unwrap();
    (verify(&state, &views, &restored).unwrap(), back)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_snapshot_holds_through_the_next_step_and_a_lazy_one_is_caught() {
    let (v, back) = save_and_check(NextStep::AfterSnapshot).await;
    assert!(back, "the step is undone after the save");
    assert!(v.ok && v.tensors_checked == 3, "the restore is the state at snapshot time: {:?}", v.mismatched);
    let (v, back) = save_and_check(NextStep::BeforeSnapshot).await;
    assert!(back, "undone for a lazy snapshot too");
    assert!(!v.ok, "a snapshot taken after the step must fail the check");
    assert_eq!(v.mismatched, ["model.w", "optim.exp_avg", "optim.step"], "every stepped tensor named");
    let (v, _) = save_and_check(NextStep::None).await;
    assert!(v.ok);
}

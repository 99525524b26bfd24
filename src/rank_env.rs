//! The environment variables through which `s3rdma`'s own rank supervisor
//! (`ranks::spawn_local`) tells each process it starts who it is. A leaf:
//! the store reads [`ENV_RANK`] too (to say a note once per run, not once
//! per rank) without depending on `ranks`, which depends on the store.

/// Our own rank variables, set by `ranks::spawn_local` on each child.
pub const ENV_RANK: &str = "S3RDMA_RANK";
/// World size set by `ranks::spawn_local`.
pub const ENV_WORLD: &str = "S3RDMA_WORLD_SIZE";
/// Rank on this host set by `ranks::spawn_local`.
pub const ENV_LOCAL: &str = "S3RDMA_LOCAL_RANK";
/// Run id shared by the ranks of one run (their meeting prefix in the store).
pub const ENV_RUN: &str = "S3RDMA_RUN_ID";

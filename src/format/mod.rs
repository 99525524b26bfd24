//! On-store layouts and their manifests (DESIGN.md, "On-store formats").

pub mod ckpt;
pub mod shards;
pub mod weights;

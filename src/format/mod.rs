//! On-store layouts and their manifests: checkpoints (`ckpt`), dataset
//! shards (`shards`), safetensors models (`weights`) and their digests (`digest`).

pub mod ckpt;
pub mod digest;
pub mod shards;
pub mod weights;

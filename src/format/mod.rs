//! On-store layouts and their manifests: checkpoints (`ckpt`), dataset
//! shards (`shards`), safetensors models (`weights`) and their digests (`digest`), and the content of
//! fetch's objects (`pattern`). Pure: reading them through a store is
//! `crate::catalog`, writing them `crate::ingest`.

pub mod ckpt;
pub mod digest;
pub mod pattern;
pub mod shards;
pub mod weights;

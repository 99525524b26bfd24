//! Reading what a prefix holds, through a store: a model's shard layouts
//! (`weights`), a dataset's committed shards (`shards`) and a model's digest
//! (`digest`). The layouts themselves, pure, are `crate::format`; writing
//! them is `crate::ingest`.

pub mod digest;
pub mod shards;
pub mod weights;

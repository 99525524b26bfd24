//! What a store can do, as one value: the benches and the witness ask this,
//! never which backend a store is, so a new backend that fills it in right
//! runs every bench unchanged (the shape of Apache Arrow `object_store`'s
//! backends, which are used only through their trait).

use serde::Serialize;

use super::TransferPath;

/// A store's description of itself ([`super::ObjectStore::capabilities`]).
///
/// Built by each backend from its configuration when it is opened; a wrapper
/// ([`super::counted::Counted`]) passes its inner store's on unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capabilities {
    /// The transport's name as records, tables and `--backend` spell it
    /// (`local`, `http`, `rdma`): a label, never a switch for behaviour.
    pub name: &'static str,
    /// Reads are served through the operating system's page cache (local
    /// files without O_DIRECT), so a warm read measures memory, not the
    /// store; a bench says so beside its table.
    pub page_cache: bool,
    /// `get_into` writes device memory itself (GPU-Direct); otherwise device
    /// reads are staged through pinned bounce buffers ([`super::read_into`]).
    /// rdma: only while the library reports RDMA available.
    pub device_writes: bool,
    /// The path bytes take when they are staged through pinned host memory
    /// into device memory ([`super::staged_read_pooled`]): `local` from files,
    /// `http_staged` from a server.
    pub staged_path: TransferPath,
    /// Bytes one ranged read should cover to keep the transport busy (http:
    /// part size x parts in flight; rdma: `--range-size`; local: 8 MiB); `None`
    /// where a ranged read would leave the transport (rdma without ranged
    /// windows reads ranges over HTTP).
    pub ranged_read: Option<u64>,
    /// The file-offset alignment reads need to bypass the page cache (local
    /// O_DIRECT: 4096 bytes); `None` where reads have no such need.
    pub direct_alignment: Option<u64>,
    /// Every read names the version of the object it served (an ETag, a
    /// file's identity), so a load of several reads can pin one version
    /// ([`super::ObjectStore::get_into_version`]); the rdma library's own
    /// reads name none.
    pub versioned_reads: bool,
    /// Requests are answered by a server (http, rdma), whose own counters
    /// the witness can read and whose answers a bench reports as evidence;
    /// `false` for local files, where no transport claim is made.
    pub server: bool,
}

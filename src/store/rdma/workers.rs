//! The rdma backend's worker threads: each owns one libminiocpp client and
//! runs the C ABI's blocking calls ([`worker`]) for jobs the async store
//! hands it ([`Job`]), with the counts of the calls' return codes
//! ([`CallCounts`]) and the completion that keeps a job's buffer borrowed
//! until the library is done with it ([`WaitOnDrop`]).

use std::ffi::CString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};

use serde::Serialize;

use super::ffi::Lib;

/// Counts of the C ABI's return codes over a run (or a window, by difference).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CallCounts {
    /// Data calls made through the C ABI.
    pub rdma_calls: u64,
    /// Calls that returned bytes (>= 0).
    pub rdma_ok: u64,
    /// Calls that returned -1.
    pub rdma_errors: u64,
    /// Calls that returned -2 (declined; the transfer was redone over HTTP).
    pub rdma_declined: u64,
    /// Calls that returned -3.
    pub rdma_invalid: u64,
    /// Bytes of the buffers handed to the library (each registered inside its call).
    pub rdma_call_bytes: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    calls: AtomicU64,
    ok: AtomicU64,
    errors: AtomicU64,
    declined: AtomicU64,
    invalid: AtomicU64,
    bytes: AtomicU64,
}

impl Counters {
    /// One call on a buffer of `len` bytes that returned `rc`.
    pub(super) fn record(&self, rc: isize, len: usize) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(len as u64, Ordering::Relaxed);
        let c = match rc {
            n if n >= 0 => &self.ok,
            -2 => &self.declined,
            -3 => &self.invalid,
            _ => &self.errors,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub(super) fn snapshot(&self) -> CallCounts {
        CallCounts {
            rdma_calls: self.calls.load(Ordering::Relaxed),
            rdma_ok: self.ok.load(Ordering::Relaxed),
            rdma_errors: self.errors.load(Ordering::Relaxed),
            rdma_declined: self.declined.load(Ordering::Relaxed),
            rdma_invalid: self.invalid.load(Ordering::Relaxed),
            rdma_call_bytes: self.bytes.load(Ordering::Relaxed),
        }
    }
}

/// Signalled by the worker when it no longer touches a job's buffer.
#[derive(Default)]
pub(super) struct Completion {
    done: Mutex<bool>,
    cv: Condvar,
}

impl Completion {
    pub(super) fn finish(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }
    pub(super) fn wait(&self) {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while !*d {
            d = self.cv.wait(d).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Sets the completion however the worker leaves the job (even by panic).
pub(super) struct FinishOnDrop(pub(super) Arc<Completion>);
impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// Held by the awaiting future: dropping it before the answer blocks until the
/// worker is done with the buffer.
pub(super) struct WaitOnDrop(pub(super) Arc<Completion>);
impl Drop for WaitOnDrop {
    fn drop(&mut self) {
        self.0.wait();
    }
}

pub(super) enum Op {
    Get { key: CString, offset: Option<u64>, ptr: *mut u8, len: usize },
    Put { key: CString, ptr: *const u8, len: usize },
}

pub(super) struct Job {
    pub(super) op: Op,
    pub(super) done: Arc<Completion>,
    pub(super) reply: tokio::sync::oneshot::Sender<(isize, Option<String>)>,
}

// SAFETY: the raw pointers in `Op` point into a buffer the submitting future
// keeps exclusively borrowed until `done` is signalled (see WaitOnDrop).
unsafe impl Send for Op {}

pub(super) struct ClientArgs {
    pub(super) endpoint: CString,
    pub(super) region: CString,
    pub(super) access_key: CString,
    pub(super) secret_key: CString,
    /// Temporary credentials' session token (`None`: long-term keys).
    pub(super) session_token: Option<CString>,
    pub(super) use_https: i32,
}

pub(super) fn worker(lib: Lib, args: Arc<ClientArgs>, bucket: CString, jobs: Arc<Mutex<Receiver<Job>>>, ready: Sender<Result<(), String>>) {
    // cuFile needs a bound CUDA context in each thread (the original Python suite: a fresh
    // thread segfaults without one); a no-op when no GPU is in use.
    if let Err(e) = crate::mem::bind_active_gpu() {
        let _ = ready.send(Err(format!("cannot bind the CUDA context in an RDMA worker: {e}")));
        return;
    }
    // SAFETY: all strings are valid NUL-terminated C strings for the call.
    let client = unsafe {
        (lib.client_new)(
            args.endpoint.as_ptr(),
            args.region.as_ptr(),
            args.access_key.as_ptr(),
            args.secret_key.as_ptr(),
            args.session_token.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
            args.use_https,
        )
    };
    if client.is_null() {
        let _ = ready.send(Err(format!("miniocpp_client_new failed: {}", lib.last_error())));
        return;
    }
    let _ = ready.send(Ok(()));
    loop {
        let job = match jobs.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => break,
        };
        let Ok(job) = job else { break };
        let finish = FinishOnDrop(job.done.clone());
        let mut etag = [0 as std::ffi::c_char; 64];
        let mut checksum = [0 as std::ffi::c_char; 64];
        // SAFETY: the buffers are valid for `len` bytes and exclusively ours
        // until `finish` drops; strings are valid C strings.
        let rc = unsafe {
            match &job.op {
                Op::Get { key, offset: None, ptr, len } => {
                    (lib.get_object)(client, bucket.as_ptr(), key.as_ptr(), *ptr as _, *len, std::ptr::null(), std::ptr::null_mut())
                }
                Op::Get { key, offset: Some(off), ptr, len } => match lib.get_object_range {
                    Some(f) => f(client, bucket.as_ptr(), key.as_ptr(), *ptr as _, *len, *off),
                    None => -3,
                },
                Op::Put { key, ptr, len } => (lib.put_object)(
                    client,
                    bucket.as_ptr(),
                    key.as_ptr(),
                    *ptr as _,
                    *len,
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    etag.as_mut_ptr(),
                    checksum.as_mut_ptr(),
                ),
            }
        };
        let err = (rc < 0).then(|| lib.last_error());
        drop(finish);
        let _ = job.reply.send((rc, err));
    }
    // Teardown order: no call is in flight (the loop ended), so the client goes now.
    // SAFETY: client came from client_new and is freed once.
    unsafe { (lib.client_free)(client) };
}

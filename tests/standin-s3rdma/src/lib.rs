//! A stand-in for libs3rdma's **client** C ABI (minio-cpp
//! `vendor/s3rdma/include/s3rdma.h`, libs3rdma 0.3.0): the eleven
//! `s3rdma_client_*` symbols minio-cpp calls, plus `s3rdma_version`,
//! `s3rdma_check_rdma` and `s3rdma_last_error`, with no verbs underneath.
//! Built as `libstandin_s3rdma.so` and placed beside a real libminiocpp as
//! `libs3rdma.so.0` (its `$ORIGIN` runpath finds it first), so the real
//! library's RDMA branch runs on a machine without an RDMA device: it mints
//! tokens, sends `x-amz-rdma-token`, parses the server's reply, retries,
//! reports failing rails and falls back to HTTP exactly as it would on a
//! ConnectX NIC. A test server (`examples/s3_test_server`, `--rdma`) honours
//! the tokens by moving the bytes with `process_vm_readv`/`process_vm_writev`,
//! one-sidedly, as an RDMA READ or WRITE would.
//!
//! What it does, as `s3rdma.h` says libs3rdma does:
//! - **Rails**: IPv4 addresses from the `device` argument, else
//!   `S3RDMA_DEVICE`, else `127.0.0.2,127.0.0.3` (two rails); a wildcard
//!   (`0.0.0.0`) means the default. Every rail must be a loopback address
//!   (127.0.0.0/8), so the control-plane socket minio-cpp binds to the
//!   token's address (`set_interface`) can be bound here. Tokens name the
//!   rails round-robin, skipping rails reported failed; when every rail is
//!   marked, all marks clear (minio-cpp `rdma.h`: "libs3rdma clears all marks
//!   once no rail is left usable").
//! - **Registration**: keyed by address and reference counted; at most
//!   4 GiB - 1 bytes (the descriptor's size field); a token must lie inside
//!   a registration.
//! - **Handles**: opaque ids, never reissued; a freed or foreign handle is refused.
//!
//! What it never does: claim to be real. `s3rdma_version` begins with
//! `s3rdma-standin`, and s3rdma records a run through it as a test double.
//! `s3rdma_client_memory_type` answers system memory for every pointer: it
//! carries host memory only.
//!
//! Environment, read at `s3rdma_client_init`:
//! - `S3RDMA_STANDIN_UNAVAILABLE=<reason>`: init fails with that reason, as on
//!   a host without a DC-capable HCA.
//! - `S3RDMA_STANDIN_STATS=<path>`: when a client is freed (minio-cpp frees
//!   its process-wide client at exit), one JSON line of its counts is
//!   appended there: registrations (new pins), register and deregister calls,
//!   pins left, tokens minted, failures reported, rails and healthy rails.
//!
//! `prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)` at init lets a test server
//! that is not this process's ancestor reach its memory under Yama's
//! `ptrace_scope = 1`.

#![allow(clippy::missing_safety_doc)]

pub mod token;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard};

use token::Token;

/// The version string: says what this is, so no record can mistake it for libs3rdma.
pub const VERSION: &CStr =
    c"s3rdma-standin 0.1.0 (test double of libs3rdma 0.3.0's client ABI: no RDMA device, no verbs; a test server moves the bytes by process_vm_readv/writev)";

/// Rails when neither the caller nor `S3RDMA_DEVICE` names any.
pub const DEFAULT_RAILS: &str = "127.0.0.2,127.0.0.3";

const MEM_SYSTEM: c_int = 0;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn set_error(msg: impl Into<String>) {
    LAST_ERROR.with(|e| *e.borrow_mut() = msg.into());
}

struct Rail {
    ip: Ipv4Addr,
    healthy: bool,
}

struct Registration {
    size: usize,
    refs: u32,
    key: u32,
}

#[derive(Default)]
struct Counts {
    registrations: u64,
    register_calls: u64,
    deregister_calls: u64,
    tokens: u64,
    failures_reported: u64,
}

struct Client {
    rails: Vec<Rail>,
    next_rail: usize,
    regs: BTreeMap<usize, Registration>,
    next_key: u32,
    counts: Counts,
}

impl Client {
    /// The next rail round-robin, skipping marked ones; all marks clear when none is left.
    fn pick_rail(&mut self) -> usize {
        if self.rails.iter().all(|r| !r.healthy) {
            self.rails.iter_mut().for_each(|r| r.healthy = true);
        }
        loop {
            let i = self.next_rail % self.rails.len();
            self.next_rail = self.next_rail.wrapping_add(1);
            if self.rails[i].healthy {
                return i;
            }
        }
    }

    fn stats_line(&self) -> String {
        let c = &self.counts;
        let healthy = self.rails.iter().filter(|r| r.healthy).count();
        let rails: Vec<String> = self.rails.iter().map(|r| format!("\"{}\"", r.ip)).collect();
        format!(
            "{{\"pid\":{},\"registrations\":{},\"register_calls\":{},\"deregister_calls\":{},\"pinned_at_free\":{},\"tokens\":{},\"failures_reported\":{},\"rails\":[{}],\"healthy_rails\":{}}}",
            std::process::id(),
            c.registrations,
            c.register_calls,
            c.deregister_calls,
            self.regs.len(),
            c.tokens,
            c.failures_reported,
            rails.join(","),
            healthy
        )
    }
}

struct State {
    clients: BTreeMap<usize, Client>,
    next_id: usize,
}

// A BTreeMap because its new() is const: the state is a plain static.
static STATE: Mutex<State> = Mutex::new(State { clients: BTreeMap::new(), next_id: 1 });

fn state() -> MutexGuard<'static, State> {
    // A panic while holding the lock cannot leave the maps half-changed in a way that matters to a test double.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Parse a rail list: comma-separated IPv4 loopback addresses; a wildcard or
/// an empty list means [`DEFAULT_RAILS`].
pub fn parse_rails(spec: &str) -> Result<Vec<Ipv4Addr>, String> {
    let spec = spec.trim();
    let entries: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if entries.is_empty() || entries.iter().any(|e| *e == "0.0.0.0" || *e == "::") {
        return parse_rails(DEFAULT_RAILS);
    }
    let mut out: Vec<Ipv4Addr> = Vec::new();
    for e in entries {
        let ip: Ipv4Addr = e.parse().map_err(|_| {
            format!(
                "stand-in rail '{e}' is not an IPv4 address: the stand-in's rails are loopback addresses such as 127.0.0.2 (S3RDMA_DEVICE=127.0.0.2,127.0.0.3)"
            )
        })?;
        if !ip.is_loopback() {
            return Err(format!(
                "stand-in rail {ip} is not a loopback address (127.0.0.0/8): the control-plane socket is bound to the rail, so it must exist here"
            ));
        }
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    Ok(out)
}

unsafe fn write_err(buf: *mut c_char, len: usize, msg: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = msg.len().min(len - 1);
    // SAFETY: the caller gives `len` writable bytes at `buf`.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), buf.cast::<u8>(), n);
        *buf.add(n) = 0;
    }
}

/// `s3rdma_version`: a static NUL-terminated string beginning `s3rdma-standin`.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_version() -> *const c_char {
    VERSION.as_ptr()
}

/// `s3rdma_check_rdma`: 1 with the rails it would use, or 0 with
/// `S3RDMA_STANDIN_UNAVAILABLE`'s reason or a bad rail list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn s3rdma_check_rdma(errbuf: *mut c_char, errbuf_len: usize) -> c_int {
    let (ok, msg) = match availability(None) {
        Ok(rails) => (1, format!("stand-in: {} rail(s) on loopback ({})", rails.len(), join(&rails))),
        Err(e) => (0, e),
    };
    // SAFETY: as the header says of errbuf.
    unsafe { write_err(errbuf, errbuf_len, &msg) };
    ok
}

fn join(rails: &[Ipv4Addr]) -> String {
    rails.iter().map(Ipv4Addr::to_string).collect::<Vec<_>>().join(",")
}

fn availability(device: Option<&str>) -> Result<Vec<Ipv4Addr>, String> {
    if let Ok(why) = std::env::var("S3RDMA_STANDIN_UNAVAILABLE") {
        return Err(format!("stand-in told to be unavailable (S3RDMA_STANDIN_UNAVAILABLE): {why}"));
    }
    let spec = match device.filter(|d| !d.is_empty()) {
        Some(d) => d.to_string(),
        None => std::env::var("S3RDMA_DEVICE").unwrap_or_default(),
    };
    parse_rails(&spec)
}

/// `s3rdma_last_error`: the calling thread's last error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn s3rdma_last_error(buf: *mut c_char, len: usize) -> usize {
    LAST_ERROR.with(|e| {
        let e = e.borrow();
        // SAFETY: as the header says of buf.
        unsafe { write_err(buf, len, &e) };
        e.len().min(len.saturating_sub(1))
    })
}

/// `s3rdma_client_init`: a client on the named rails (see the crate docs), or NULL with the reason.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn s3rdma_client_init(device: *const c_char, err_buf: *mut c_char, err_buf_len: usize) -> *mut c_void {
    // SAFETY: NULL or a NUL-terminated string, as the header says.
    let device = (!device.is_null()).then(|| unsafe { CStr::from_ptr(device) }.to_string_lossy().into_owned());
    let rails = match availability(device.as_deref()) {
        Ok(r) => r,
        Err(e) => {
            // SAFETY: as the header says of err_buf.
            unsafe { write_err(err_buf, err_buf_len, &e) };
            set_error(e);
            return std::ptr::null_mut();
        }
    };
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
    let mut s = state();
    let id = s.next_id;
    s.next_id += 1;
    let rails = rails.into_iter().map(|ip| Rail { ip, healthy: true }).collect();
    s.clients.insert(id, Client { rails, next_rail: 0, regs: BTreeMap::new(), next_key: 1, counts: Counts::default() });
    id as *mut c_void
}

/// `s3rdma_client_free`: frees a live client (a no-op otherwise), writing its
/// counts to `S3RDMA_STANDIN_STATS` when set.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_free(h: *mut c_void) {
    let Some(c) = state().clients.remove(&(h as usize)) else { return };
    if let Ok(path) = std::env::var("S3RDMA_STANDIN_STATS")
        && let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path)
    {
        let _ = writeln!(f, "{}", c.stats_line());
    }
}

fn with_client<T>(h: *mut c_void, what: &str, refused: T, f: impl FnOnce(&mut Client) -> T) -> T {
    let mut s = state();
    match s.clients.get_mut(&(h as usize)) {
        Some(c) => f(c),
        None => {
            set_error(format!("{what}: not a live client handle"));
            refused
        }
    }
}

/// `s3rdma_client_ready`: 1 for a live client.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_ready(h: *mut c_void) -> c_int {
    with_client(h, "s3rdma_client_ready", 0, |_| 1)
}

/// `s3rdma_client_nic_count`: rails of a live client, else 0.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_nic_count(h: *mut c_void) -> c_int {
    with_client(h, "s3rdma_client_nic_count", 0, |c| c.rails.len() as c_int)
}

/// `s3rdma_client_healthy_nic_count`: rails not marked failed, else 0.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_healthy_nic_count(h: *mut c_void) -> c_int {
    with_client(h, "s3rdma_client_healthy_nic_count", 0, |c| c.rails.iter().filter(|r| r.healthy).count() as c_int)
}

/// `s3rdma_client_report_token_failure`: marks the token's rail; 0 if a rail
/// of this client minted it, else -1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn s3rdma_client_report_token_failure(h: *mut c_void, token: *const c_char) -> c_int {
    if token.is_null() {
        set_error("s3rdma_client_report_token_failure: token is NULL");
        return -1;
    }
    // SAFETY: NUL-terminated, as the header says.
    let text = unsafe { CStr::from_ptr(token) }.to_string_lossy().into_owned();
    with_client(h, "s3rdma_client_report_token_failure", -1, |c| {
        let rail = Token::decode(&text).ok().and_then(|t| t.rail);
        match c.rails.iter_mut().find(|r| Some(r.ip) == rail) {
            Some(r) => {
                r.healthy = false;
                c.counts.failures_reported += 1;
                0
            }
            None => {
                set_error("s3rdma_client_report_token_failure: no rail of this client minted that token");
                -1
            }
        }
    })
}

/// `s3rdma_client_register`: pins `ptr..ptr+size` (reference counted by address); 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_register(h: *mut c_void, ptr: *mut c_void, size: usize) -> c_int {
    with_client(h, "s3rdma_client_register", -1, |c| {
        c.counts.register_calls += 1;
        if ptr.is_null() || size == 0 {
            set_error("s3rdma_client_register: null buffer or zero length");
            return -1;
        }
        if size as u64 > token::MAX_SIZE {
            set_error(format!("s3rdma_client_register: {size} bytes exceed the {} bytes an RDMA descriptor can express", token::MAX_SIZE));
            return -1;
        }
        if let Some(r) = c.regs.get_mut(&(ptr as usize)) {
            r.refs += 1;
            r.size = r.size.max(size);
            return 0;
        }
        let key = c.next_key;
        c.next_key = c.next_key.wrapping_add(1).max(1);
        c.regs.insert(ptr as usize, Registration { size, refs: 1, key });
        c.counts.registrations += 1;
        0
    })
}

/// `s3rdma_client_deregister`: drops one reference; -1 if `ptr` is not pinned.
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_deregister(h: *mut c_void, ptr: *mut c_void) -> c_int {
    with_client(h, "s3rdma_client_deregister", -1, |c| {
        c.counts.deregister_calls += 1;
        let Some(r) = c.regs.get_mut(&(ptr as usize)) else {
            set_error("s3rdma_client_deregister: buffer is not registered");
            return -1;
        };
        r.refs -= 1;
        if r.refs == 0 {
            c.regs.remove(&(ptr as usize));
        }
        0
    })
}

/// `s3rdma_client_get_token`: a descriptor for `size` bytes at `offset`
/// within the registration at `ptr`, on the next usable rail; 0, or -1 with
/// `*token_out` NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn s3rdma_client_get_token(h: *mut c_void, ptr: *mut c_void, size: usize, offset: usize, token_out: *mut *mut c_char) -> c_int {
    if token_out.is_null() {
        set_error("s3rdma_client_get_token: token_out is NULL");
        return -1;
    }
    // SAFETY: a valid out-pointer (checked non-NULL above).
    unsafe { *token_out = std::ptr::null_mut() };
    let minted = with_client(h, "s3rdma_client_get_token", None, |c| {
        let Some(reg) = c.regs.get(&(ptr as usize)) else {
            set_error("s3rdma_client_get_token: buffer is not registered");
            return None;
        };
        if size == 0 || size as u64 > token::MAX_SIZE || offset.checked_add(size).is_none_or(|end| end > reg.size) {
            set_error(format!("s3rdma_client_get_token: {size} bytes at offset {offset} do not fit a registration of {} bytes in one descriptor", reg.size));
            return None;
        }
        let key = reg.key;
        let i = c.pick_rail();
        let ip = c.rails[i].ip;
        c.counts.tokens += 1;
        let pid = std::process::id();
        if pid > 0xff_ffff {
            set_error(format!("s3rdma_client_get_token: process id {pid} does not fit the descriptor's 24-bit qp field"));
            return None;
        }
        Some(Token { addr: ptr as u64 + offset as u64, size: size as u32, rkey: key, lid: (i + 1) as u16, qp: pid, rail: Some(ip), gid: token::mapped_gid(ip) })
    });
    match minted {
        Some(t) => {
            let s = CString::new(t.encode()).expect("hex and colons");
            // SAFETY: as above.
            unsafe { *token_out = s.into_raw() };
            0
        }
        None => -1,
    }
}

/// `s3rdma_client_free_token`: releases a token from [`s3rdma_client_get_token`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn s3rdma_client_free_token(token: *mut c_char) {
    if !token.is_null() {
        // SAFETY: made by CString::into_raw in s3rdma_client_get_token.
        drop(unsafe { CString::from_raw(token) });
    }
}

/// `s3rdma_client_memory_type`: system memory for every pointer (the stand-in carries host memory only).
#[unsafe(no_mangle)]
pub extern "C" fn s3rdma_client_memory_type(_ptr: *const c_void) -> c_int {
    MEM_SYSTEM
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(rails: &str) -> *mut c_void {
        let d = CString::new(rails).unwrap();
        let mut err = [0 as c_char; 256];
        let h = unsafe { s3rdma_client_init(d.as_ptr(), err.as_mut_ptr(), err.len()) };
        assert!(!h.is_null(), "{:?}", unsafe { CStr::from_ptr(err.as_ptr()) });
        h
    }

    fn mint(h: *mut c_void, buf: &mut [u8], size: usize, offset: usize) -> Option<String> {
        let mut out: *mut c_char = std::ptr::null_mut();
        let rc = unsafe { s3rdma_client_get_token(h, buf.as_mut_ptr().cast(), size, offset, &mut out) };
        if rc != 0 {
            assert!(out.is_null());
            return None;
        }
        let s = unsafe { CStr::from_ptr(out) }.to_str().unwrap().to_string();
        unsafe { s3rdma_client_free_token(out) };
        Some(s)
    }

    #[test]
    fn tokens_name_this_process_the_address_the_size_and_rails_round_robin() {
        let h = client("127.0.0.2,127.0.0.3");
        let mut buf = vec![0u8; 8192];
        assert_eq!(mint(h, &mut buf, 10, 0), None, "not registered yet");
        assert_eq!(s3rdma_client_register(h, buf.as_mut_ptr().cast(), buf.len()), 0);
        let a = Token::decode(&mint(h, &mut buf, 4096, 100).unwrap()).unwrap();
        let b = Token::decode(&mint(h, &mut buf, 4096, 0).unwrap()).unwrap();
        assert_eq!((a.addr, a.size, a.qp), (buf.as_ptr() as u64 + 100, 4096, std::process::id()));
        assert_eq!((a.rail, b.rail), (Some(Ipv4Addr::new(127, 0, 0, 2)), Some(Ipv4Addr::new(127, 0, 0, 3))));
        assert_eq!(mint(h, &mut buf, 4096, 4097), None, "past the registration's end");
        // A failure on rail .3 takes it out of rotation: every token names .2 until all are marked.
        let c = mint(h, &mut buf, 1, 0).unwrap();
        let d = mint(h, &mut buf, 1, 0).unwrap();
        assert!(d.ends_with("ffff7f000003"), "{c} {d}");
        let d = CString::new(d).unwrap();
        assert_eq!(unsafe { s3rdma_client_report_token_failure(h, d.as_ptr()) }, 0);
        assert_eq!((s3rdma_client_nic_count(h), s3rdma_client_healthy_nic_count(h)), (2, 1));
        for _ in 0..3 {
            assert!(mint(h, &mut buf, 1, 0).unwrap().ends_with("ffff7f000002"));
        }
        let c = CString::new(c).unwrap();
        assert_eq!(unsafe { s3rdma_client_report_token_failure(h, c.as_ptr()) }, 0);
        assert_eq!(s3rdma_client_healthy_nic_count(h), 0);
        assert!(mint(h, &mut buf, 1, 0).is_some(), "every rail marked: the marks clear");
        assert_eq!(s3rdma_client_healthy_nic_count(h), 2);
        // Reference counted by address.
        assert_eq!(s3rdma_client_register(h, buf.as_mut_ptr().cast(), buf.len()), 0);
        assert_eq!(s3rdma_client_deregister(h, buf.as_mut_ptr().cast()), 0);
        assert!(mint(h, &mut buf, 1, 0).is_some(), "still pinned once");
        assert_eq!(s3rdma_client_deregister(h, buf.as_mut_ptr().cast()), 0);
        assert_eq!(s3rdma_client_deregister(h, buf.as_mut_ptr().cast()), -1);
        s3rdma_client_free(h);
        assert_eq!(s3rdma_client_ready(h), 0, "a freed handle is refused");
        s3rdma_client_free(h);
    }

    #[test]
    fn registrations_above_one_descriptor_are_refused() {
        let h = client("127.0.0.9");
        // The pointer is never touched: registration is bookkeeping only.
        let p = 0x1000 as *mut c_void;
        assert_eq!(s3rdma_client_register(h, p, (1 << 32) - 1), 0);
        assert_eq!(s3rdma_client_register(h, 0x2000 as *mut c_void, 1 << 32), -1);
        let mut err = [0 as c_char; 200];
        unsafe { s3rdma_last_error(err.as_mut_ptr(), err.len()) };
        assert!(unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().contains("4294967295"));
        s3rdma_client_free(h);
    }

    #[test]
    fn rails_must_be_loopback_addresses() {
        assert_eq!(parse_rails("").unwrap(), parse_rails(DEFAULT_RAILS).unwrap());
        assert_eq!(parse_rails("0.0.0.0").unwrap().len(), 2);
        assert_eq!(parse_rails("127.0.0.5, 127.0.0.5").unwrap(), vec![Ipv4Addr::new(127, 0, 0, 5)]);
        assert!(parse_rails("10.0.0.1").unwrap_err().contains("not a loopback address"));
        assert!(parse_rails("mlx5_0").unwrap_err().contains("not an IPv4 address"));
    }
}

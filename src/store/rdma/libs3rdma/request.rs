//! One S3-over-RDMA request on a socket of its own: signed by SigV4 with an
//! unsigned payload (the payload travels by RDMA), carrying the token,
//! written from the token's rail address, and its answer's head read back
//! within a timeout scaled by the bytes the server moves before it answers.
//!
//! Headers as minio-cpp `include/miniocpp/rdma.h` sends them: a GET carries
//! `Range` and the token; a PUT carries `Content-Length: 0`,
//! `Content-Type: application/octet-stream` and the token;
//! `x-amz-content-sha256: UNSIGNED-PAYLOAD`, `x-amz-date` and the
//! signature are the signer's. Connections are kept alive and pooled per
//! rail ([`Pool`]): a request reuses an idle connection whose source
//! address is its token's rail, else opens one bound to that address.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ffi, wire};
use crate::store::http::direct::DirectGet;
use crate::store::http::scaled_read_timeout;

/// How a timed-out request's error begins: the server was slow, which is
/// no evidence against the token's rail.
pub(super) const NO_ANSWER: &str = "no answer";

/// Idle connections kept per rail.
const MAX_IDLE: usize = 64;

/// Idle keep-alive connections by the rail address they were bound to
/// (`None`: a token that names no address).
pub(super) type Pool = std::sync::Mutex<std::collections::HashMap<Option<std::net::Ipv4Addr>, Vec<tokio::net::TcpStream>>>;

/// Largest answer head read, bytes.
const MAX_HEAD: usize = 64 << 10;
/// Largest answer body read (an error's XML), bytes; the rest is left unread.
const MAX_BODY: u64 = 64 << 10;

/// One transfer: `len` bytes at `offset` within the registered buffer at
/// `base`, to or from `key` (a GET's `object_range`; a PUT's whole object).
#[derive(Debug)]
pub(super) struct Piece<'a> {
    /// `GET` or `PUT`.
    pub method: &'static str,
    /// The bucket.
    pub bucket: &'a str,
    /// The object key.
    pub key: &'a str,
    /// A GET's bytes of the object, end exclusive.
    pub object_range: Option<Range<u64>>,
    /// Address of the registered buffer.
    pub base: usize,
    /// Offset of the transfer within it.
    pub offset: usize,
    /// Bytes.
    pub len: u64,
}

/// An answer's head: status, headers (names lower case), body length.
#[derive(Debug)]
pub(super) struct Answer {
    /// The HTTP status.
    pub status: u16,
    headers: Vec<(String, String)>,
    /// `Content-Length`, when the answer said it.
    pub body_len: Option<u64>,
}

impl Answer {
    /// The first value of header `name` (lower case).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Send `piece` with `token` and read the answer's head.
///
/// Errors: what broke, in words (signing, binding the rail's address,
/// connecting, writing, no answer within the scaled timeout, an answer that
/// is not HTTP): every one a failed attempt, whose rail is reported.
pub(super) async fn send(signer: &DirectGet, piece: &Piece<'_>, token: &str, timeouts: (Duration, Duration), pool: &Pool) -> Result<Answer, String> {
    let (connect_timeout, read_timeout) = timeouts;
    let mut signed: Vec<(&str, String)> = Vec::with_capacity(3);
    match &piece.object_range {
        Some(r) => signed.push(("Range", format!("bytes={}-{}", r.start, r.end - 1))),
        None => {
            signed.push(("Content-Length", "0".into()));
            signed.push(("Content-Type", "application/octet-stream".into()));
        }
    }
    signed.push((wire::TOKEN, token.to_string()));
    let refs: Vec<(&str, &str)> = signed.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let head = signer.signed_head(piece.method, piece.bucket, piece.key, "", &refs).await.map_err(|e| e.to_string())?;
    let rail = ffi::rail_of(token);
    let wait = scaled_read_timeout(read_timeout, piece.len);
    let idle = pool.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&rail).and_then(Vec::pop);
    if let Some(mut conn) = idle {
        match tokio::time::timeout(wait, exchange(&mut conn, &head)).await {
            Ok(Ok((answer, reusable))) => {
                keep(pool, rail, conn, reusable);
                return Ok(answer);
            }
            // Closed by the server while idle: nothing was answered, so the request goes again on a fresh connection.
            Ok(Err(e)) if e.starts_with(CLOSED) || e.starts_with(SENDING) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(format!("{NO_ANSWER} within {wait:?} (--read-timeout plus the bytes at 50 MB/s)")),
        }
    }
    let target = tokio::net::lookup_host(signer.addr())
        .await
        .map_err(|e| format!("resolving {}: {e}", signer.addr()))?
        .find(|a| rail.is_none() || a.is_ipv4())
        .ok_or_else(|| format!("{} has no IPv4 address to reach from the token's rail {rail:?}", signer.addr()))?;
    let socket = if target.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }.map_err(|e| format!("socket: {e}"))?;
    if let Some(r) = rail {
        socket.bind(SocketAddr::new(r.into(), 0)).map_err(|e| format!("cannot bind to the token's rail address {r}: {e}"))?;
    }
    let mut conn = tokio::time::timeout(connect_timeout, socket.connect(target))
        .await
        .map_err(|_| format!("connect to {target} timed out after {connect_timeout:?}"))?
        .map_err(|e| format!("connect to {target}: {e}"))?;
    let _ = conn.set_nodelay(true);
    let (answer, reusable) = tokio::time::timeout(wait, exchange(&mut conn, &head))
        .await
        .map_err(|_| format!("{NO_ANSWER} within {wait:?} (--read-timeout plus the bytes at 50 MB/s)"))??;
    keep(pool, rail, conn, reusable);
    Ok(answer)
}

/// Put `conn` back among `rail`'s idle connections when its answer was read whole and the server keeps it open.
fn keep(pool: &Pool, rail: Option<std::net::Ipv4Addr>, conn: tokio::net::TcpStream, reusable: bool) {
    if reusable {
        let mut p = pool.lock().unwrap_or_else(|e| e.into_inner());
        let idle = p.entry(rail).or_default();
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }
}

/// How an error begins when the connection closed before any answer.
const CLOSED: &str = "the connection closed before an answer";
/// How an error begins when the request could not be written.
const SENDING: &str = "sending the request";

/// Write `head`, read the answer's head and up to [`MAX_BODY`] of its body;
/// also whether the connection can carry another request (the body read
/// whole and nothing past it, no `Connection: close`).
async fn exchange(conn: &mut tokio::net::TcpStream, head: &[u8]) -> Result<(Answer, bool), String> {
    conn.write_all(head).await.map_err(|e| format!("{SENDING}: {e}"))?;
    let mut buf = vec![0u8; MAX_HEAD];
    let mut filled = 0;
    loop {
        let n = conn.read(&mut buf[filled..]).await.map_err(|e| format!("reading the answer: {e}"))?;
        if n == 0 {
            return Err(if filled == 0 { CLOSED.into() } else { "the connection closed mid-answer".into() });
        }
        filled += n;
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf[..filled]) {
            Ok(httparse::Status::Complete(used)) => {
                let status = resp.code.unwrap_or(0);
                let headers: Vec<(String, String)> =
                    resp.headers.iter().map(|h| (h.name.to_ascii_lowercase(), String::from_utf8_lossy(h.value).trim().to_string())).collect();
                let body_len = headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse::<u64>().ok());
                let extra = (filled - used) as u64;
                // Reusable only when exactly the body came after the head, read whole.
                let mut whole = body_len.is_some_and(|n| n <= MAX_BODY && extra <= n);
                let mut left = body_len.unwrap_or(0).min(MAX_BODY).saturating_sub(extra);
                while left > 0 {
                    let n = conn.read(&mut buf[..left.min(MAX_HEAD as u64) as usize]).await.map_err(|e| format!("reading the answer's body: {e}"))?;
                    if n == 0 {
                        whole = false;
                        break;
                    }
                    left -= n as u64;
                }
                let close = headers.iter().any(|(k, v)| k == "connection" && v.eq_ignore_ascii_case("close"));
                return Ok((Answer { status, headers, body_len }, whole && !close));
            }
            Ok(httparse::Status::Partial) if filled < buf.len() => continue,
            Ok(httparse::Status::Partial) => return Err(format!("an answer head above {MAX_HEAD} bytes")),
            Err(e) => return Err(format!("not an HTTP answer: {e}")),
        }
    }
}

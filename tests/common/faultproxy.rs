//! A fault-injecting HTTP/1.1 proxy in front of an S3 server, in-process,
//! with these faults: an error status with `Retry-After`, a response cut
//! (FIN) or reset (RST) after n body bytes, a head or body that stalls, a
//! connection refused mid-run.
//!
//! Blocking std sockets and a thread per connection: a handful of
//! connections per test, and a stalled fault is just a sleeping thread. The
//! proxy reads each request whole (Content-Length or chunked), forwards it on
//! a fresh upstream connection, reads the response whole, then applies the
//! fault to what it sends back.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What to do to a matching request.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer `code` with an S3 XML error, and `Retry-After` when given.
    Status { code: u16, retry_after: Option<&'static str> },
    /// Send the response head and `n` body bytes, then reset the connection (RST).
    ResetAfter(usize),
    /// Send the response head and `n` body bytes, then close (FIN): a short body.
    DropAfter(usize),
    /// Forward the request (the server acts on it), then reset the
    /// connection without answering: did the write land?
    ResetUnanswered,
    /// Read the request and never answer.
    StallHead,
    /// Send the response head and `n` body bytes, then stall.
    StallBody(usize),
    /// Close the connection at once without answering (a server gone mid-run).
    Refuse,
    /// Lies a proxy or gateway tells: forward, then shift the
    /// answer's `Content-Range` first and last byte by this many bytes, the
    /// body untouched (`bad_cr`: another range, said in the header).
    ShiftContentRange(i64),
    /// Forward, then add this many bytes to the object size (the total) in
    /// the answer's `Content-Range`, the range and body untouched (`bad_cr`
    /// total: a size no other answer agrees with).
    WrongTotal(u64),
    /// Forward, then answer `200 OK` without `Content-Range` (a proxy that
    /// ignores Range; `range200`).
    Answer200,
    /// Forward, then replace the answer's ETag (the object was replaced
    /// between two ranged GETs of one read, on a server that ignores If-Match).
    NewEtag,
    /// Forward, then flip the body's byte at this offset (bit rot at rest: the
    /// headers are right, only a digest can tell).
    FlipByte(usize),
    /// Forward the request (the server acts on it), then hold its answer
    /// this long before sending it: an answer that outlives the client's
    /// timeout (a CompleteMultipartUpload assembling a large object).
    AnswerLate(Duration),
    /// Answer `200 OK` whose body is S3's `<Error>` with this code, as S3
    /// may answer CompleteMultipartUpload; with `forward`, after the server
    /// acted on the request (the answer replaced), else instead of it.
    ErrorIn200 { code: &'static str, forward: bool },
    /// Answer `403 InvalidAccessKeyId` to a request without this header, as
    /// AWS answers temporary keys sent without `X-Amz-Security-Token`;
    /// forward the others.
    RequireHeader(&'static str),
}

/// Which requests get the fault.
#[derive(Debug, Clone)]
pub struct Rule {
    /// `GET`, `PUT`, `POST`, `HEAD`, or `None` for any.
    pub method: Option<&'static str>,
    /// Only requests whose target contains this.
    pub path_contains: Option<String>,
    /// Let the first `skip` matching requests through.
    pub skip: u32,
    /// Inject into at most this many after `skip` (`None`: all).
    pub count: Option<u32>,
    /// The fault.
    pub fault: Fault,
}

impl Rule {
    /// Every request of `method` (`None`: any) gets `fault`.
    pub fn every(method: Option<&'static str>, fault: Fault) -> Rule {
        Rule { method, path_contains: None, skip: 0, count: None, fault }
    }
}

#[derive(Default)]
struct State {
    rule: Option<Rule>,
    matched: u32,
    injected: u32,
    log: Vec<String>,
    start: Option<std::time::Instant>,
}

/// A running proxy.
pub struct FaultProxy {
    /// `http://127.0.0.1:<port>`: point the client here.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    /// Start a proxy to `upstream` (`http://host:port`) passing everything through.
    pub fn start(upstream: &str) -> FaultProxy {
        let up = upstream.trim_start_matches("http://").trim_end_matches('/').to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let state: Arc<Mutex<State>> = Arc::new(Mutex::new(State { start: Some(std::time::Instant::now()), ..Default::default() }));
        let st = state.clone();
        std::thread::spawn(move || {
            for c in listener.incoming().flatten() {
                let (st, up) = (st.clone(), up.clone());
                std::thread::spawn(move || {
                    let _ = serve(c, &up, &st);
                });
            }
        });
        FaultProxy { endpoint, state }
    }

    /// Inject by `rule` from now on (counters start again).
    pub fn set(&self, rule: Rule) {
        let mut s = self.state.lock().unwrap();
        (s.rule, s.matched, s.injected) = (Some(rule), 0, 0);
    }

    /// Pass everything through from now on.
    pub fn clear(&self) {
        self.state.lock().unwrap().rule = None;
    }

    /// Requests that got the fault since the last [`FaultProxy::set`].
    pub fn injected(&self) -> u32 {
        self.state.lock().unwrap().injected
    }

    /// Seconds since the proxy started (the clock of [`FaultProxy::log`]).
    pub fn elapsed(&self) -> f64 {
        self.state.lock().unwrap().start.map_or(0.0, |t| t.elapsed().as_secs_f64())
    }

    /// Every request seen: `seconds since start METHOD target fault`.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().unwrap().log.clone()
    }
}

fn decide(st: &Mutex<State>, method: &str, target: &str) -> Option<Fault> {
    let mut s = st.lock().unwrap();
    let fault = match s.rule.clone() {
        Some(r) if r.method.is_none_or(|m| m == method) && r.path_contains.as_ref().is_none_or(|p| target.contains(p.as_str())) => {
            s.matched += 1;
            if s.matched <= r.skip || r.count.is_some_and(|c| s.injected >= c) {
                None
            } else {
                s.injected += 1;
                Some(r.fault)
            }
        }
        _ => None,
    };
    let t = s.start.map_or(0.0, |t| t.elapsed().as_secs_f64());
    s.log.push(format!("{t:.3} {method} {target} {fault:?}"));
    fault
}

/// A message's head: the first line and the headers, as read.
struct Head {
    first: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
    fn bytes(&self) -> Vec<u8> {
        let mut out = format!("{}\r\n", self.first);
        for (k, v) in &self.headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str("\r\n");
        out.into_bytes()
    }
}

fn read_head(r: &mut impl BufRead) -> std::io::Result<Option<Head>> {
    let mut first = String::new();
    if r.read_line(&mut first)? == 0 {
        return Ok(None);
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(Some(Head { first: first.trim_end().to_string(), headers }))
}

/// The body as framed by the head (raw chunks when chunked); `none` for
/// messages that have no body whatever the head says (HEAD answers, 1xx, 204, 304).
fn read_body(r: &mut impl BufRead, h: &Head, none: bool) -> std::io::Result<Vec<u8>> {
    if none {
        return Ok(Vec::new());
    }
    if let Some(n) = h.get("content-length") {
        let mut body = vec![0; n.parse().unwrap_or(0)];
        r.read_exact(&mut body)?;
        return Ok(body);
    }
    let mut out = Vec::new();
    if h.get("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut line = String::new();
            r.read_line(&mut line)?;
            out.extend_from_slice(line.as_bytes());
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("0").trim(), 16).unwrap_or(0);
            if size == 0 {
                loop {
                    let mut t = String::new();
                    r.read_line(&mut t)?;
                    out.extend_from_slice(t.as_bytes());
                    if t == "\r\n" || t.is_empty() {
                        return Ok(out);
                    }
                }
            }
            let mut chunk = vec![0; size + 2];
            r.read_exact(&mut chunk)?;
            out.extend_from_slice(&chunk);
        }
    }
    Ok(out)
}

/// Close with RST rather than FIN (SO_LINGER 0).
/// `bytes a-b/t` as ((a, b), t).
fn parse_cr(v: &str) -> Option<((u64, u64), u64)> {
    let (r, t) = v.trim().strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = r.split_once('-')?;
    Some(((a.parse().ok()?, b.parse().ok()?), t.parse().ok()?))
}

fn reset(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: a valid socket and a linger struct of the size passed.
    unsafe {
        libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, &l as *const _ as *const libc::c_void, size_of::<libc::linger>() as u32);
    }
}

/// `200 OK` with S3's error XML of `code` as its body.
fn error_in_200(code: &str) -> Vec<u8> {
    let xml =
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>injected into a 200</Message><RequestId>x</RequestId></Error>");
    format!("HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{xml}", xml.len()).into_bytes()
}

const STALL: Duration = Duration::from_secs(600);

// One proxied connection's whole exchange, read top to bottom: each fault is one branch of it.
#[allow(clippy::too_many_lines)]
fn serve(client: TcpStream, upstream: &str, st: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut out = client;
    while let Some(mut req) = read_head(&mut reader)? {
        if req.get("expect").is_some_and(|e| e.eq_ignore_ascii_case("100-continue")) {
            out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
            req.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("expect"));
        }
        let body = read_body(&mut reader, &req, false)?;
        let mut parts = req.first.split(' ');
        let (method, target) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let fault = decide(st, &method, &target);
        match &fault {
            Some(Fault::Refuse) => {
                reset(&out);
                return Ok(());
            }
            Some(Fault::StallHead) => {
                std::thread::sleep(STALL);
                return Ok(());
            }
            Some(Fault::RequireHeader(name)) if req.get(name).is_none() => {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>";
                // A HEAD answer carries no body, whatever its length says.
                let body = if method == "HEAD" { "" } else { xml };
                out.write_all(format!("HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}", xml.len()).as_bytes())?;
                continue;
            }
            Some(Fault::ErrorIn200 { code, forward: false }) => {
                out.write_all(&error_in_200(code))?;
                continue;
            }
            Some(Fault::Status { code, retry_after }) => {
                let s3 = match *code {
                    503 => "SlowDown",
                    412 => "PreconditionFailed",
                    403 => "AccessDenied",
                    _ => "InternalError",
                };
                let xml = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{s3}</Code><Message>injected {code}</Message><RequestId>x</RequestId></Error>"
                );
                let mut h = format!("HTTP/1.1 {code} Injected\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n", xml.len());
                if let Some(ra) = retry_after {
                    h.push_str(&format!("Retry-After: {ra}\r\n"));
                }
                out.write_all(format!("{h}\r\n{xml}").as_bytes())?;
                continue;
            }
            _ => {}
        }
        let mut up = TcpStream::connect(upstream)?;
        up.write_all(&req.bytes())?;
        up.write_all(&body)?;
        let mut ur = BufReader::new(up);
        let resp = read_head(&mut ur)?.ok_or_else(|| std::io::Error::other("upstream closed"))?;
        let code: u16 = resp.first.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let rbody = read_body(&mut ur, &resp, method == "HEAD" || code < 200 || code == 204 || code == 304)?;
        let fault = match fault {
            // A body fault needs a body longer than the bytes it lets through.
            Some(Fault::ResetAfter(n) | Fault::DropAfter(n) | Fault::StallBody(n)) if rbody.len() <= n => {
                let mut s = st.lock().unwrap();
                s.injected -= 1;
                s.log.push(format!("  (body of {} bytes: passed whole)", rbody.len()));
                None
            }
            f => f,
        };
        if let Some(Fault::ResetUnanswered) = fault {
            reset(&out);
            return Ok(());
        }
        let mut resp = resp;
        let mut rbody = rbody;
        match &fault {
            Some(Fault::ShiftContentRange(d)) => {
                for (k, v) in resp.headers.iter_mut() {
                    if let (true, Some(((a, b), t))) = (k.eq_ignore_ascii_case("content-range"), parse_cr(v)) {
                        *v = format!("bytes {}-{}/{t}", a as i64 + d, b as i64 + d);
                    }
                }
            }
            Some(Fault::WrongTotal(d)) => {
                for (k, v) in resp.headers.iter_mut() {
                    if let (true, Some(((a, b), t))) = (k.eq_ignore_ascii_case("content-range"), parse_cr(v)) {
                        *v = format!("bytes {a}-{b}/{}", t + d);
                    }
                }
            }
            Some(Fault::Answer200) => {
                resp.first = "HTTP/1.1 200 OK".into();
                resp.headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-range"));
            }
            Some(Fault::NewEtag) => {
                for (k, v) in resp.headers.iter_mut() {
                    if k.eq_ignore_ascii_case("etag") {
                        *v = "\"replaced-mid-read\"".into();
                    }
                }
            }
            Some(Fault::FlipByte(n)) if !rbody.is_empty() => {
                let i = n % rbody.len();
                rbody[i] ^= 1;
            }
            _ => {}
        }
        match &fault {
            Some(Fault::AnswerLate(d)) => std::thread::sleep(*d),
            Some(Fault::ErrorIn200 { code, forward: true }) => {
                out.write_all(&error_in_200(code))?;
                continue;
            }
            _ => {}
        }
        out.write_all(&resp.bytes())?;
        match fault {
            Some(Fault::ResetAfter(n)) => {
                out.write_all(&rbody[..n.min(rbody.len())])?;
                out.flush()?;
                reset(&out);
                return Ok(());
            }
            Some(Fault::DropAfter(n)) => {
                out.write_all(&rbody[..n.min(rbody.len())])?;
                out.shutdown(Shutdown::Both)?;
                return Ok(());
            }
            Some(Fault::StallBody(n)) => {
                out.write_all(&rbody[..n.min(rbody.len())])?;
                out.flush()?;
                std::thread::sleep(STALL);
                return Ok(());
            }
            _ => out.write_all(&rbody)?,
        }
    }
    Ok(())
}

//! Tests of the direct GET against scripted servers: body into the buffer, connection reuse, and every malformed or stalled answer.
use super::*;
use crate::store::http::aws::{AwsExplicit, AwsSetup};

/// Explicit keys (and token) only, as a library caller hands them over.
fn keys(ak: &str, sk: &str, token: Option<&str>, region: &str) -> AwsSetup {
    AwsSetup::explicit_only(&AwsExplicit {
        access_key: Some(ak.into()),
        secret_key: Some(sk.into()),
        session_token: token.map(str::to_string),
        region: Some(region.into()),
        ..Default::default()
    })
    .unwrap()
}

/// A request head as `d` signs it now.
async fn head_of(d: &DirectGet, key: &str) -> String {
    let identity = d.identity().await.unwrap();
    String::from_utf8(d.request(&identity, "b", key, 0, 9, None).unwrap()).unwrap()
}

#[tokio::test]
async fn keys_are_escaped_like_s3() {
    let d = DirectGet::new("http://127.0.0.1:9000", &keys("ak", "sk", None, "us-east-1"), Duration::from_secs(1), Duration::from_secs(1), 1).unwrap();
    let head = head_of(&d, "dir/a b+c~ü.bin").await;
    assert!(head.starts_with("GET /b/dir/a%20b%2Bc~%C3%BC.bin HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nRange: bytes=0-9\r\n"), "{head}");
    assert!(head.contains("x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"), "{head}");
    let auth = head.lines().find(|l| l.starts_with("authorization: ")).expect("signed");
    assert!(auth.contains("Credential=ak/") && auth.contains("/us-east-1/s3/aws4_request"), "{auth}");
    assert!(auth.contains("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"), "{auth}");
    assert!(head.ends_with("\r\n\r\n"));
    assert!(!head.contains("x-amz-security-token"), "{head}");
}

/// Temporary credentials: the session token is sent and signed, as every AWS
/// tool sends it (without it the server does not know the temporary key id).
#[tokio::test]
async fn the_session_token_is_sent_and_signed() {
    let d = DirectGet::new("http://127.0.0.1:9000", &keys("ASIATEMP", "sk", Some("tok/en+1"), "eu-west-1"), Duration::from_secs(1), Duration::from_secs(1), 1)
        .unwrap();
    let head = head_of(&d, "k").await;
    assert!(head.contains("x-amz-security-token: tok/en+1\r\n"), "{head}");
    let auth = head.lines().find(|l| l.starts_with("authorization: ")).expect("signed");
    assert!(auth.contains("Credential=ASIATEMP/") && auth.contains("/eu-west-1/s3/aws4_request"), "{auth}");
    assert!(auth.contains("x-amz-security-token"), "the token is among the signed headers: {auth}");
}

/// A provider that counts its calls; credentials number `n` expire
/// `lifetime(n)` after they are handed out.
#[derive(Debug)]
struct Rotating(std::sync::Arc<std::sync::atomic::AtomicU32>, fn(u32) -> Duration);

impl aws_credential_types::provider::ProvideCredentials for Rotating {
    fn provide_credentials<'a>(&'a self) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let n = self.0.fetch_add(1, Ordering::SeqCst);
        let expiry = SystemTime::now() + (self.1)(n);
        aws_credential_types::provider::future::ProvideCredentials::ready(Ok(Credentials::new(
            format!("KEY{n}"),
            "sk",
            Some(format!("t{n}")),
            Some(expiry),
            "test",
        )))
    }
}

/// A direct GET signing with `Rotating` credentials, the first obtained at set-up.
async fn rotating(lifetime: fn(u32) -> Duration) -> (DirectGet, std::sync::Arc<std::sync::atomic::AtomicU32>) {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let provider = aws_credential_types::provider::SharedCredentialsProvider::new(Rotating(calls.clone(), lifetime));
    let mut setup = keys("unused", "unused", None, "us-east-1");
    setup.credentials = aws_credential_types::provider::ProvideCredentials::provide_credentials(&provider).await.unwrap();
    setup.provider = provider;
    (DirectGet::new("http://127.0.0.1:9000", &setup, Duration::from_secs(1), Duration::from_secs(1), 1).unwrap(), calls)
}

/// Credentials about to expire are asked for again before a request is
/// signed with them, and the fresh ones are kept.
#[tokio::test]
async fn credentials_about_to_expire_are_refreshed_before_signing() {
    // The first live 1.2 s (refreshed after 1 s, the shortest gap), the next an hour.
    let (d, calls) = rotating(|n| if n == 0 { Duration::from_millis(1200) } else { Duration::from_secs(3600) }).await;
    assert!(head_of(&d, "k").await.contains("Credential=KEY0/"), "fresh at first");
    tokio::time::sleep(Duration::from_millis(1050)).await;
    let first = head_of(&d, "k").await;
    assert!(first.contains("Credential=KEY1/") && first.contains("x-amz-security-token: t1\r\n"), "refreshed near expiry: {first}");
    let second = head_of(&d, "k").await;
    assert!(second.contains("Credential=KEY1/"), "fresh credentials are kept: {second}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "asked once at set-up and once to refresh");
}

/// Credentials that live 30 s (under the 60 s margin) are not asked for
/// again on every request: 500 requests in a row sign with the set-up's.
#[tokio::test]
async fn short_lived_credentials_are_not_refreshed_per_request() {
    let (d, calls) = rotating(|_| Duration::from_secs(30)).await;
    for _ in 0..500 {
        assert!(head_of(&d, "k").await.contains("Credential=KEY0/"));
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1, "asked at set-up only");
}

#[test]
fn https_and_port_80() {
    let e = DirectGet::new("https://h", &keys("a", "s", None, "r"), Duration::from_secs(1), Duration::from_secs(1), 1).unwrap_err();
    assert!(e.contains("--http-get sdk"), "{e}");
    let d = DirectGet::new("http://h", &keys("a", "s", None, "r"), Duration::from_secs(1), Duration::from_secs(1), 1).unwrap();
    assert_eq!((d.addr.as_str(), d.host_header.as_str()), ("h:80", "h"));
}

/// A scripted HTTP server on loopback: `answer(connection no., request no.
/// on it)` gives the bytes to write for each request head it reads, and
/// whether to close the connection after them. Returns the port and the
/// count of connections accepted.
async fn scripted(answer: impl Fn(usize, usize) -> (Vec<u8>, bool) + Send + Sync + 'static) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    scripted_on_request(move |c, r, _| answer(c, r)).await
}

/// As [`scripted`], the answer also given the request head it answers.
async fn scripted_on_request(
    answer: impl Fn(usize, usize, &str) -> (Vec<u8>, bool) + Send + Sync + 'static,
) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let conns = std::sync::Arc::new(AtomicUsize::new(0));
    let answer = std::sync::Arc::new(answer);
    let counter = conns.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut req = 0;
                loop {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match sock.read(&mut b).await {
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    let (bytes, close) = answer(n, req, &String::from_utf8_lossy(&head));
                    req += 1;
                    if sock.write_all(&bytes).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    (port, conns)
}

fn client(port: u16, attempts: u32) -> DirectGet {
    DirectGet::new(&format!("http://127.0.0.1:{port}"), &keys("ak", "sk", None, "us-east-1"), Duration::from_secs(2), Duration::from_millis(300), attempts)
        .unwrap()
}

fn partial(body: &[u8], total: usize) -> Vec<u8> {
    let mut r =
        format!("HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes 0-{}/{total}\r\n\r\n", body.len(), body.len() - 1).into_bytes();
    r.extend_from_slice(body);
    r
}

async fn get(d: &DirectGet, len: usize) -> Result<Vec<u8>, DirectError> {
    let mut resp = d.send("b", "k", 0, len as u64 - 1, None).await?;
    let mut dst = vec![0u8; resp.content_length as usize];
    resp.read_into(&mut dst).await?;
    let served = resp.content_range.as_deref().and_then(crate::store::http::served::content_range);
    assert!(served.as_ref().is_some_and(|(r, size)| *r.start() == 0 && *size >= len as u64), "{:?}", resp.content_range);
    d.recycle(resp);
    Ok(dst)
}

#[tokio::test]
async fn body_lands_in_the_buffer_and_connections_are_reused() {
    let body: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let b2 = body.clone();
    let (port, conns) = scripted(move |_, _| (partial(&b2, 200_000), false)).await;
    let d = client(port, 1);
    for _ in 0..3 {
        assert_eq!(get(&d, body.len()).await.unwrap(), body);
    }
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 1, "one kept-alive connection serves all three");
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_replaced() {
    // One request per connection, then the server hangs up without saying so.
    let (port, conns) = scripted(|_, _| (partial(b"0123456789", 1000), true)).await;
    let d = client(port, 1); // no retries: the stale connection must not count as one
    for _ in 0..3 {
        assert_eq!(get(&d, 10).await.unwrap(), b"0123456789");
    }
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn bad_answers_are_named() {
    let (port, _) = scripted(|_, _| (b"HTTP/1.1 206 Partial Content\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n".to_vec(), false)).await;
    let e = get(&client(port, 1), 5).await.unwrap_err().to_string();
    assert!(e.contains("chunked") && e.contains("--http-get sdk"), "{e}");

    let (port, _) = scripted(|_, _| {
        let mut r = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 100\r\nContent-Range: bytes 0-99/1000\r\n\r\n".to_vec();
        r.extend_from_slice(&[b'x'; 50]); // half the body, then the server hangs up
        (r, true)
    })
    .await;
    let e = get(&client(port, 1), 100).await.unwrap_err().to_string();
    assert!(e.contains("after 50 of 100"), "{e}");

    // Head sent, body never comes: the read timeout (300 ms here) ends it.
    let (port, _) = scripted(|_, _| (b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nContent-Range: bytes 0-9/1000\r\n\r\n".to_vec(), false)).await;
    let t = Instant::now();
    let e = get(&client(port, 1), 10).await.unwrap_err().to_string();
    assert!(e.contains("after 0 of 10") && e.contains("--read-timeout"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2));

    let xml = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>gone</Message></Error>";
    let not_found = format!("HTTP/1.1 404 Not Found\r\nContent-Length: {}\r\n\r\n{xml}", xml.len()).into_bytes();
    let (port, _) = scripted(move |_, _| (not_found.clone(), false)).await;
    match get(&client(port, 3), 10).await {
        Err(DirectError::Status { status: 404, code, message, .. }) => assert_eq!((code.as_str(), message.as_str()), ("NoSuchKey", "gone")),
        other => panic!("{:?}", other.map(|v| v.len())),
    }
}

#[tokio::test]
async fn server_errors_are_retried_up_to_attempts() {
    // The first two connections answer 503 (and are dropped), the third the data.
    let answer = |conn, _| {
        if conn < 2 { (b"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n".to_vec(), false) } else { (partial(b"abc", 1000), false) }
    };
    let (port, _) = scripted(answer).await;
    assert_eq!(get(&client(port, 3), 3).await.unwrap(), b"abc");
    let (port, _) = scripted(answer).await;
    match get(&client(port, 2), 3).await {
        Err(DirectError::Status { status: 503, .. }) => {}
        other => panic!("{:?}", other.map(|v| v.len())),
    }
}

#[tokio::test]
async fn bytes_past_the_body_are_caught() {
    // Stray bytes that arrive with the head: the response is refused.
    let (port, _) = scripted(|_, _| {
        let mut r = partial(b"0123456789", 1000);
        r.extend_from_slice(b"HTTP/1.1 206 Partial Content\r\n");
        (r, false)
    })
    .await;
    let e = get(&client(port, 1), 10).await.unwrap_err().to_string();
    assert!(e.contains("more than the 10 bytes of its Content-Length"), "{e}");

    // Stray bytes that arrive after the body was read: the connection is
    // not reused (they would be read as the next response).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let conns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = conns.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let mut b = [0u8; 4096];
                while sock.read(&mut b).await.is_ok_and(|k| k > 0) {
                    let _ = sock.write_all(&partial(b"0123456789", 1000)).await;
                    if n == 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = sock.write_all(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\n\r\nWRONGBYTES").await;
                    }
                }
            });
        }
    });
    let d = client(port, 1);
    assert_eq!(get(&d, 10).await.unwrap(), b"0123456789");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(get(&d, 10).await.unwrap(), b"0123456789", "the stray response was not taken for this one");
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 2, "the dirty connection was dropped");
}

#[tokio::test]
async fn a_timeout_on_a_pooled_connection_counts_as_an_attempt() {
    // Answers once per connection, then goes silent on it.
    let (port, conns) = scripted(|_, req| if req == 0 { (partial(b"abc", 1000), false) } else { (Vec::new(), false) }).await;
    let d = client(port, 1);
    assert_eq!(get(&d, 3).await.unwrap(), b"abc");
    let t = Instant::now();
    let e = get(&d, 3).await.unwrap_err().to_string();
    assert!(e.contains("--read-timeout"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 1, "no free retry on a fresh connection");
}

#[tokio::test]
async fn the_read_timeout_bounds_a_trickling_head() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut b = [0u8; 4096];
        let _ = sock.read(&mut b).await;
        for byte in b"HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\n".iter().cycle() {
            if sock.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let t = Instant::now();
    let e = get(&client(port, 1), 3).await.unwrap_err().to_string();
    assert!(e.contains("no complete response head") && e.contains("--read-timeout"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[tokio::test]
async fn interim_answers_and_bad_lengths() {
    let (port, _) = scripted(|_, _| {
        let mut r = b"HTTP/1.1 100 Continue\r\n\r\n".to_vec();
        r.extend_from_slice(&partial(b"xyz", 1000));
        (r, false)
    })
    .await;
    assert_eq!(get(&client(port, 1), 3).await.unwrap(), b"xyz");

    let (port, _) = scripted(|_, _| (b"HTTP/1.1 206 Partial Content\r\nContent-Length: banana\r\n\r\n".to_vec(), false)).await;
    let e = get(&client(port, 1), 3).await.unwrap_err().to_string();
    assert!(e.contains("invalid Content-Length 'banana'"), "{e}");

    let (port, _) = scripted(|_, _| (b"HTTP/1.1 206 Partial Content\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabc".to_vec(), false)).await;
    let e = get(&client(port, 1), 3).await.unwrap_err().to_string();
    assert!(e.contains("conflicting Content-Length"), "{e}");
}

#[test]
fn error_fields() {
    let x = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The key does not exist</Message></Error>";
    assert_eq!(xml_field(x, "Code").as_deref(), Some("NoSuchKey"));
    assert_eq!(xml_field(x, "Message").as_deref(), Some("The key does not exist"));
    assert_eq!(xml_field("<html>nope</html>", "Code"), None);
}

/// A server answering `503 SlowDown` with `Retry-After: 1` twice, then the
/// data. Each retry waits at least the second the server asked for, carries
/// its own `x-amz-date` and signature, and is counted.
#[tokio::test]
async fn retries_wait_for_retry_after_and_are_signed_afresh() {
    use std::sync::{Arc, Mutex};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads: Arc<Mutex<Vec<(std::time::Instant, String)>>> = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if sock.read(&mut b).await.unwrap_or(0) == 0 {
                    break;
                }
                head.push(b[0]);
            }
            let n = {
                let mut h = seen.lock().unwrap();
                h.push((std::time::Instant::now(), String::from_utf8_lossy(&head).into_owned()));
                h.len()
            };
            let answer = if n <= 2 {
                b"HTTP/1.1 503 Slow Down\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
            } else {
                partial(b"abc", 1000)
            };
            let _ = sock.write_all(&answer).await;
        }
    });
    let d = client(port, 3);
    assert_eq!(get(&d, 3).await.unwrap(), b"abc");
    let h = heads.lock().unwrap().clone();
    assert_eq!(h.len(), 3);
    for w in h.windows(2) {
        let gap = w[1].0 - w[0].0;
        assert!(gap >= Duration::from_millis(1000) && gap < Duration::from_millis(1500), "waited {gap:?}, asked 1 s");
    }
    let header = |head: &str, name: &str| head.lines().find(|l| l.to_ascii_lowercase().starts_with(name)).map(str::to_string);
    let sigs: Vec<_> = h.iter().map(|(_, head)| (header(head, "x-amz-date:"), header(head, "authorization:"))).collect();
    assert!(sigs[0].0.is_some() && sigs[0].1.is_some());
    assert_ne!(sigs[0], sigs[1], "a retry is signed afresh");
    assert_ne!(sigs[1], sigs[2]);
    assert_eq!(d.retries.counters()[0], ("get_retries_5xx", 2));
    // A server asking for more than MAX_RETRY_AFTER: the error, at once, not a stall.
    let (port, _) = scripted(|_, _| (b"HTTP/1.1 503 Slow Down\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n".to_vec(), false)).await;
    let d = client(port, 3);
    let t0 = std::time::Instant::now();
    match get(&d, 3).await {
        Err(DirectError::Status { status: 503, retry_after: Some(w), .. }) => assert_eq!(w, Duration::from_secs(120)),
        other => panic!("{:?}", other.map(|v| v.len())),
    }
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[test]
fn retry_after_is_seconds_or_an_http_date() {
    assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
    assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO), "a date in the past: no wait");
    let later = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(5));
    let w = parse_retry_after(&later).unwrap();
    assert!(w > Duration::from_secs(3) && w <= Duration::from_secs(5), "{w:?}");
    assert_eq!(parse_retry_after("soon"), None);
    assert_eq!(parse_retry_after("-1"), None);
    assert_eq!(parse_retry_after("99999999999999999999"), Some(Duration::MAX), "more seconds than a u64 holds: past any bound, not ignored");
}

/// A server whose clock is an hour ahead refuses requests signed at this
/// host's time (`RequestTimeTooSkewed`, its `Date` saying its time): the
/// direct path learns the difference from that answer and signs again at the
/// server's time, as the SDK does; a server that keeps refusing is not asked
/// forever.
#[tokio::test]
async fn a_skewed_server_clock_is_learnt_from_its_date_and_requests_are_signed_again() {
    const AHEAD: Duration = Duration::from_secs(3600);
    let answer = |_c: usize, _r: usize, head: &str| {
        let server_now = SystemTime::now() + AHEAD;
        let signed =
            head.lines().find_map(|l| l.strip_prefix("x-amz-date: ")).and_then(|d| chrono::NaiveDateTime::parse_from_str(d.trim(), "%Y%m%dT%H%M%SZ").ok());
        let server_ts = chrono::DateTime::<chrono::Utc>::from(server_now).naive_utc();
        if signed.is_some_and(|t| (t - server_ts).num_seconds().abs() <= 900) {
            return (partial(b"abc", 3), false);
        }
        let body =
            "<Error><Code>RequestTimeTooSkewed</Code><Message>The difference between the request time and the current time is too large.</Message></Error>";
        (format!("HTTP/1.1 403 Forbidden\r\nDate: {}\r\nContent-Length: {}\r\n\r\n{body}", httpdate::fmt_http_date(server_now), body.len()).into_bytes(), false)
    };
    let (port, _) = scripted_on_request(answer).await;
    let d = client(port, 1);
    assert_eq!(get(&d, 3).await.unwrap(), b"abc");
    assert!((d.skew_ms() - 3_600_000).abs() < 5_000, "learnt skew {} ms", d.skew_ms());
    assert_eq!(get(&d, 3).await.unwrap(), b"abc", "the next request is signed at the server's time at once");

    // A server that refuses every time (its Date is not the problem): one more try, then the answer.
    let (port, _) = scripted(|_, _| {
        let body = "<Error><Code>RequestTimeTooSkewed</Code><Message>no</Message></Error>";
        (
            format!("HTTP/1.1 403 Forbidden\r\nDate: {}\r\nContent-Length: {}\r\n\r\n{body}", httpdate::fmt_http_date(SystemTime::now() + AHEAD), body.len())
                .into_bytes(),
            false,
        )
    })
    .await;
    let d = client(port, 3);
    let skew = d.skew_ms();
    match get(&d, 3).await {
        Err(DirectError::Status { status: 403, code, .. }) => assert_eq!(code, "RequestTimeTooSkewed"),
        other => panic!("{:?}", other.map(|v| v.len())),
    }
    assert_ne!(d.skew_ms(), skew, "learnt once");
}

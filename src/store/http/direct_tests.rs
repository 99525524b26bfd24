//! Tests of the direct GET against scripted servers: body into the buffer, connection reuse, and every malformed or stalled answer.
use super::*;

#[test]
fn keys_are_escaped_like_s3() {
    let d = DirectGet::new("http://127.0.0.1:9000", "ak", "sk", "us-east-1", Duration::from_secs(1), Duration::from_secs(1), 1).unwrap();
    let head = String::from_utf8(d.request("b", "dir/a b+c~ü.bin", 0, 9, None).unwrap()).unwrap();
    assert!(head.starts_with("GET /b/dir/a%20b%2Bc~%C3%BC.bin HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nRange: bytes=0-9\r\n"), "{head}");
    assert!(head.contains("x-amz-content-sha256: UNSIGNED-PAYLOAD\r\n"), "{head}");
    let auth = head.lines().find(|l| l.starts_with("authorization: ")).expect("signed");
    assert!(auth.contains("Credential=ak/") && auth.contains("/us-east-1/s3/aws4_request"), "{auth}");
    assert!(auth.contains("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"), "{auth}");
    assert!(head.ends_with("\r\n\r\n"));
}

#[test]
fn https_and_port_80() {
    let e = DirectGet::new("https://h", "a", "s", "r", Duration::from_secs(1), Duration::from_secs(1), 1).unwrap_err();
    assert!(e.contains("--http-get sdk"), "{e}");
    let d = DirectGet::new("http://h", "a", "s", "r", Duration::from_secs(1), Duration::from_secs(1), 1).unwrap();
    assert_eq!((d.addr.as_str(), d.host_header.as_str()), ("h:80", "h"));
}

/// A scripted HTTP server on loopback: `answer(connection no., request no.
/// on it)` gives the bytes to write for each request head it reads, and
/// whether to close the connection after them. Returns the port and the
/// count of connections accepted.
async fn scripted(answer: impl Fn(usize, usize) -> (Vec<u8>, bool) + Send + Sync + 'static) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
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
                    let (bytes, close) = answer(n, req);
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
    DirectGet::new(&format!("http://127.0.0.1:{port}"), "ak", "sk", "us-east-1", Duration::from_secs(2), Duration::from_millis(300), attempts).unwrap()
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
}

//! HTTPS in front of the in-process S3 server, with a private CA made at test
//! time by the `openssl` command (as an administrator makes one), so a test
//! can reach an https endpoint whose certificate no system store trusts.
//!
//! A thread per connection: each request (head and `Content-Length` body) is
//! read from the TLS stream, sent to the plain-HTTP server on a connection of
//! its own with `Connection: close`, and its answer, read to the end, is
//! written back. Handshakes are counted, so a test can tell a retried
//! connection from one attempt.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A private CA and a server certificate it signed for 127.0.0.1.
pub struct Pki {
    /// The CA's certificate (PEM): what a client must be told to trust.
    pub ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// Make a CA and a server certificate in `dir`; `None` (with a printed reason) without `openssl`.
pub fn make_pki(dir: &Path) -> Option<Pki> {
    let run = |args: &[&str]| std::process::Command::new("openssl").args(args).current_dir(dir).output();
    let ok = |args: &[&str]| matches!(run(args), Ok(o) if o.status.success());
    if run(&["version"]).is_err() {
        eprintln!("SKIP: no openssl command to make a private CA with");
        return None;
    }
    let steps: [&[&str]; 4] = [
        &["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=s3rdma test CA"],
        &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1"],
        &["x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "san.ext"],
        &["x509", "-in", "srv.pem", "-noout"],
    ];
    std::fs::write(dir.join("san.ext"), "subjectAltName = IP:127.0.0.1\n").unwrap();
    for s in steps {
        assert!(ok(s), "openssl {s:?} failed: {:?}", run(s).map(|o| String::from_utf8_lossy(&o.stderr).into_owned()));
    }
    Some(Pki { ca: dir.join("ca.pem"), cert: dir.join("srv.pem"), key: dir.join("srv.key") })
}

/// A running HTTPS front.
pub struct TlsFront {
    /// `https://127.0.0.1:<port>`
    pub endpoint: String,
    /// TLS handshakes begun (accepted TCP connections).
    pub handshakes: Arc<AtomicU32>,
}

/// Serve `upstream` (`http://host:port`) over TLS with `pki`'s server certificate.
pub fn start(pki: &Pki, upstream: &str) -> TlsFront {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&pki.cert).unwrap().collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_file(&pki.key).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("https://{}", listener.local_addr().unwrap());
    let handshakes = Arc::new(AtomicU32::new(0));
    let (count, up) = (handshakes.clone(), upstream.trim_start_matches("http://").trim_end_matches('/').to_string());
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let (config, up) = (config.clone(), up.clone());
            std::thread::spawn(move || {
                let Ok(conn) = rustls::ServerConnection::new(config) else { return };
                let _ = serve(BufReader::new(rustls::StreamOwned::new(conn, tcp)), &up);
            });
        }
    });
    TlsFront { endpoint, handshakes }
}

fn serve<S: Read + Write>(mut client: BufReader<S>, upstream: &str) -> std::io::Result<()> {
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = Vec::new();
            if client.read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            let end = line == b"\r\n";
            // Every answer ends its connection upstream, so the answer is read to its end.
            if !end && !line.to_ascii_lowercase().starts_with(b"connection:") {
                head.extend_from_slice(&line);
            }
            if end {
                break;
            }
        }
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let len = text.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse::<usize>().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        client.read_exact(&mut body)?;
        let mut up = TcpStream::connect(upstream)?;
        up.write_all(&head)?;
        up.write_all(b"Connection: close\r\n\r\n")?;
        up.write_all(&body)?;
        let mut answer = Vec::new();
        up.read_to_end(&mut answer)?;
        client.get_mut().write_all(&answer)?;
        client.get_mut().flush()?;
    }
}

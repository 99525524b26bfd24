//! The wire rules of S3 over RDMA, as the libs3rdma engine judges every
//! reply itself: one function ([`judge`]) from an answer's status and
//! headers to an [`Outcome`], and the rules it applies listed in [`RULES`]
//! so `verify` can report each.
//!
//! Sources: minio-rs `src/s3/rdma/protocol.rs` (200/204/206 success, an
//! explicit 501 declined, a missing reply header a failure), NIXL PR #1840
//! (only an explicit 501 is a decline), the aws-c-s3 fork's
//! `RDMA_PROTOCOL_SPEC.md` v1.0 draft (`Content-Length: 0` on success;
//! `x-amz-rdma-bytes-transferred` required on GET and equal to the range's
//! size; a declined PUT may come back as HTTP 200 with reply 501), and
//! minio-cpp `include/miniocpp/rdma.h` (the headers a request carries).
//! Where they differ this engine takes the strictest: libminiocpp assumes
//! the whole size arrived when the byte count is missing, and takes any
//! HTTP 200 with an ETag as a PUT's success whatever the reply says.

/// The reply header naming the RDMA outcome.
pub const REPLY: &str = "x-amz-rdma-reply";
/// The reply header counting the bytes the server moved.
pub const BYTES: &str = "x-amz-rdma-bytes-transferred";
/// The request header carrying the token.
pub const TOKEN: &str = "x-amz-rdma-token";

/// What one RDMA request's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The server moved exactly the asked bytes by RDMA.
    Rdma,
    /// The server declined RDMA (reply 501, whatever the HTTP status): this
    /// request goes over HTTP instead.
    Declined,
    /// The server answered success but its byte count is missing, unreadable
    /// or not the asked size: nothing is counted as RDMA, the bytes are read
    /// again over HTTP. `got` is the count it gave, when it gave one.
    Miscounted {
        /// The server's count, when readable.
        got: Option<u64>,
    },
    /// The transfer failed (a reply of 500, no reply header on a 2xx, an
    /// HTTP error): its rail is reported and another token tried.
    Failed {
        /// What the answer said, for the record's message.
        why: String,
    },
}

/// One wire rule: its name (as `verify` prints it) and what it requires.
pub const RULES: [(&str, &str); 6] = [
    ("success", "a transfer is RDMA only with HTTP 2xx, reply 200/204/206 and x-amz-rdma-bytes-transferred equal to the asked size"),
    ("decline", "reply 501 declines RDMA for that request (the client goes over HTTP), whatever the HTTP status"),
    ("put-200-501", "a PUT answered HTTP 200 with reply 501 is a decline, never a success"),
    ("missing-reply", "a 2xx answer without x-amz-rdma-reply is a failure, not a decline"),
    ("count", "a missing, unreadable or short x-amz-rdma-bytes-transferred is never counted as RDMA"),
    ("empty-body", "a successful RDMA answer carries no HTTP body (Content-Length: 0)"),
];

/// A rule the answer exercised: its name in [`RULES`], and whether the
/// server's answer followed it (`false`: the server broke it).
pub type Exercised = (&'static str, bool);

/// Judge an answer of `status` whose headers `header(name)` returns (lower
/// case names), to a request that asked for `asked` bytes, with a body of
/// `body_len` bytes (`None`: not said). Also returns the rules the answer
/// exercised ([`Exercised`]), and a dialect warning when the answer carries
/// a byte-count header this engine does not know.
pub fn judge<'a>(
    status: u16,
    header: impl Fn(&str) -> Option<&'a str>,
    asked: u64,
    is_put: bool,
    body_len: Option<u64>,
) -> (Outcome, Vec<Exercised>, Option<String>) {
    let dialect = match (header(BYTES), header("x-amz-rdma-bytes")) {
        (None, Some(_)) => Some(
            "the server counts bytes in x-amz-rdma-bytes, not x-amz-rdma-bytes-transferred: a dialect this engine does not read, so nothing is counted as RDMA"
                .to_string(),
        ),
        _ => None,
    };
    let reply = header(REPLY).map(str::trim);
    let mut rules = Vec::new();
    if reply == Some("501") {
        rules.push(("decline", true));
        if is_put && status == 200 {
            rules.push(("put-200-501", true));
        }
        return (Outcome::Declined, rules, dialect);
    }
    if !(200..300).contains(&status) {
        return (Outcome::Failed { why: format!("HTTP {status}, reply {}", reply.unwrap_or("absent")) }, rules, dialect);
    }
    let Some(reply) = reply else {
        rules.push(("missing-reply", false));
        return (Outcome::Failed { why: format!("HTTP {status} without {REPLY}") }, rules, dialect);
    };
    if !matches!(reply, "200" | "204" | "206") {
        return (Outcome::Failed { why: format!("HTTP {status}, reply {reply}") }, rules, dialect);
    }
    if body_len.is_some_and(|n| n > 0) {
        rules.push(("empty-body", false));
        return (
            Outcome::Failed { why: format!("reply {reply} with a body of {} bytes: the data did not travel by RDMA alone", body_len.unwrap_or(0)) },
            rules,
            dialect,
        );
    }
    rules.push(("empty-body", true));
    let got = header(BYTES).and_then(|v| v.trim().parse::<u64>().ok());
    rules.push(("count", got == Some(asked)));
    if got != Some(asked) {
        return (Outcome::Miscounted { got }, rules, dialect);
    }
    rules.push(("success", true));
    (Outcome::Rdma, rules, dialect)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(status: u16, headers: &[(&'static str, &'static str)], asked: u64, is_put: bool) -> Outcome {
        judge(status, |n| headers.iter().find(|(k, _)| *k == n).map(|(_, v)| *v), asked, is_put, Some(0)).0
    }

    #[test]
    fn success_needs_the_reply_and_the_exact_count() {
        assert_eq!(j(206, &[(REPLY, "206"), (BYTES, "4096")], 4096, false), Outcome::Rdma);
        assert_eq!(j(200, &[(REPLY, "200"), (BYTES, "4096")], 4096, true), Outcome::Rdma);
        // Short, long, missing or unreadable counts are never RDMA.
        assert_eq!(j(206, &[(REPLY, "206"), (BYTES, "4000")], 4096, false), Outcome::Miscounted { got: Some(4000) });
        assert_eq!(j(206, &[(REPLY, "206"), (BYTES, "5000")], 4096, false), Outcome::Miscounted { got: Some(5000) });
        assert_eq!(j(200, &[(REPLY, "200")], 4096, false), Outcome::Miscounted { got: None });
        assert_eq!(j(200, &[(REPLY, "200"), (BYTES, "lots")], 4096, false), Outcome::Miscounted { got: None });
    }

    #[test]
    fn only_an_explicit_501_declines_and_a_put_under_200_is_no_success() {
        assert_eq!(j(501, &[(REPLY, "501")], 1, false), Outcome::Declined);
        let (o, rules, _) = judge(200, |n| (n == REPLY).then_some("501"), 1, true, Some(0));
        assert_eq!(o, Outcome::Declined);
        assert!(rules.contains(&("put-200-501", true)), "{rules:?}");
        // A missing count breaks the count rule; an exact one follows it and succeeds.
        let (_, rules, _) = judge(200, |n| (n == REPLY).then_some("200"), 1, false, Some(0));
        assert_eq!(rules, [("empty-body", true), ("count", false)]);
        let (_, rules, _) = judge(206, |n| [(REPLY, "206"), (BYTES, "1")].iter().find(|(k, _)| *k == n).map(|(_, v)| *v), 1, false, Some(0));
        assert_eq!(rules, [("empty-body", true), ("count", true), ("success", true)]);
        // No reply header on a 2xx: a failure (minio-rs), not a decline (libminiocpp).
        assert!(matches!(j(200, &[(BYTES, "1")], 1, false), Outcome::Failed { .. }));
        // A 500 reply, an HTTP error: failures.
        assert!(matches!(j(500, &[(REPLY, "500")], 1, false), Outcome::Failed { .. }));
        assert!(matches!(j(403, &[], 1, false), Outcome::Failed { .. }));
    }

    #[test]
    fn a_body_on_success_and_an_unknown_dialect_are_named() {
        let (o, _, _) = judge(206, |n| [(REPLY, "206"), (BYTES, "8")].iter().find(|(k, _)| *k == n).map(|(_, v)| *v), 8, false, Some(8));
        assert!(matches!(o, Outcome::Failed { ref why } if why.contains("body of 8 bytes")), "{o:?}");
        let (o, _, d) = judge(206, |n| [(REPLY, "206"), ("x-amz-rdma-bytes", "8")].iter().find(|(k, _)| *k == n).map(|(_, v)| *v), 8, false, Some(0));
        assert_eq!(o, Outcome::Miscounted { got: None });
        assert!(d.is_some_and(|d| d.contains("x-amz-rdma-bytes,")));
    }
}

//! The `x-amz-rdma-token` descriptor: 81 ASCII characters,
//! `raddr:rsize:rkey:lid:qp:has_gid:gid` printed as
//! `%016x:%08x:%08x:%04x:%06x:%01x:%032x`.
//!
//! Sources: the field layout is the cuObject token as NooBaa's S3-over-RDMA
//! server reads it (<https://github.com/noobaa/noobaa-core>, "raddr:rsize:
//! rkey:lid:qp:has_gid:gid", printf format above); the
//! length of 81 is libs3rdma's own check ("invalid descriptor length:
//! expected 81"); the GID as the last 32 hex digits, IPv4-mapped
//! (`...ffffAABBCCDD`) for a RoCEv2 rail over IPv4, is what minio-cpp's
//! `parseClientNICFromToken` (`include/miniocpp/rdma.h`) and minio-rs's
//! `parse_client_nic_from_token` (`src/s3/rdma/protocol.rs`) read to pin
//! the control-plane socket to the token's NIC. `rsize` is 8 hex digits: one
//! descriptor names at most 4 GiB - 1 bytes (minio-cpp
//! `kRDMAMaxMemoryRegSize`).
//!
//! What a stand-in puts where a real HCA puts its own values: `rkey` is the
//! registration's number within its client, `lid` the rail's number (1-based)
//! and `qp` the process id, since the test server reaches the registered
//! memory through the process (`process_vm_readv`/`process_vm_writev`), not
//! through a queue pair.

use std::fmt;
use std::net::Ipv4Addr;

/// Length of a descriptor in characters.
pub const LEN: usize = 81;

/// Largest transfer one descriptor names: the size field is 32 bits.
pub const MAX_SIZE: u64 = u32::MAX as u64;

/// A decoded descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// Address of the first byte of the transfer in the client's memory.
    pub addr: u64,
    /// Bytes the transfer may move, at most [`MAX_SIZE`].
    pub size: u32,
    /// Memory key: here, the registration's number within its client.
    pub rkey: u32,
    /// Here, the rail's number (1-based).
    pub lid: u16,
    /// Queue pair number (24 bits): here, the client's process id.
    pub qp: u32,
    /// The rail's address, from an IPv4-mapped GID; `None` when the GID is
    /// not IPv4-mapped (InfiniBand, IPv6): such a token names no address.
    pub rail: Option<Ipv4Addr>,
    /// The GID, 16 bytes.
    pub gid: u128,
}

/// Why a header value is not a descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadToken(pub String);

impl fmt::Display for BadToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadToken {}

/// The IPv4-mapped GID of `ip` (`::ffff:a.b.c.d`), as a RoCEv2 rail over IPv4 has.
pub fn mapped_gid(ip: Ipv4Addr) -> u128 {
    (0xffffu128 << 32) | u128::from(u32::from(ip))
}

impl Token {
    /// The 81-character descriptor.
    pub fn encode(&self) -> String {
        format!("{:016x}:{:08x}:{:08x}:{:04x}:{:06x}:1:{:032x}", self.addr, self.size, self.rkey, self.lid, self.qp & 0xff_ffff, self.gid)
    }

    /// Decode a header value: the 81-character descriptor as minio-cpp sends
    /// it, or minio-rs's `descriptor:addr:size` (`format_rdma_token`), whose
    /// trailing address and size must agree with the descriptor's.
    ///
    /// Errors: a wrong length, a field that is not hexadecimal of its width,
    /// `has_gid` other than 1, or a suffix that disagrees.
    pub fn decode(value: &str) -> Result<Token, BadToken> {
        let (desc, suffix) = if value.len() > LEN { value.split_at(LEN) } else { (value, "") };
        if desc.len() != LEN {
            return Err(BadToken(format!("invalid descriptor length: expected {LEN}, got {}", desc.len())));
        }
        let f: Vec<&str> = desc.split(':').collect();
        let widths = [16, 8, 8, 4, 6, 1, 32];
        if f.len() != widths.len() || f.iter().zip(widths).any(|(s, w)| s.len() != w || !s.bytes().all(|b| b.is_ascii_hexdigit())) {
            return Err(BadToken(format!("descriptor '{desc}' is not raddr:rsize:rkey:lid:qp:has_gid:gid (%016x:%08x:%08x:%04x:%06x:%01x:%032x)")));
        }
        let hex = |s: &str| u128::from_str_radix(s, 16).expect("checked hex of at most 32 digits");
        if f[5] != "1" {
            return Err(BadToken(format!("descriptor has_gid is {}: a RoCE token names its GID", f[5])));
        }
        let gid = hex(f[6]);
        let rail = (gid >> 32 == 0xffff).then(|| Ipv4Addr::from(gid as u32));
        let t = Token { addr: hex(f[0]) as u64, size: hex(f[1]) as u32, rkey: hex(f[2]) as u32, lid: hex(f[3]) as u16, qp: hex(f[4]) as u32, rail, gid };
        if !suffix.is_empty() {
            let parts: Vec<&str> = suffix.trim_start_matches(':').split(':').collect();
            let agree = suffix.starts_with(':')
                && parts.len() == 2
                && u64::from_str_radix(parts[0], 16).ok() == Some(t.addr)
                && u64::from_str_radix(parts[1], 16).ok() == Some(u64::from(t.size));
            if !agree {
                return Err(BadToken(format!("token suffix '{suffix}' is not :addr:size of the descriptor (expected descriptor:addr:size)")));
            }
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Token {
        let ip = Ipv4Addr::new(127, 0, 0, 3);
        Token { addr: 0x7f00_dead_b000, size: 0xffff_ffff, rkey: 7, lid: 2, qp: 4_194_303, rail: Some(ip), gid: mapped_gid(ip) }
    }

    #[test]
    fn a_descriptor_is_81_characters_and_ends_with_the_rails_mapped_gid() {
        let s = sample().encode();
        assert_eq!(s.len(), LEN);
        assert_eq!(s, "00007f00deadb000:ffffffff:00000007:0002:3fffff:1:00000000000000000000ffff7f000003");
        assert_eq!(Token::decode(&s), Ok(sample()));
    }

    #[test]
    fn minio_rs_suffix_is_accepted_only_when_it_agrees() {
        let s = sample().encode();
        assert_eq!(Token::decode(&format!("{s}:00007f00deadb000:00000000ffffffff")), Ok(sample()));
        assert!(Token::decode(&format!("{s}:00007f00deadb001:00000000ffffffff")).is_err());
        assert!(Token::decode(&format!("{s}:00007f00deadb000")).is_err());
    }

    #[test]
    fn malformed_descriptors_are_refused_with_the_reason() {
        let s = sample().encode();
        assert!(Token::decode(&s[..80]).unwrap_err().0.contains("expected 81, got 80"));
        assert!(Token::decode(&s.replace(":1:", ":0:")).unwrap_err().0.contains("has_gid"));
        assert!(Token::decode(&s.replacen('7', "g", 1)).unwrap_err().0.contains("raddr:rsize"));
        let ib = Token { rail: None, gid: 0xfe80 << 112, ..sample() };
        assert_eq!(Token::decode(&ib.encode()).unwrap().rail, None, "an InfiniBand GID names no address");
    }
}

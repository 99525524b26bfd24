//! Flag values that are the store's, memory's and ranks' own enums: the CLI
//! says how each is spelled on the command line and what its help says, so
//! those modules need not know clap (clap's `ValueEnum` implemented here, at
//! the edge, rather than derived where the enums live).

use clap::ValueEnum;
use clap::builder::PossibleValue;

use crate::mem::Dest;
use crate::ranks::Rendezvous;
use crate::store::{Backend, ChecksumMode, HttpGet};

/// `impl ValueEnum` for a fieldless enum: each variant, its flag spelling
/// and its help line. (clap's derive would put clap into the module the enum lives in.)
macro_rules! flag_values {
    ($t:ident { $($v:ident => $name:literal, $help:literal;)+ }) => {
        impl clap::ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($t::$v),+]
            }
            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                Some(match self {
                    $($t::$v => clap::builder::PossibleValue::new($name).help($help),)+
                })
            }
        }
    };
}

// Backend and Dest spell their flags with their own `name()` (also used in
// records and messages), so they are written out rather than given twice.
impl ValueEnum for Backend {
    fn value_variants<'a>() -> &'a [Self] {
        &[Backend::Local, Backend::Http, Backend::Rdma]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(match self {
            Backend::Local => "A local filesystem directory (bucket = directory under --root)",
            Backend::Http => "Any S3 endpoint over HTTP(S): ranged GETs per `--http-get`, everything else through aws-sdk-s3",
            Backend::Rdma => "S3 over RDMA through libminiocpp's C ABI (AIStor: GPU-Direct into device memory, host memory too with libs3rdma)",
        }))
    }
}

impl ValueEnum for Dest {
    fn value_variants<'a>() -> &'a [Self] {
        &[Dest::Host, Dest::Pinned, Dest::Device]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(match self {
            Dest::Host => "Pageable host memory",
            Dest::Pinned => "Page-locked host memory",
            Dest::Device => "GPU device memory",
        }))
    }
}

flag_values!(ChecksumMode {
    WhenRequired => "when-required", "Only when the operation requires it (the default: costs no CPU on GETs)";
    WhenSupported => "when-supported", "Whenever the server sends a checksum (whole-object GETs; ranged GETs carry none)";
});

flag_values!(HttpGet {
    Auto => "auto", "direct for plain http:// endpoints without --response-checksums when-supported, sdk otherwise";
    Sdk => "sdk", "aws-sdk-s3: the body arrives in the client's chunks and is copied into the buffer";
    Direct => "direct", "SigV4-signed HTTP/1.1 GET read from the socket straight into the buffer (http:// only)";
});

flag_values!(Rendezvous {
    Leader => "leader", "Every rank PUTs a marker; rank 0 lists the step until all are there and PUTs one `go` object, which the others poll (HEAD) with back-off and jitter: O(1) requests per rank per barrier besides those polls";
    List => "list", "Every rank PUTs a marker and lists the step until all are there: O(N) listings of up to N keys per poll round. The baseline `s3rdma barrier` compares with; use it only for that";
});

#[cfg(test)]
mod tests {
    use super::*;

    /// The names on the command line are the names in records (serde).
    #[test]
    fn flag_values_are_the_recorded_names() {
        fn same<T: ValueEnum + serde::Serialize>() {
            for v in T::value_variants() {
                let flag = v.to_possible_value().unwrap().get_name().to_string();
                assert_eq!(serde_json::to_value(v).unwrap(), serde_json::Value::String(flag));
            }
        }
        same::<Backend>();
        same::<ChecksumMode>();
        same::<HttpGet>();
        same::<Dest>();
        same::<Rendezvous>();
    }
}

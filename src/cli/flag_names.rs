//! How the flags other layers name ([`crate::flag`]) are written: looked up
//! in the parser's own definition (every subcommand's long flags), so what a
//! message says is what the parser accepts.

use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

use crate::flag::Flag;
use clap::CommandFactory;

/// Every long flag of every subcommand, keyed as [`Flag::name`] keys them
/// (`ACCESS_KEY` -> `access-key`).
fn longs() -> &'static HashMap<String, String> {
    static LONGS: OnceLock<HashMap<String, String>> = OnceLock::new();
    LONGS.get_or_init(|| {
        let mut all = HashMap::new();
        let mut todo = vec![super::Cli::command()];
        while let Some(cmd) = todo.pop() {
            for long in cmd.get_arguments().filter_map(|a| a.get_long()) {
                all.insert(long.to_uppercase().replace('-', "_"), long.to_string());
            }
            todo.extend(cmd.get_subcommands().cloned());
        }
        all
    })
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match longs().get(self.name()) {
            Some(long) => write!(f, "--{long}"),
            // Never for a flag in crate::flag::ALL (tested below); kept readable regardless.
            None => write!(f, "--{}", self.name().to_lowercase().replace('_', "-")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag another layer names is a flag the parser has.
    #[test]
    fn every_named_flag_is_one_of_the_parsers() {
        let missing: Vec<&str> = crate::flag::ALL.iter().map(|f| f.name()).filter(|n| !longs().contains_key(*n)).collect();
        assert!(missing.is_empty(), "named in src/flag.rs but no subcommand has them: {missing:?}");
        assert_eq!(crate::flag::ACCESS_KEY.to_string(), "--access-key");
        assert_eq!(format!("pass {}", crate::flag::RDMA_NO_RANGE), "pass --rdma-no-range");
    }
}

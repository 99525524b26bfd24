//! The command line read once, in `main`: clap's parse, with a note where
//! clap's own suggestion misleads (it offers the closest spelling, so
//! `tokens --duration` was told about `--region`).

use clap::Parser;
use clap::error::{ContextKind, ContextValue, ErrorKind};

use super::Cli;

/// Parse the process's arguments; on a bad command line, print clap's error
/// (for a run-length flag the subcommand does not take: which flag sets its
/// length, in place of clap's tip) and exit 2 (0 for `--help` and `--version`).
pub fn parse() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if e.kind() == ErrorKind::UnknownArgument
                && let Some(ContextValue::String(flag)) = e.get(ContextKind::InvalidArg)
            {
                let argv: Vec<String> = std::env::args().skip(1).collect();
                let command = argv.iter().find(|a| !a.starts_with('-')).map(String::as_str).unwrap_or("");
                if let Some(note) = length_note(command, flag) {
                    // Instead of clap's tip, which offers the nearest spelling (`--region` for `--duration`).
                    eprintln!("error: unexpected argument '{flag}' found\n\nnote: {note}\n\nFor more information, try '--help'.");
                    std::process::exit(2);
                }
            }
            e.exit()
        }
    }
}

/// Which flag sets the run's length in `command`, when `flag` is a run-length
/// flag (`--duration`, `--iters`) of another subcommand.
fn length_note(command: &str, flag: &str) -> Option<String> {
    let flag = flag.split('=').next().unwrap_or(flag);
    if flag != "--duration" && flag != "--iters" {
        return None;
    }
    let how = match command {
        "tokens" => "reads --run-bytes of token data per repeat, --repeats times",
        "train" => "times --repeats runs of warm-up then timed steps",
        "ckpt" => "times whole saves and restores: how many with --repeats",
        "weights" => "times whole loads: how many with --repeats",
        "barrier" => "times --barriers meetings",
        _ => return None,
    };
    Some(format!("only fetch runs for a time (--duration) or a count of GETs (--iters); {command} {how}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_length_flags_of_other_benches_get_a_note() {
        let n = length_note("tokens", "--duration").unwrap();
        assert!(n.contains("tokens reads --run-bytes"), "{n}");
        assert!(length_note("ckpt", "--iters=3").unwrap().contains("--repeats"));
        assert!(length_note("barrier", "--duration").unwrap().contains("--barriers"));
        assert_eq!(length_note("tokens", "--regoin"), None, "a misspelling keeps clap's own tip");
        assert_eq!(length_note("fetch", "--duration"), None);
    }
}

//! ckpt's second table, the training view: one line per save that ran
//! beside a training load ([`super::train_view::TrainRow`]).

use comfy_table::{Table, presets::UTF8_FULL_CONDENSED};

use super::results::Row;
use super::train_view::TrainRow;
use crate::stats::Spread;

/// `median (min–max)`, or the median alone when the repeats agree; `-` for none.
fn cell(s: Option<&Spread>, digits: usize) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.max > s.min => format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max, d = digits),
        Some(s) => format!("{:.d$}", s.median, d = digits),
    }
}

/// The training view's table, after ckpt's own: one line per save with a training load.
pub(super) fn print_train_table(rows: &[Row], device: &str, side: usize) {
    let saves: Vec<(&Row, &TrainRow)> = rows.iter().filter_map(|r| r.train.as_ref().map(|t| (r, t))).collect();
    if saves.is_empty() {
        return;
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "state",
        "method",
        "step ms (no-save run)",
        "step ms before",
        "stall s",
        "steps while persisting",
        "step ms while persisting",
        "slowdown",
        "first step ms after stall",
        "step ms after",
        "blocked s",
    ]);
    for (r, x) in saves {
        let ref_ms = Spread { median: x.reference_step_s.median * 1e3, min: x.reference_step_s.min * 1e3, max: x.reference_step_s.max * 1e3 };
        t.add_row([
            r.state.clone(),
            r.method.name().to_string(),
            cell(Some(&ref_ms), 2),
            cell(Some(&x.step_before_ms), 2),
            cell(Some(&x.stall_s), 3),
            cell(Some(&x.steps_during_persistence), 0),
            cell(x.step_during_persistence_ms.as_ref(), 2),
            x.persistence_slowdown.as_ref().map_or("-".into(), |s| format!("{}x", cell(Some(s), 2))),
            cell(x.first_step_after_stall_ms.as_ref(), 2),
            cell(x.step_after_ms.as_ref(), 2),
            cell(Some(&x.blocked_s), 3),
        ]);
    }
    println!(
        "training view: a {side} x {side} x {side} GEMM step in a loop beside each save ({device}); worst rank per repeat; blocked s = run time less the same steps at the rate before and after the save"
    );
    println!("{t}");
}

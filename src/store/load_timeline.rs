//! Where a device load's time went ([`super::file_pipeline`]): per stage,
//! per reader thread and per part, for the record and one terminal line.

use serde::{Deserialize, Serialize};

use super::FileIo;

/// Where a load's time went, by stage: the sums over reader threads, per
/// thread, and per part. Seconds from the load's start where a point in time
/// is meant (`*_at_s`), else durations.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadTimeline {
    /// How chunks were read (`pread`, `mmap`).
    pub file_io: FileIo,
    /// Reader threads.
    pub threads: usize,
    /// Bytes per chunk (one read, one host-to-device copy).
    pub chunk_bytes: u64,
    /// Pinned bounce buffers in the pool, each with its own copy stream.
    pub bounce_buffers: usize,
    /// Chunks read.
    pub chunks: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Start of the load to every copy done.
    pub wall_s: f64,
    /// Sum over threads of seconds reading chunks into bounce buffers.
    pub read_s: f64,
    /// Sum over threads of seconds waiting for a bounce buffer's previous copy.
    pub copy_wait_s: f64,
    /// Sum over threads of seconds queuing copies (the driver's call).
    pub enqueue_s: f64,
    /// Sum over threads of seconds hashing staged bytes (a checked load:
    /// [`super::StagedCheck`]; 0 otherwise), not counted in `read_s`.
    pub hash_s: f64,
    /// From the last reader's end to every copy done (the copies' tail).
    pub drain_s: f64,
    /// Each reader thread's share.
    pub by_thread: Vec<ThreadTimeline>,
    /// Each part's span.
    pub by_part: Vec<PartTimeline>,
}

/// One reader thread's figures in a [`LoadTimeline`].
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ThreadTimeline {
    /// Chunks it read.
    pub chunks: u64,
    /// Bytes it read.
    pub bytes: u64,
    /// Seconds reading.
    pub read_s: f64,
    /// Seconds waiting for its bounce buffers' copies.
    pub copy_wait_s: f64,
    /// Seconds queuing copies.
    pub enqueue_s: f64,
    /// Seconds hashing staged bytes (a checked load).
    pub hash_s: f64,
    /// When it ended, from the load's start.
    pub done_at_s: f64,
}

/// One part's span in a [`LoadTimeline`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartTimeline {
    /// The object's key.
    pub key: String,
    /// Bytes of the part.
    pub bytes: u64,
    /// When its first read began, from the load's start.
    pub first_read_at_s: f64,
    /// When its last read ended (its last copy was queued right after).
    pub last_read_at_s: f64,
}

impl LoadTimeline {
    /// One line for the terminal: where the time went.
    pub fn line(&self) -> String {
        let n = self.threads.max(1) as f64;
        format!(
            "stages: {} threads ({}), {} chunks of {} MiB through {} bounce buffers; per thread {:.3} s reading, {:.3} s waiting for copies, {:.3} s queuing{}; copies' tail {:.3} s; wall {:.3} s",
            self.threads,
            self.file_io.name(),
            self.chunks,
            self.chunk_bytes >> 20,
            self.bounce_buffers,
            self.read_s / n,
            self.copy_wait_s / n,
            self.enqueue_s / n,
            if self.hash_s > 0.0 { format!(", {:.3} s hashing as staged", self.hash_s / n) } else { String::new() },
            self.drain_s,
            self.wall_s
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_line_says_per_thread_figures() {
        let t = LoadTimeline {
            file_io: FileIo::Pread,
            threads: 4,
            chunk_bytes: 16 << 20,
            bounce_buffers: 8,
            chunks: 10,
            bytes: 160 << 20,
            wall_s: 1.0,
            read_s: 2.0,
            copy_wait_s: 0.4,
            enqueue_s: 0.04,
            hash_s: 0.0,
            drain_s: 0.1,
            by_thread: vec![],
            by_part: vec![],
        };
        let l = t.line();
        assert!(l.contains("4 threads (pread), 10 chunks of 16 MiB through 8 bounce buffers"), "{l}");
        assert!(l.contains("0.500 s reading, 0.100 s waiting for copies, 0.010 s queuing"), "{l}");
    }
}

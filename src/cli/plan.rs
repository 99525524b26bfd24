//! The one place flags become configuration (ripgrep's low args to high
//! args): each subcommand's parsed flags turn into the plan its bench runs,
//! with every default resolved (the destination memory, staging, AWS
//! settings, `--cold`, whether to prepare). No bench sees a flag.

use super::{
    BarrierArgs, CkptArgs, FetchArgs, GroupArgs, IngestImagesArgs, IngestKind, IngestTokensArgs, MemArgs, OutputArgs, ReportArgs, StoreArgs, TokensArgs,
    TrainArgs, VerifyArgs, WeightsArgs, WitnessArgs,
};
use crate::bench::barrier::BarrierPlan;
use crate::bench::ckpt::{CkptPlan, RestoreCache, TrainLoadPlan};
use crate::bench::fetch::{FetchPlan, Timing};
use crate::bench::session::RunPlan;
use crate::bench::tokens::TokensPlan;
use crate::bench::train::TrainPlan;
use crate::bench::verify::VerifyPlan;
use crate::bench::weights::WeightsPlan;
use crate::ingest::{ImagesIngest, IngestPlan, TokensIngest, WeightsIngest, WeightsSource};
use crate::report::ReportPlan;

/// The shared flag groups as one [`RunPlan`]: memory per `--dest` and the
/// staging flags (host memory for a bench without them), ranks per the group
/// flags (`None` for a single-process bench).
fn run_plan(store: &StoreArgs, witness: &WitnessArgs, mem: Option<&MemArgs>, output: &OutputArgs, group: Option<&GroupArgs>) -> RunPlan {
    RunPlan {
        store: store.config(),
        witness: witness.config(store),
        require_rdma: witness.require_rdma,
        mem: mem.map_or_else(crate::mem::MemConfig::host, MemArgs::config),
        output: output.config(),
        group: group.map(GroupArgs::config),
        default_local_dir: store.is_default_local_dir(),
    }
}

impl super::SharedArgs {
    /// The plan of a bench with no flags of its own.
    pub fn plan(self) -> crate::bench::session::SharedPlan {
        let r = &self.run;
        crate::bench::session::SharedPlan {
            run: run_plan(&self.store, &self.witness, None, &self.output, None),
            timing: Timing { duration: r.duration, iters: r.iters, warmup: r.warmup, repeats: r.repeats },
            prepare: r.prepare_for(&self.store),
            prefix: self.prefix,
        }
    }
}

impl FetchArgs {
    /// The plan `s3rdma fetch` runs.
    pub fn plan(self) -> FetchPlan {
        let r = &self.run;
        FetchPlan {
            run: run_plan(&self.store, &self.witness, Some(&self.mem), &self.output, Some(&self.group)),
            timing: Timing { duration: r.duration, iters: r.iters, warmup: r.warmup, repeats: r.repeats },
            prepare: r.prepare_for(&self.store),
            sizes: self.sizes,
            concurrency: self.concurrency,
            objects: self.objects,
            prefix: self.prefix,
            procs: self.procs,
            stream_buffer: self.stream_buffer,
            series: self.series,
            verify: self.verify,
        }
    }
}

impl CkptArgs {
    /// The plan `s3rdma ckpt` runs (`--cold` is `--restore-cache cold`).
    pub fn plan(self) -> CkptPlan {
        CkptPlan {
            run: run_plan(&self.store, &self.witness, Some(&self.mem), &self.output, Some(&self.group)),
            workload: self.workload,
            sizes: self.sizes,
            methods: self.methods,
            ops: self.ops,
            chunk: self.chunk,
            concurrency: self.concurrency,
            repeats: self.repeats,
            checksum: self.checksum,
            prefix: self.prefix,
            seed: self.seed,
            ranks: self.ranks,
            keep: self.keep,
            restore_cache: if self.cold { RestoreCache::Cold } else { self.restore_cache },
            train_load: self.train_load.then_some(TrainLoadPlan { gemm_side: self.train_gemm }),
        }
    }
}

impl WeightsArgs {
    /// The plan `s3rdma weights` runs. Local files into device memory (but
    /// `--direct`) are read by reader threads of their own
    /// (`store::file_pipeline`), with [`super::auto::local_device_load`]'s
    /// settings where flags leave them out. Otherwise staged device reads
    /// pool their bounce buffers over the shards,
    /// [`super::auto::WEIGHTS_BOUNCE_BUFFERS`] from a server and
    /// [`super::auto::WEIGHTS_LOCAL_BOUNCE_BUFFERS`] from local files
    /// unless `--bounce-buffers` says.
    pub fn plan(self) -> WeightsPlan {
        let mut run = run_plan(&self.store, &self.witness, Some(&self.mem), &self.output, None);
        let readers = self.store.backend == crate::store::Backend::Local && run.mem.dest == crate::mem::Dest::Device && !self.store.direct;
        if readers {
            let l = super::auto::local_device_load(self.store.io_threads, self.mem.stage_chunk, self.mem.bounce_buffers);
            (run.store.io_threads, run.store.io_threads_source) = (l.threads.value, l.threads.source);
            run.mem.chunk_bytes = (l.chunk.value, l.chunk.source);
            run.mem.bounce_buffers = (l.buffers.value, l.buffers.source);
        } else if self.mem.bounce_buffers.is_none() {
            let b = match self.store.backend {
                crate::store::Backend::Local => super::auto::WEIGHTS_LOCAL_BOUNCE_BUFFERS,
                _ => super::auto::WEIGHTS_BOUNCE_BUFFERS,
            };
            run.mem.bounce_buffers = (b.value, b.source);
        }
        WeightsPlan {
            run,
            model: self.model,
            concurrency: self.concurrency,
            repeats: self.repeats,
            verify: self.verify,
            reference: self.reference,
            synth: self.synth,
            baselines: self.baselines,
            baseline_dir: self.baseline_dir,
            shard_size: self.shard_size.unwrap_or(crate::format::weights::HF_SHARD_BYTES),
        }
    }
}

impl TokensArgs {
    /// The plan `s3rdma tokens` runs.
    pub fn plan(self) -> TokensPlan {
        TokensPlan {
            run: run_plan(&self.store, &self.witness, Some(&self.mem), &self.output, None),
            prefix: self.prefix,
            fetch_workers: self.fetch_workers,
            run_bytes: self.run_bytes,
            batch_seqs: self.batch_seqs,
            compute: self.compute,
            warmup_shards: self.warmup_shards,
            repeats: self.repeats,
            gpu_tflops: self.gpu_tflops,
            mfu: self.mfu,
        }
    }
}

impl TrainArgs {
    /// The plan `s3rdma train` runs.
    pub fn plan(self) -> TrainPlan {
        TrainPlan {
            run: run_plan(&self.store, &self.witness, Some(&self.mem), &self.output, Some(&self.group)),
            layout: self.layout,
            prefix: self.prefix,
            steps: self.steps,
            warmup: self.warmup,
            batch_size: self.batch_size,
            amp: self.amp,
            fetch_workers: self.fetch_workers,
            sample_gets: self.sample_gets,
            decode_threads: self.decode_threads,
            prefetch_batches: self.prefetch_batches,
            jpeg_fetch: self.jpeg_fetch,
            crop: self.crop,
            loader_only: self.loader_only,
            lr: self.lr,
            repeats: self.repeats,
            seed: self.seed,
            ranks: self.ranks,
        }
    }
}

impl VerifyArgs {
    /// The plan `s3rdma verify` runs.
    pub fn plan(self) -> VerifyPlan {
        VerifyPlan {
            run: run_plan(&self.store, &self.witness, None, &self.output, None),
            sizes: self.sizes,
            device: self.device,
            prepare: self.prepare,
            key: self.key,
            keep: self.keep,
        }
    }
}

impl BarrierArgs {
    /// The plan `s3rdma barrier` runs (host memory: no data moves).
    pub fn plan(self) -> BarrierPlan {
        BarrierPlan {
            run: run_plan(&self.store, &self.witness, None, &self.output, Some(&self.group)),
            ranks: self.ranks,
            barriers: self.barriers,
            warmup: self.warmup,
            ranks_per_process: self.ranks_per_process,
        }
    }
}

impl ReportArgs {
    /// The plan `s3rdma report` runs.
    pub fn plan(self) -> ReportPlan {
        ReportPlan {
            files: self.files,
            group_by: self.group_by,
            baseline: self.baseline,
            plot: self.plot,
            format: self.format,
            include_test_doubles: self.include_test_doubles,
        }
    }
}

impl IngestKind {
    /// The plan `s3rdma ingest <kind>` runs.
    pub fn plan(self) -> IngestPlan {
        match self {
            IngestKind::Tokens(a) => IngestPlan::Tokens(a.plan()),
            IngestKind::Raw(a) => IngestPlan::Raw(a.plan()),
            IngestKind::Jpeg(a) => IngestPlan::Jpeg(a.plan()),
            IngestKind::Weights(a) => {
                let source = match (a.synthetic, a.src) {
                    (Some(name), _) => WeightsSource::Synthetic { name, shard_size: a.shard_size.unwrap_or(crate::format::weights::HF_SHARD_BYTES) },
                    (None, Some(src)) => WeightsSource::Files(src),
                    (None, None) => unreachable!("clap requires --src unless --synthetic"),
                };
                IngestPlan::Weights(WeightsIngest { store: a.store.config(), source, model: a.model })
            }
        }
    }
}

impl IngestTokensArgs {
    fn plan(self) -> TokensIngest {
        TokensIngest {
            store: self.store.config(),
            prefix: self.prefix,
            tokenizer: self.tokenizer,
            input: self.input,
            seq_len: self.seq_len,
            shard_bytes: self.shard_bytes,
            synthetic: self.synthetic,
            vocab: self.vocab,
            total_bytes: self.total_bytes,
            seed: self.seed,
            threads: self.threads,
        }
    }
}

impl IngestImagesArgs {
    fn plan(self) -> ImagesIngest {
        ImagesIngest {
            store: self.store.config(),
            prefix: self.prefix,
            src: self.src,
            synthetic: self.synthetic,
            classes: self.classes,
            synthetic_size: self.synthetic_size,
            size: self.size,
            samples_per_shard: self.samples_per_shard,
            decode_threads: self.decode_threads,
            quality: self.quality,
            seed: self.seed,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};

    fn weights(flags: &[&str]) -> crate::bench::weights::WeightsPlan {
        let argv = [&["s3rdma", "weights", "--model", "m"], flags].concat();
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Weights(a) => a.plan(),
            other => panic!("parsed as {other:?}"),
        }
    }

    /// weights pools 32 bounce buffers over a server by default, 16 from
    /// local files, a flag wins, and the record's source says which.
    #[test]
    fn weights_bounce_buffers_default_and_flag() {
        let http = ["--backend", "http", "--endpoint", "http://127.0.0.1:9"];
        let plan = weights(&http);
        assert_eq!(plan.run.mem.bounce_buffers, (32, super::super::auto::WEIGHTS_BOUNCE_BUFFERS.source));
        assert_eq!(weights(&[&http[..], &["--bounce-buffers", "6"]].concat()).run.mem.bounce_buffers, (6, "flag"));
        assert_eq!(weights(&[]).run.mem.bounce_buffers, (16, super::super::auto::WEIGHTS_LOCAL_BOUNCE_BUFFERS.source));
        assert_eq!(weights(&["--bounce-buffers", "4"]).run.mem.bounce_buffers, (4, "flag"));
        // Other benches keep the staging rule's 4.
        let fetch = match Cli::try_parse_from(["s3rdma", "fetch"]).unwrap().command {
            Command::Fetch(a) => a.plan(),
            other => panic!("parsed as {other:?}"),
        };
        assert_eq!(fetch.run.mem.bounce_buffers.0, 4);
    }
}

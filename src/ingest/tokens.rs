//! `s3rdma ingest tokens`: text files tokenized by a Hugging Face
//! tokenizer (the `tokenizers` crate), or seeded uniform ids with
//! `--synthetic`, packed into `--seq-len` sequences and `--shard-bytes`
//! shards of int32 ids ([`TokenShard`] sidecars), the set's manifest last.

use rand::{Rng, SeedableRng, rngs::SmallRng};
use rayon::prelude::*;

use super::{TokensIngest, bar, check_shard_memory, collect_files, commit, pool};
use crate::error::{Error, Result};
use crate::flag::{INPUT, SEQ_LEN, SHARD_BYTES, TOKENIZER, TOTAL_BYTES};
use crate::format::shards::{self, DatasetManifest, TokenShard};
use crate::store::{self, ObjectStore};

/// A loaded tokenizer and the separator it appends after each document.
type Tokenizer = (tokenizers::Tokenizer, Option<(String, u32)>);

/// Run `s3rdma ingest tokens`.
///
/// Errors: flags that hold no whole sequence, a tokenizer or input file that
/// does not load (each naming it; checked before the set under `--prefix` is
/// touched), input that holds less than one sequence, the store's.
pub(super) async fn run(a: TokensIngest) -> Result<()> {
    let seq_bytes = a.seq_len as u64 * 4;
    let seqs_per_shard = a.shard_bytes / seq_bytes;
    if seqs_per_shard == 0 {
        return Err(Error::Usage(format!(
            "{SHARD_BYTES} {} holds no whole sequence of {} tokens ({seq_bytes} bytes): raise {SHARD_BYTES} or lower {SEQ_LEN}",
            a.shard_bytes, a.seq_len
        )));
    }
    check_shard_memory("a token shard", seqs_per_shard * seq_bytes, &format!("lower {SHARD_BYTES}"))?;
    // Checked before begin_ingest marks the prefix and removes the set already there.
    let total_seqs = a.total_bytes.unwrap_or(0) / seq_bytes;
    if a.synthetic && total_seqs == 0 {
        return Err(Error::Usage(format!("{TOTAL_BYTES} {} holds no whole sequence of {seq_bytes} bytes: raise it", a.total_bytes.unwrap_or(0))));
    }
    let pool = pool(a.threads)?;
    let (tk, proto) = tokenizer(&a)?;
    // The input files are found before the set under the prefix is touched:
    // a mistyped --input leaves it whole.
    let files = if a.synthetic { Vec::new() } else { collect_files(&a.input)? };
    // And each is text: a stray binary fails here, not after shards were written.
    pool.install(|| files.par_iter().try_for_each(|f| read_text(f).map(drop)))?;
    let store = store::open(&a.store)?;
    store.ensure_bucket(true).await?;
    let t0 = std::time::Instant::now();
    let mut packer = Packer {
        store: store.as_ref(),
        ingesting: None,
        prefix: a.prefix.clone(),
        seq_len: a.seq_len as u64,
        seqs_per_shard,
        proto,
        pending: Vec::new(),
        shards: 0,
        sequences: 0,
        bytes: 0,
    };
    let read = match &tk {
        None => push_synthetic(&a, &pool, &mut packer, total_seqs).await?,
        Some(tk) => push_files(&files, tk, &pool, &mut packer).await?,
    };
    let (ingesting, (shard_count, sequences, bytes, dropped)) = packer.finish().await?;
    // No shard written: the set under the prefix was never touched.
    let Some(ingesting) = ingesting else {
        return Err(Error::Usage(format!("the input holds {} tokens, less than one sequence of {}: lower {SEQ_LEN} or add text", read.tokens, a.seq_len)));
    };
    commit::commit_ingest(store.as_ref(), ingesting, &DatasetManifest::complete("tokens", shard_count, sequences, bytes)).await?;
    let s = t0.elapsed().as_secs_f64();
    println!(
        "wrote {shard_count} token shard(s) under '{}' at {}: {sequences} sequences x {} tokens = {bytes} bytes ({} tokens{}; {dropped} trailing tokens dropped) in {s:.2} s",
        a.prefix,
        store.location(),
        a.seq_len,
        read.tokens,
        if a.synthetic { String::new() } else { format!(" from {} document(s)", read.documents) }
    );
    // Boundaries s3rdma wrote: one separator per input file. Say where the text itself spelled a special token.
    if read.spelled > read.spelled_ids {
        println!("note: {} document(s) spell a special token in their text; it was encoded as text, not as the token", read.spelled - read.spelled_ids);
    }
    if read.spelled_ids > 0 {
        println!(
            "warning: {} document(s) spell a special token that the tokenizer's own vocabulary maps to its id even as text: a reader that splits on that id sees extra document boundaries there (s3rdma wrote one per input file)",
            read.spelled_ids
        );
    }
    Ok(())
}

/// What the ingest read: tokens (separators included), documents, and the
/// documents whose text spells a special token (`spelled`), of which the
/// tokenizer still encoded it as its id (`spelled_ids`).
#[derive(Debug, Default)]
struct Read {
    tokens: u64,
    documents: u64,
    spelled: u64,
    spelled_ids: u64,
}

/// The tokenizer (`None` with `--synthetic`) and the sidecar every shard
/// shares but for its sequence count.
///
/// Errors: a `--tokenizer` that is not a Hugging Face tokenizer.json.
fn tokenizer(a: &TokensIngest) -> Result<(Option<Tokenizer>, TokenShard)> {
    let proto = TokenShard {
        sequences: 0,
        seq_len: a.seq_len as u64,
        dtype: "int32".into(),
        bytes_per_token: 4,
        vocab_size: a.vocab as u64,
        tokenizer: "synthetic-uniform".into(),
        synthetic: true,
        separator: None,
    };
    if a.synthetic {
        return Ok((None, proto));
    }
    let path = a.tokenizer.clone().expect("the parser requires a tokenizer without synthetic ids");
    let mut tk = tokenizers::Tokenizer::from_file(&path)
        .map_err(|e| Error::Usage(format!("{TOKENIZER} {}: cannot load a Hugging Face tokenizer.json ({e})", path.display())))?;
    // Whole documents: the file's own truncation/padding (e.g. 128 for a sentence model) must not apply.
    tk.with_truncation(None).map_err(|e| Error::Runtime(format!("tokenizer: {e}")))?;
    tk.with_padding(None);
    // Document text is text: a document that spells a special token
    // (e.g. "<|endoftext|>") must not become that token, or it makes a
    // false document boundary (tests/fixtures/tokens-literal-separator).
    // Boundaries come from the ingest alone: one separator per input file.
    tk.set_encode_special_tokens(true);
    let sep = separator(&tk);
    let proto = TokenShard {
        vocab_size: tk.get_vocab_size(true) as u64,
        tokenizer: path.display().to_string(),
        synthetic: false,
        separator: sep.as_ref().map(|s| s.0.clone()),
        ..proto
    };
    Ok((Some((tk, sep)), proto))
}

/// `total_seqs` sequences of seeded uniform ids below `--vocab`, generated
/// on `pool` in 1 Mi-token blocks (each its own generator: the same ids for
/// any thread count), one shard at a time.
async fn push_synthetic(a: &TokensIngest, pool: &rayon::ThreadPool, packer: &mut Packer<'_>, total_seqs: u64) -> Result<Read> {
    let mut read = Read::default();
    let seqs_per_shard = packer.seqs_per_shard;
    let shard_count = total_seqs.div_ceil(seqs_per_shard);
    let pb = bar(shard_count, format!("tokens -> {}", packer.store.location()));
    for n in 0..shard_count {
        let seqs = seqs_per_shard.min(total_seqs - n * seqs_per_shard);
        let len = (seqs * a.seq_len as u64) as usize;
        let mut ids = vec![0i32; len];
        let (seed, vocab) = (a.seed, a.vocab);
        pool.install(|| {
            ids.par_chunks_mut(1 << 20).enumerate().for_each(|(b, chunk)| {
                let mut rng = SmallRng::seed_from_u64(seed ^ (n << 32) ^ b as u64);
                for x in chunk {
                    *x = rng.random_range(0..vocab) as i32;
                }
            })
        });
        read.tokens += len as u64;
        packer.push(ids).await?;
        pb.inc(1);
    }
    pb.finish_and_clear();
    Ok(read)
}

/// Every file of `files` tokenized (batches of 64 in parallel on `pool`),
/// appended in input order, the separator after each.
///
/// Errors: a file that cannot be read or is not UTF-8 (naming it).
async fn push_files(files: &[std::path::PathBuf], (tk, sep): &Tokenizer, pool: &rayon::ThreadPool, packer: &mut Packer<'_>) -> Result<Read> {
    let mut read = Read::default();
    // The special tokens' text, to count documents that spell one (encoded as text).
    let specials: Vec<(u32, String)> =
        tk.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special && !t.content.is_empty()).map(|(id, t)| (id, t.content)).collect();
    let pb = bar(files.len() as u64, format!("tokenize {} file(s)", files.len()));
    for batch in files.chunks(64) {
        // Per file: its ids, and (spells a special token, got its id from the text).
        type Encoded = Result<(Vec<u32>, (bool, bool))>;
        let encoded: Vec<Encoded> = pool.install(|| {
            batch
                .par_iter()
                .map(|f| {
                    let text = read_text(f)?;
                    let enc = tk.encode(text.as_str(), false).map_err(|e| Error::Runtime(format!("tokenizing {}: {e}", f.display())))?;
                    let ids = enc.get_ids().to_vec();
                    let spells = specials.iter().any(|(_, s)| text.contains(s.as_str()));
                    let holds = spells && ids.iter().any(|i| specials.iter().any(|(id, _)| id == i));
                    Ok((ids, (spells, holds)))
                })
                .collect()
        });
        for enc in encoded {
            let (ids, (spells, holds)) = enc?;
            read.documents += 1;
            read.spelled += spells as u64;
            read.spelled_ids += holds as u64;
            read.tokens += ids.len() as u64 + sep.is_some() as u64;
            packer.push(ids.into_iter().map(|i| i as i32).chain(sep.as_ref().map(|s| s.1 as i32))).await?;
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    Ok(read)
}

/// An input file's text.
///
/// Errors: [`Error::Usage`] naming a file that cannot be read or is not UTF-8.
fn read_text(f: &std::path::Path) -> Result<String> {
    let text = std::fs::read(f).map_err(|e| Error::Usage(format!("{INPUT} {}: {e}", f.display())))?;
    String::from_utf8(text).map_err(|_| Error::Usage(format!("{INPUT} {} is not UTF-8 text: pass text files only", f.display())))
}

/// The token appended after each document: the first of the usual
/// end-of-document tokens the tokenizer knows.
fn separator(tk: &tokenizers::Tokenizer) -> Option<(String, u32)> {
    ["<|end_of_text|>", "<|endoftext|>", "</s>", "[SEP]", "<eos>"].iter().find_map(|t| tk.token_to_id(t).map(|id| (t.to_string(), id)))
}

/// Packs ids into sequences and sequences into shards; writes each full shard.
/// The ingest begins (the old set under the prefix marked and removed) at the
/// first shard written, so input that holds no sequence leaves it whole.
struct Packer<'a> {
    store: &'a dyn ObjectStore,
    ingesting: Option<commit::Ingesting>,
    prefix: String,
    seq_len: u64,
    seqs_per_shard: u64,
    proto: TokenShard,
    pending: Vec<i32>,
    shards: usize,
    sequences: u64,
    bytes: u64,
}

impl Packer<'_> {
    async fn push(&mut self, ids: impl IntoIterator<Item = i32>) -> Result<()> {
        self.pending.extend(ids);
        let per = (self.seq_len * self.seqs_per_shard) as usize;
        while self.pending.len() >= per {
            let rest = self.pending.split_off(per);
            let full = std::mem::replace(&mut self.pending, rest);
            self.write(full).await?;
        }
        Ok(())
    }

    async fn write(&mut self, ids: Vec<i32>) -> Result<()> {
        let sequences = ids.len() as u64 / self.seq_len;
        let mut data = Vec::with_capacity(ids.len() * 4);
        for id in ids {
            data.extend_from_slice(&id.to_le_bytes());
        }
        let meta = TokenShard { sequences, ..self.proto.clone() };
        let side = serde_json::to_vec_pretty(&meta).expect("sidecar encodes");
        if self.ingesting.is_none() {
            self.ingesting = Some(commit::begin_ingest(self.store, &self.prefix, "tokens").await?);
        }
        self.bytes += data.len() as u64;
        commit::put_shard(self.store, &shards::shard_key(&self.prefix, self.shards, "bin"), data, &shards::shard_key(&self.prefix, self.shards, "json"), side)
            .await?;
        self.shards += 1;
        self.sequences += sequences;
        Ok(())
    }

    /// Write the last whole sequences; returns the ingest (`None`: no shard
    /// was written) and (shards, sequences, bytes, the tokens dropped: less
    /// than one sequence).
    async fn finish(mut self) -> Result<(Option<commit::Ingesting>, (usize, u64, u64, usize))> {
        let whole = (self.pending.len() as u64 / self.seq_len * self.seq_len) as usize;
        let dropped = self.pending.len() - whole;
        if whole > 0 {
            let mut ids = std::mem::take(&mut self.pending);
            ids.truncate(whole);
            self.write(ids).await?;
        }
        Ok((self.ingesting.take(), (self.shards, self.sequences, self.bytes, dropped)))
    }
}

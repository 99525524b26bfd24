//! The model side of `s3rdma train` (cargo feature `train`): torchvision's
//! ResNet-50 through `tch` (libtorch), SGD with momentum, GPU augmentation.
//!
//! Batches arrive as bytes in buffers this crate owns (device memory written by
//! the store, or pinned host memory); they are wrapped as tensors without a
//! copy (`Tensor::from_blob`: our buffers and libtorch share the device's
//! primary CUDA context) and then cropped, flipped and normalised on the GPU.
//!
//! Precision: `--amp bf16` trains with bfloat16 weights, activations and
//! gradients (`VarStore::bfloat16`). tch exposes autocast only for its default
//! (float16) dtype, so PyTorch-style AMP-bf16 (fp32 master weights) is not
//! available; the convolutions — nearly all of ResNet-50's FLOPs — run on the
//! same bf16 tensor cores either way. Weights and inputs are channels-last
//! (NHWC strides), as NVIDIA's ResNet-50 recipes use.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tch::{Device, Kind, Tensor, nn, nn::ModuleT, nn::OptimizerConfig};

use super::{Amp, Batch, Pixels, StepTimes, Stepper, TrainPlan};
use crate::error::{Error, Result};
use crate::flag::{AMP, DEST, LOADER_ONLY, LR};
use crate::mem::{Buffer, Dest, Gpu};

/// ImageNet channel mean and standard deviation (torchvision's normalisation), on 0..1 pixels.
pub(super) const MEAN: [f64; 3] = [0.485, 0.456, 0.406];
pub(super) const STD: [f64; 3] = [0.229, 0.224, 0.225];

/// ResNet-50 + SGD on one device, or the GPU augmentation alone (`--loader-only`).
pub(super) struct Trainer {
    device: Device,
    kind: Kind,
    crop: i64,
    model: Option<(Box<dyn ModuleT>, nn::Optimizer, nn::VarStore)>,
    device_batch: Option<Buffer>,
    mean: Tensor,
    std: Tensor,
}

fn tch_err(what: &str, e: tch::TchError) -> Error {
    Error::Runtime(format!("{what}: {e}"))
}

impl Trainer {
    /// Build the model on the rank's GPU (CPU when `dest` is host).
    ///
    /// Errors: a GPU was asked for but libtorch sees no CUDA (run with
    /// `LD_PRELOAD` of the matching `libtorch_cuda.so`, docs/03-training-benchmark.md).
    pub(super) fn new(plan: &TrainPlan, gpu: Option<&Arc<Gpu>>, dest: Dest, classes: i64, device_batch: Option<Buffer>) -> Result<Self> {
        let device = match (gpu, dest) {
            (Some(g), Dest::Device | Dest::Pinned) => {
                if !tch::Cuda::is_available() {
                    return Err(Error::Runtime(format!(
                        "libtorch sees no CUDA device although the driver does: libtorch_cuda.so is not loaded; \
                         run with LD_PRELOAD=<torch>/lib/libtorch_cuda.so (see docs/03-training-benchmark.md) or pass {DEST} host"
                    )));
                }
                Device::Cuda(g.ordinal)
            }
            _ => Device::Cpu,
        };
        tch::manual_seed(plan.seed as i64);
        if device.is_cuda() {
            tch::Cuda::cudnn_set_benchmark(true);
        }
        let kind = if plan.amp == Amp::Bf16 && device.is_cuda() { Kind::BFloat16 } else { Kind::Float };
        let model = if plan.loader_only {
            None
        } else {
            let mut vs = nn::VarStore::new(device);
            let net = tch::vision::resnet::resnet50(&vs.root(), classes);
            if kind == Kind::BFloat16 {
                vs.bfloat16();
            }
            tch::no_grad(|| {
                for (_, mut v) in vs.variables() {
                    if v.dim() == 4 {
                        // NCHW shape with NHWC strides (PyTorch's channels_last).
                        let cl = v.permute([0, 2, 3, 1]).contiguous().permute([0, 3, 1, 2]);
                        v.set_data(&cl);
                    }
                }
            });
            let opt = nn::Sgd { momentum: 0.9, dampening: 0.0, wd: 1e-4, nesterov: false }.build(&vs, plan.lr).map_err(|e| tch_err("SGD optimizer", e))?;
            Some((Box::new(net) as Box<dyn ModuleT>, opt, vs))
        };
        let mean = Tensor::from_slice(&MEAN.map(|m| (m * 255.0) as f32)).view([1, 3, 1, 1]).to_device(device);
        let std = Tensor::from_slice(&STD.map(|s| (s * 255.0) as f32)).view([1, 3, 1, 1]).to_device(device);
        Ok(Trainer { device, kind, crop: plan.crop as i64, model, device_batch, mean, std })
    }

    fn sync(&self) {
        if let Device::Cuda(i) = self.device {
            tch::Cuda::synchronize(i as i64);
        }
    }

    /// A uint8 tensor over `len` bytes of `buf` shaped `shape`, without a copy.
    fn wrap(&self, buf: &Buffer, shape: &[i64]) -> Result<Tensor> {
        let need: i64 = shape.iter().product();
        if (buf.len() as i64) < need {
            return Err(Error::Runtime(format!("batch buffer of {} bytes is smaller than {shape:?}", buf.len())));
        }
        let t = match buf {
            Buffer::Device(d) => {
                // SAFETY: the device allocation outlives the tensor (the batch holds it until the step ends).
                unsafe { Tensor::from_blob(d.device_ptr().0 as *const u8, shape, &[], Kind::Uint8, self.device) }
            }
            other => {
                let host = other.as_host().expect("host or pinned");
                // SAFETY: as above, host memory; copied to the device right away.
                let t = unsafe { Tensor::from_blob(host.as_ptr(), shape, &[], Kind::Uint8, Device::Cpu) };
                t.to_device(self.device)
            }
        };
        Ok(t)
    }

    /// uint8 B x C x C x 3 -> normalised NCHW (channels-last strides) in the training dtype.
    fn normalise(&self, nhwc: &Tensor) -> Tensor {
        let x = nhwc.permute([0, 3, 1, 2]).to_kind(Kind::Float);
        ((x - &self.mean) / &self.std).to_kind(self.kind)
    }
}

impl Stepper for Trainer {
    fn step(&mut self, batch: &Batch) -> Result<(StepTimes, Option<f64>)> {
        let mut t = StepTimes::default();
        let c = self.crop;
        let t0 = Instant::now();
        let x = match &batch.pixels {
            Pixels::Shard { shard, samples, height, width, indices } => {
                let (h, w) = (*height as i64, *width as i64);
                let all = self.wrap(shard.buf(), &[*samples as i64, h, w, 3])?;
                let b = indices.len() as i64;
                let opts = (Kind::Int64, self.device);
                let idx = Tensor::from_slice(&indices.iter().map(|&i| i as i64).collect::<Vec<_>>()).to_device(self.device);
                // Per-sample random crop and flip as one gather.
                let y0 = Tensor::randint(h - c + 1, [b], opts);
                let x0 = Tensor::randint(w - c + 1, [b], opts);
                let flip = Tensor::randint(2, [b], opts).eq(1).unsqueeze(1);
                let ar = Tensor::arange(c, opts).unsqueeze(0);
                let ys = y0.unsqueeze(1) + &ar;
                let xs = (x0.unsqueeze(1) + (c - 1) - &ar).where_self(&flip, &(x0.unsqueeze(1) + &ar));
                let crops = all.index(&[Some(idx.view([b, 1, 1])), Some(ys.view([b, c, 1])), Some(xs.view([b, 1, c]))]);
                self.normalise(&crops)
            }
            Pixels::Staged { batch: staged } => {
                let b = batch.labels.len() as i64;
                let shape = [b, c, c, 3];
                let x = match self.device_batch.as_mut() {
                    Some(Buffer::Device(d)) => {
                        let src = staged.buf().as_host().expect("host or pinned");
                        let n = (b * c * c * 3) as usize;
                        d.write_from_host(0, &src[..n]).map_err(|e| Error::Runtime(format!("batch to device memory: {e}")))?;
                        t.h2d_s = t0.elapsed().as_secs_f64();
                        let d = self.device_batch.as_ref().expect("just used");
                        self.wrap(d, &shape)?
                    }
                    _ => self.wrap(staged.buf(), &shape)?,
                };
                self.normalise(&x)
            }
        };
        self.sync();
        t.augment_s = t0.elapsed().as_secs_f64() - t.h2d_s;
        let Some((net, opt, _)) = self.model.as_mut() else { return Ok((t, None)) };
        let t1 = Instant::now();
        let labels = Tensor::from_slice(&batch.labels).to_device(self.device);
        let logits = net.forward_t(&x, true);
        let loss = logits.to_kind(Kind::Float).cross_entropy_for_logits(&labels);
        opt.backward_step(&loss);
        let l = f64::try_from(&loss).map_err(|e| tch_err("loss", e))?;
        if let Device::Cuda(i) = self.device {
            tch::Cuda::synchronize(i as i64);
        }
        t.compute_s = t1.elapsed().as_secs_f64();
        if !l.is_finite() {
            return Err(Error::Runtime(format!("loss is {l}: lower {LR} or use {AMP} off")));
        }
        Ok((t, Some(l)))
    }

    fn describe(&self) -> serde_json::Value {
        json!({
            "model": if self.model.is_some() { "resnet50 (tch::vision::resnet, torchvision layout)".to_string() } else { format!("none ({LOADER_ONLY})") },
            "optimizer": "SGD momentum 0.9, weight decay 1e-4",
            "dtype": format!("{:?}", self.kind), "memory_format": "channels-last",
            "augment": "GPU: per-sample random crop + horizontal flip (raw) as one gather, normalise (ImageNet mean/std)",
            "device": format!("{:?}", self.device), "tch_cuda": tch::Cuda::is_available(),
        })
    }
}

//! A packed-sequence loader feeding a candle model: token rows, segment
//! ids and positions arrive as candle tensors equal to core's packing, the
//! segment ids give a block-diagonal attention mask, and a tiny
//! next-token model trained on the rows lowers its loss.

#![allow(clippy::unwrap_used)]

use candle_core::{D, DType, Device, Tensor};
use candle_nn::{Module, Optimizer, VarBuilder, VarMap};
use loaderx_candle::CandleLoaderExt;
use loaderx_core::SamplerMode;
use loaderx_core::sequence::{PackOptions, pack_records};
use loaderx_core::{Codec, DataLoader, Ragged, RaggedWriter};

const VOCAB: usize = 64;
const ROW: usize = 64;
const DIM: usize = 32;

/// Record `i`: `5 + i*13 % 56` tokens following `t -> (3t + 1) % 64`.
fn store(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tok");
    let mut w = RaggedWriter::<u32>::create(&path, 1, Codec::Zstd).unwrap();
    w.append((0..240u32).map(|i| {
        let mut t = i % VOCAB as u32;
        (0..5 + (i * 13) % 56)
            .map(|_| {
                let v = t;
                t = (3 * t + 1) % VOCAB as u32;
                v
            })
            .collect::<Vec<u32>>()
    }))
    .unwrap();
    w.close().unwrap();
    path
}

struct Model {
    tok: candle_nn::Embedding,
    pos: candle_nn::Embedding,
    head: candle_nn::Linear,
}

impl Model {
    fn new(vb: VarBuilder<'_>) -> Model {
        Model {
            tok: candle_nn::embedding(VOCAB, DIM, vb.pp("tok")).unwrap(),
            pos: candle_nn::embedding(ROW, DIM, vb.pp("pos")).unwrap(),
            head: candle_nn::linear(DIM, VOCAB, vb.pp("head")).unwrap(),
        }
    }

    /// Logits `(rows, ROW, VOCAB)`: one attention layer in which a token
    /// sees only earlier tokens of its own segment.
    fn forward(&self, tokens: &Tensor, positions: &Tensor, segments: &Tensor) -> Tensor {
        let x = (self.tok.forward(tokens).unwrap()
            + self
                .pos
                .forward(&positions.to_dtype(DType::U32).unwrap())
                .unwrap())
        .unwrap();
        let scores = (x.matmul(&x.t().unwrap()).unwrap() / (DIM as f64).sqrt()).unwrap();
        let mask = attention_mask(segments);
        let neg = Tensor::full(-1e9f32, scores.shape(), scores.device()).unwrap();
        let att =
            candle_nn::ops::softmax_last_dim(&mask.where_cond(&scores, &neg).unwrap()).unwrap();
        let h = (att.matmul(&x).unwrap() + x).unwrap();
        self.head.forward(&h).unwrap()
    }
}

/// `(rows, ROW, ROW)`: true where query `i` may attend to key `j` — same
/// segment and `j <= i` (padding attends to padding, and is not scored).
fn attention_mask(segments: &Tensor) -> Tensor {
    let same = segments
        .unsqueeze(2)
        .unwrap()
        .broadcast_eq(&segments.unsqueeze(1).unwrap())
        .unwrap();
    let causal = Tensor::tril2(ROW, DType::U8, segments.device()).unwrap();
    same.broadcast_mul(&causal).unwrap()
}

/// Mean next-token loss over the positions whose next token is in the same
/// segment.
fn loss(logits: &Tensor, tokens: &[Vec<u32>], segments: &[Vec<i32>]) -> Tensor {
    let (rows, len) = (tokens.len(), tokens[0].len());
    let (mut target, mut weight) = (vec![0u32; rows * len], vec![0f32; rows * len]);
    for r in 0..rows {
        for t in 0..len - 1 {
            if segments[r][t] != 0 && segments[r][t + 1] == segments[r][t] {
                target[r * len + t] = tokens[r][t + 1];
                weight[r * len + t] = 1.0;
            }
        }
    }
    let n: f32 = weight.iter().sum();
    let device = logits.device();
    let logp =
        candle_nn::ops::log_softmax(&logits.reshape((rows * len, VOCAB)).unwrap(), D::Minus1)
            .unwrap();
    let picked = logp
        .gather(
            &Tensor::from_vec(target, (rows * len, 1), device).unwrap(),
            1,
        )
        .unwrap()
        .squeeze(1)
        .unwrap();
    let w = Tensor::from_vec(weight, rows * len, device).unwrap();
    (picked.mul(&w).unwrap().sum_all().unwrap().neg().unwrap() / f64::from(n)).unwrap()
}

#[test]
fn a_packed_loader_feeds_a_candle_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    let device = Device::Cpu;
    let loader = DataLoader::builder()
        .stream("tok", Ragged::<u32>::open(&path).unwrap())
        .batch_size(16)
        .mode(SamplerMode::Bucketed { window: 4 })
        .pack("tok", PackOptions::new(ROW))
        .seed(1)
        .build_candle(&device)
        .unwrap();
    let plain = DataLoader::builder()
        .stream("tok", Ragged::<u32>::open(&path).unwrap())
        .batch_size(16)
        .mode(SamplerMode::Bucketed { window: 4 })
        .seed(1)
        .build()
        .unwrap();
    let varmap = VarMap::new();
    let model = Model::new(VarBuilder::from_varmap(&varmap, DType::F32, &device));
    let mut opt = candle_nn::AdamW::new_lr(varmap.all_vars(), 0.02).unwrap();
    let mut losses = Vec::new();
    for (batch, step) in loader.zip(plain).take(60) {
        let (batch, step) = (batch.unwrap(), step.unwrap());
        let tokens = batch.dense("tok").unwrap();
        let segments = batch.dense("tok.segment_ids").unwrap();
        let positions = batch.dense("tok.positions").unwrap();
        // The candle tensors are core's packing of the same step.
        let want = pack_records(
            loaderx_core::DType::U32,
            step.column("tok").unwrap().records(),
            &PackOptions::new(ROW),
        )
        .unwrap();
        assert_eq!(tokens.dims(), want.tokens.shape());
        let tok_rows: Vec<Vec<u32>> = tokens.to_vec2().unwrap();
        let seg_rows: Vec<Vec<i32>> = segments.to_vec2().unwrap();
        let pos_rows: Vec<Vec<i32>> = positions.to_vec2().unwrap();
        assert_eq!(tok_rows.concat(), want.tokens.as_slice::<u32>().unwrap());
        assert_eq!(
            seg_rows.concat(),
            want.segment_ids.as_slice::<i32>().unwrap()
        );
        assert_eq!(pos_rows.concat(), want.positions.as_slice::<i32>().unwrap());
        // Block-diagonal: a token never attends across a segment boundary.
        let mask: Vec<Vec<Vec<u8>>> = attention_mask(segments).to_vec3().unwrap();
        for (r, m) in mask.iter().enumerate() {
            for i in 0..ROW {
                for j in 0..ROW {
                    let allowed = seg_rows[r][i] == seg_rows[r][j] && j <= i;
                    assert_eq!(m[i][j] == 1, allowed);
                }
            }
        }
        let logits = model.forward(tokens, positions, segments);
        let l = loss(&logits, &tok_rows, &seg_rows);
        opt.backward_step(&l).unwrap();
        losses.push(l.to_scalar::<f32>().unwrap());
    }
    let (first, last) = (
        losses[..5].iter().sum::<f32>(),
        losses[55..].iter().sum::<f32>(),
    );
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    assert!(last < 0.7 * first, "the loss did not fall: {losses:?}");
}

/// Self-attention over the tokens of each record only: `x` `(N, DIM)`,
/// `allowed` `(N, N)` `U8`.
fn attend(x: &Tensor, allowed: &Tensor) -> Tensor {
    let scores = (x.matmul(&x.t().unwrap()).unwrap() / (DIM as f64).sqrt()).unwrap();
    let neg = Tensor::full(-1e9f32, scores.shape(), scores.device()).unwrap();
    let att =
        candle_nn::ops::softmax_last_dim(&allowed.where_cond(&scores, &neg).unwrap()).unwrap();
    att.matmul(x).unwrap()
}

#[test]
fn packed_ragged_batches_give_what_the_padded_path_gives_through_masked_attention() {
    use loaderx_candle::{CandleConverter, CandleStaging, ColumnConverter, RaggedMode};
    let dir = tempfile::tempdir().unwrap();
    let path = store(dir.path());
    let device = Device::Cpu;
    let table: Vec<f32> = (0..VOCAB * DIM)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
        .collect();
    let embed =
        candle_nn::Embedding::new(Tensor::from_vec(table, (VOCAB, DIM), &device).unwrap(), DIM);
    let builder = || {
        DataLoader::builder()
            .stream("tok", Ragged::<u32>::open(&path).unwrap())
            .batch_size(16)
            .seed(3)
    };
    let padded = builder().build_candle(&device).unwrap();
    let packed = builder()
        .build_candle_ragged(&device, RaggedMode::Packed)
        .unwrap();
    for (p, q) in padded.zip(packed).take(20) {
        let (p, q) = (p.unwrap(), q.unwrap());
        assert_eq!(p.indices, q.indices);
        let pad = p.padded("tok").unwrap();
        let pk = q.packed("tok").unwrap();
        assert_eq!(pk.values.dtype(), DType::U32);
        assert_eq!(pk.cu_seqlens.dtype(), DType::I32);
        assert_eq!(pk.shapes.dtype(), DType::U32);
        assert_eq!(pk.shapes.dims(), &[16, 1]);
        let cu: Vec<i32> = pk.cu_seqlens.to_vec1().unwrap();
        let lens: Vec<u32> = pk.shapes.flatten_all().unwrap().to_vec1().unwrap();
        let n = *cu.last().unwrap() as usize;
        assert_eq!(pk.values.dims(), &[n]);
        // Padded: (B, L) tokens, keys masked by the record's length.
        let x = embed.forward(&pad.values).unwrap(); // (B, L, DIM)
        let l = pad.values.dims()[1];
        let keys = pad
            .mask
            .unsqueeze(1)
            .unwrap()
            .broadcast_as((16, l, l))
            .unwrap()
            .contiguous()
            .unwrap();
        let out_padded = (0..16)
            .map(|b| attend(&x.get(b).unwrap(), &keys.get(b).unwrap()))
            .collect::<Vec<_>>();
        // Packed: (N,) tokens, a block-diagonal mask from cu_seqlens.
        let segment: Vec<u32> = (0..16)
            .flat_map(|k| std::iter::repeat_n(k as u32, (cu[k + 1] - cu[k]) as usize))
            .collect();
        let seg = Tensor::from_vec(segment, n, &device).unwrap();
        let same = seg
            .unsqueeze(1)
            .unwrap()
            .broadcast_eq(&seg.unsqueeze(0).unwrap())
            .unwrap();
        let out_packed = attend(&embed.forward(&pk.values).unwrap(), &same);
        for k in 0..16 {
            let (a, len) = (cu[k] as usize, lens[k] as usize);
            assert_eq!(len, (cu[k + 1] - cu[k]) as usize);
            let want = out_padded[k].narrow(0, 0, len).unwrap();
            let got = out_packed.narrow(0, a, len).unwrap();
            let diff: f32 = (want - got)
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar()
                .unwrap();
            assert!(diff < 1e-5, "record {k}: {diff}");
        }
    }
    // The packed values are the gathered memory itself, not a copy.
    let mut loader = builder()
        .packed(true)
        .staging(CandleStaging::default())
        .build()
        .unwrap();
    let (_, column) = loader
        .next()
        .unwrap()
        .unwrap()
        .into_columns()
        .pop()
        .unwrap();
    let gathered_at = column.bytes().as_ptr() as usize;
    let p = CandleConverter::new(&device).packed(column).unwrap();
    let (storage, _) = p.values.storage_and_layout();
    let candle_core::Storage::Cpu(candle_core::CpuStorage::U32(v)) = &*storage else {
        panic!("not u32 cpu storage")
    };
    assert_eq!(v.as_ptr() as usize, gathered_at);
}

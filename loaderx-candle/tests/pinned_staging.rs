//! The regression of the pinned-staging crash, without a GPU: an image
//! stream and a label stream share one pinned pool (core's `PinnedPool` over
//! a fake allocator whose "copies" complete later), 8 workers; every batch
//! must come out with exactly its own bytes, and no pinned block may be
//! reused while a copy from it is in flight.

#![allow(clippy::unwrap_used)]

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use candle_core::Device;
use loaderx_candle::{CandleConverter, ColumnConverter};
use loaderx_core::Batch;
use loaderx_core::SamplerMode;
use loaderx_core::adapter::AlignedBuf;
use loaderx_core::adapter::{
    ColumnBuffer, PinnedAlloc, PinnedBlock, PinnedBuffer, PinnedPool, PinnedPoolConfig,
    StagedBuffer,
};
use loaderx_core::{Codec, DataLoader, Dense, DenseWriter};

type Ids = Arc<Mutex<HashSet<u64>>>;

#[derive(Default)]
struct Fake {
    next: AtomicU64,
    copying: Ids,
}

struct Block {
    id: u64,
    buf: AlignedBuf,
}

impl PinnedBlock for Block {
    fn capacity(&self) -> usize {
        self.buf.len()
    }
    fn bytes(&self) -> &[u8] {
        self.buf.as_bytes()
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf.as_bytes_mut()
    }
}

#[derive(Clone)]
struct Fence {
    id: u64,
    done: Arc<AtomicBool>,
    copying: Ids,
}

impl Fence {
    fn complete(&self) {
        self.copying.lock().unwrap().remove(&self.id);
        self.done.store(true, Ordering::SeqCst);
    }
}

impl PinnedAlloc for Fake {
    type Block = Block;
    type Fence = Fence;
    fn allocate(&self, bytes: usize) -> loaderx_core::Result<Block> {
        Ok(Block {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            buf: AlignedBuf::zeroed(bytes)?,
        })
    }
    fn is_complete(&self, fence: &Fence) -> loaderx_core::Result<bool> {
        Ok(fence.done.load(Ordering::SeqCst))
    }
    fn wait(&self, fence: &Fence) -> loaderx_core::Result<()> {
        fence.complete();
        Ok(())
    }
}

fn write(root: &std::path::Path, n: usize) {
    let mut w = DenseWriter::<u8>::create(root.join("image"), &[28, 28], Codec::Zstd).unwrap();
    let images: Vec<u8> = (0..n * 784).map(|i| (i / 784 % 251) as u8).collect();
    w.append_slice(&images, n).unwrap();
    w.close().unwrap();
    let mut w = DenseWriter::<u8>::create(root.join("label"), &[], Codec::Raw).unwrap();
    let labels: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    w.append_slice(&labels, n).unwrap();
    w.close().unwrap();
}

/// A converted batch: its indices, image bytes and label bytes.
type Converted = (Vec<u64>, Vec<u8>, Vec<u8>);

/// One worker-side conversion: check the staged buffers, then either turn
/// them into candle tensors (the copying path) or "upload" them: the block
/// goes pending with a fence that the fake transfer queue completes later.
fn convert(
    batch: Batch<PinnedBuffer<Fake>>,
    pool: &PinnedPool<Fake>,
    queue: &Mutex<VecDeque<Fence>>,
) -> Result<Converted, loaderx_candle::Error> {
    let indices = batch.indices().to_vec();
    let upload = batch.step() % 2 == 1;
    let mut images = Vec::new();
    let mut labels = Vec::new();
    for (name, column) in batch.into_columns() {
        let bytes = if name == "image" {
            indices.len() * 784
        } else {
            indices.len()
        };
        let ColumnBuffer::Staged(pinned) = column.buffer() else {
            panic!("{name}: not staged in the pinned pool");
        };
        // Exactly the batch's bytes, in a block of this stream's size.
        assert_eq!(pinned.as_bytes().len(), bytes, "{name}");
        assert!(
            pinned.block().capacity() < bytes + 4096,
            "{name}: {pinned:?}"
        );
        assert!(
            !pool
                .allocator()
                .copying
                .lock()
                .unwrap()
                .contains(&pinned.block().id),
            "{name}: gathered into a block whose copy is in flight"
        );
        let values = if upload {
            let values = column.bytes().to_vec();
            let ColumnBuffer::Staged(pinned) = column.into_buffer() else {
                unreachable!("checked above");
            };
            let fence = Fence {
                id: pinned.block().id,
                done: Arc::default(),
                copying: Arc::clone(&pool.allocator().copying),
            };
            pool.allocator().copying.lock().unwrap().insert(fence.id);
            pinned.release_after(fence.clone());
            let mut q = queue.lock().unwrap();
            q.push_back(fence);
            while q.len() > 6 {
                q.pop_front().unwrap().complete();
            }
            values
        } else {
            let shape = column.dense_shape()?.to_vec();
            CandleConverter::new(&Device::Cpu)
                .tensor_from_bytes(column.dtype(), column.bytes(), &shape)?
                .flatten_all()?
                .to_vec1::<u8>()?
        };
        if name == "image" {
            images = values;
        } else {
            labels = values;
        }
    }
    Ok((indices, images, labels))
}

#[test]
fn image_and_label_streams_share_a_pinned_pool() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 1_000);
    let (workers, prefetch) = (8, 2);
    let pool = PinnedPool::new(
        Fake::default(),
        PinnedPoolConfig::for_loader(workers, prefetch, 2).wait(Duration::from_secs(30)),
    );
    let queue: Arc<Mutex<VecDeque<Fence>>> = Arc::default();
    let (p, q) = (pool.clone(), Arc::clone(&queue));
    let loader = DataLoader::builder()
        .stream(
            "image",
            Dense::<u8>::open(dir.path().join("image")).unwrap(),
        )
        .stream(
            "label",
            Dense::<u8>::open(dir.path().join("label")).unwrap(),
        )
        .batch_size(100)
        .mode(SamplerMode::Cyclic)
        .seed(3)
        .workers(workers)
        .prefetch(prefetch)
        .staging(pool.clone())
        .build_with(move |batch| convert(batch, &p, &q))
        .unwrap();
    for result in loader.take(200) {
        let (indices, images, labels) = result.unwrap();
        assert_eq!(images.len(), indices.len() * 784);
        for (k, &i) in indices.iter().enumerate() {
            assert_eq!(labels[k], (i % 251) as u8);
            assert!(
                images[k * 784..(k + 1) * 784]
                    .iter()
                    .all(|&v| v == (i % 251) as u8)
            );
        }
    }
    let stats = pool.stats();
    assert!(stats.peak_live <= pool.config().max_buffers, "{stats:?}");
    assert!(
        stats.reuses > 300,
        "pinned buffers were not recycled: {stats:?}"
    );
    // Label blocks stayed label-sized: the pool holds little memory.
    assert!(
        stats.live_bytes < stats.live * (100 * 784 + 4096),
        "{stats:?}"
    );
}

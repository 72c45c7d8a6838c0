//! A short Learner run on a tiny synthetic store: loss falls, the model
//! learns a separable toy problem, and a resumed run continues exactly.

#![allow(clippy::unwrap_used)]

use burn::tensor::{Device, Tensor, TensorData};
use burn_mnist::{Config, Mlp, evaluate, train};
use loaderx_core::{Codec, DenseWriter};

/// Class c images are bright in row band c (10 classes, 28x28).
fn write_root(root: &std::path::Path, n: usize) {
    write_splits(root, n, &["train", "test"]);
}

fn write_splits(root: &std::path::Path, n: usize, splits: &[&str]) {
    for &split in splits {
        let mut images = Vec::with_capacity(n * 784);
        let mut labels = Vec::with_capacity(n);
        for i in 0..n {
            let c = (i * 7 + usize::from(split == "test")) % 10;
            labels.push(c as u8);
            for y in 0..28 {
                for x in 0..28 {
                    let on = y / 3 == c;
                    images.push(if on {
                        200 + (x % 50) as u8
                    } else {
                        (i + x + y) as u8 % 40
                    });
                }
            }
        }
        let mut w =
            DenseWriter::<u8>::create(root.join(split).join("image"), &[28, 28], Codec::Zstd)
                .unwrap();
        w.append_slice(&images, n).unwrap();
        w.close().unwrap();
        let mut w =
            DenseWriter::<u8>::create(root.join(split).join("label"), &[], Codec::Raw).unwrap();
        w.append_slice(&labels, n).unwrap();
        w.close().unwrap();
    }
}

#[test]
fn learner_trains_on_a_tiny_store_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    write_root(&root, 500);
    let config = Config {
        root,
        artifacts: dir.path().join("artifacts"),
        epochs: 3,
        start_epoch: 0,
        batch_size: 50,
        // Does not divide the 500 test records: the last batch is partial.
        eval_batch_size: 77,
        workers: 2,
        hidden: 16,
        lr: 2e-3,
        seed: 1,
    };
    let device = Device::flex();
    let (_, report) = train(&config, &device).unwrap();
    assert_eq!(report.epochs.len(), 3, "{report:?}");
    let first = report.epochs.first().unwrap();
    let last = report.epochs.last().unwrap();
    assert_eq!((first.epoch, last.epoch), (1, 3));
    assert!(
        last.train_loss < first.train_loss,
        "loss did not fall: {report:?}"
    );
    assert!(last.test_accuracy > 90.0, "accuracy {report:?}");
    assert!(report.loader.records_per_s > 0.0);
    // 28×28 f32 images and one integer per record, at least.
    let per_record = report.loader.bytes_per_s / report.loader.records_per_s;
    assert!(
        per_record >= (28.0 * 28.0 * 4.0 + 4.0) * 0.999,
        "{per_record}"
    );
    assert!(report.train_records_per_s > 0.0);
    assert!((0.0..=1.0).contains(&report.wait_share));
    // The stage table covers every training batch, and the share printed
    // is the table's.
    let waits = report.stages.stages[loaderx_core::Stage::WaitBatch].count;
    assert_eq!(waits, 3 * 500 / 50, "{}", report.stages);
    assert_eq!(report.wait_share, report.stages.input_share());
    let (ours, burns) = burn_mnist::compare_loaders(&config, &device).unwrap();
    assert!(ours > 0.0 && burns > 0.0);

    // Resume after epoch 2 from burn's checkpoint: epoch 3 again, from the
    // same model and the same data order, gives the same figures.
    let resumed = Config {
        start_epoch: 2,
        ..config
    };
    let (_, again) = train(&resumed, &device).unwrap();
    assert_eq!(again.epochs.len(), 1, "{again:?}");
    let redo = again.epochs[0];
    assert_eq!(redo.epoch, 3);
    assert!(
        last.train_loss > 1e-3,
        "the check below needs a loss that still moves"
    );
    assert!(
        (redo.train_loss - last.train_loss).abs() <= 1e-6 * last.train_loss,
        "{redo:?} vs {last:?}"
    );
    assert!(
        (redo.test_loss - last.test_loss).abs() <= 1e-6 * last.test_loss.max(1e-9),
        "{redo:?} vs {last:?}"
    );
}

#[test]
fn test_accuracy_is_the_same_for_any_eval_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    write_splits(&root, 10_000, &["test"]);
    let device = Device::flex();
    device.seed(3);
    // Fixed (seeded) weights.
    let model = Mlp::new(&device, 28 * 28, 16, 10);
    let evals: Vec<_> = [1000, 999, 10_000, 7]
        .into_iter()
        .map(|b| evaluate(&model, &root, "test", b, 2, &device).unwrap())
        .collect();
    for e in &evals {
        assert_eq!(e.total, 10_000, "every test record once");
        assert_eq!(e, &evals[0], "{evals:?}");
    }
    // The loader's count is the model's own accuracy over every record,
    // computed here in one batch straight from the stores. (Whether that is
    // 0 or 1000 depends on the random weights, which depend on what the
    // other test draws from the device's RNG meanwhile; with class-coded
    // images a random model maps each class to one prediction, so counts
    // come in thousands and 0 is a valid count.)
    let all: Vec<u64> = (0..10_000).collect();
    let images = loaderx_core::Dense::<u8>::open(root.join("test").join("image")).unwrap();
    let x: Vec<f32> = images
        .gather(&all)
        .unwrap()
        .iter()
        .map(|&v| f32::from(v))
        .collect();
    let x = Tensor::<2>::from_data(TensorData::new(x, [10_000, 28 * 28]), &device) / 255.0;
    let predicted = model
        .forward(x)
        .argmax(1)
        .flatten::<1>(0, 1)
        .into_data()
        .convert::<i64>()
        .try_to_vec::<i64>()
        .unwrap();
    let labels = loaderx_core::Dense::<u8>::open(root.join("test").join("label")).unwrap();
    let direct = predicted
        .iter()
        .zip(labels.gather(&all).unwrap().iter())
        .filter(|&(&p, &l)| p == i64::from(l))
        .count() as u64;
    assert_eq!(evals[0].correct, direct, "{evals:?}");
}

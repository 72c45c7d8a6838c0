//! Multi-part datasets under the process's resource limits: a merge of more
//! parts than the descriptor limit (`RLIMIT_NOFILE`), and an open whose
//! memory maps cannot be made (the address-space limit `RLIMIT_AS` makes
//! `mmap` fail with `ENOMEM` as an exhausted `vm.max_map_count` does).
//!
//! Limits are the process's: this binary's tests take turns on a lock and
//! restore every limit they lower.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Mutex;

use loaderx_core::{Codec, CreateOptions, Dataset, DenseWriter, ErrorKind, RaggedWriter};

/// Held while a test has a limit lowered.
static LIMITS: Mutex<()> = Mutex::new(());

/// Runs `f` with the soft limit `resource` at `soft`, then restores it.
fn with_limit<T>(resource: libc::__rlimit_resource_t, soft: u64, f: impl FnOnce() -> T) -> T {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `old` is a valid rlimit to write.
    assert_eq!(unsafe { libc::getrlimit(resource, &mut old) }, 0);
    let new = libc::rlimit {
        rlim_cur: soft.min(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit; the soft limit is below the hard.
    assert_eq!(unsafe { libc::setrlimit(resource, &new) }, 0);
    let out = f();
    // SAFETY: as above, the limits read before.
    assert_eq!(unsafe { libc::setrlimit(resource, &old) }, 0);
    out
}

fn write_part(dir: &Path, index: u64) {
    let part = dir.join(Dataset::part_name(index));
    let options = CreateOptions::new(Codec::Raw).sync_on_close(false);
    let mut w = DenseWriter::<u32>::create_with(part.join("x"), &[2], &options).unwrap();
    w.append_slice(&[index as u32, 7], 1).unwrap();
    w.close().unwrap();
    let mut w = RaggedWriter::<u16>::create_with(part.join("t"), 1, &options).unwrap();
    w.append([vec![index as u16; 3]]).unwrap();
    w.close().unwrap();
}

#[test]
fn a_merge_of_more_parts_than_descriptors_checks_one_part_at_a_time() {
    let _held = LIMITS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let parts = 300;
    for i in 0..parts {
        write_part(dir.path(), i);
    }
    // 128 descriptors: 300 parts of 2 stores held at once need 600.
    let (merged, opened) = with_limit(libc::RLIMIT_NOFILE, 128, || {
        let merged = Dataset::merge(dir.path(), Some(parts)).map(|d| d.len());
        let opened = Dataset::open(dir.path()).map(|d| d.len());
        (merged, opened)
    });
    assert_eq!(merged.unwrap(), parts);
    assert_eq!(opened.unwrap(), parts);
}

#[test]
fn an_open_whose_maps_cannot_be_made_says_which_store_and_which_limit() {
    let _held = LIMITS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // One part whose store maps 48 MiB.
    let path = dir.path().join(Dataset::part_name(0)).join("big");
    let options = CreateOptions::new(Codec::Raw)
        .data_shards(1)
        .sync_on_close(false);
    let mut w = DenseWriter::<u8>::create_with(&path, &[1 << 20], &options).unwrap();
    w.append_slice(&vec![7u8; 48 << 20], 48).unwrap();
    w.close().unwrap();
    Dataset::merge(dir.path(), Some(1)).unwrap();
    // Every thread the open may use started before the limit.
    rayon::join(|| (), || ());
    // The address space now in use and 16 MiB more: the map cannot be
    // made, small allocations can.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let vm_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let err = with_limit(libc::RLIMIT_AS, (vm_kib << 10) + (16 << 20), || {
        Dataset::open(dir.path()).map(|d| d.len())
    })
    .unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Io { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("part-00000/big")
            && text.contains("vm.max_map_count")
            && text.contains("RLIMIT_AS"),
        "{text}"
    );
    // With the limit back, it opens.
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 48);
}

//! Corruption and hostile bytes on disk: every case builds a small valid
//! store in a temporary directory, damages a copy of it byte by byte (the
//! offsets are the documented on-disk layout, written out in `support` rather
//! than taken from the crate, so the tests check the format independently),
//! and asserts the exact [`ErrorKind`] the library returns. Nothing may panic,
//! hang or allocate what a header merely claims.

#![allow(clippy::unwrap_used)]

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx_core::ndarray::Array2;
use loaderx_core::{
    Codec, Dense, DenseWriter, DynDense, DynRagged, Error, ErrorKind, Ragged, RaggedWriter, Store,
    digest,
};
use proptest::prelude::*;
use support::*;

// ---------------------------------------------------------------------------
// The fixtures are what the corruption tests assume.
// ---------------------------------------------------------------------------

#[test]
fn fixtures_follow_the_documented_layout() {
    for f in Fixture::all() {
        let p = &f.pristine;
        let all: Vec<u64> = (0..RECORDS).collect();
        assert_eq!(
            read_records(p, f.kind, &all).unwrap(),
            expected_records(f.kind, &all),
            "{}",
            f.label()
        );
        let header = read_bytes(&meta(p), 0, 16);
        assert_eq!(
            u64::from_le_bytes(header[0..8].try_into().unwrap()),
            RECORDS
        );
        assert_eq!(usize::from(header[10]), SHARDS);
        assert_eq!(header[11], codec_tag(f.codec));
        assert_eq!(&header[12..16], &[0; 4]);
        for s in 0..255 {
            let expect = if s < SHARDS {
                fs::metadata(data(p, s)).unwrap().len()
            } else {
                0
            };
            assert_eq!(tail(p, s), expect, "{} tail {s}", f.label());
        }
        let schema_len = u16::from_le_bytes(header[8..10].try_into().unwrap());
        let schema: &[u8] = match f.kind {
            Kind::Dense => b"\x83\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x04",
            Kind::Ragged => b"\x82\xa5dtype\xa3<u2\xa4ndim\x01",
        };
        assert_eq!(read_bytes(&meta(p), SCHEMA_AT, schema_len.into()), schema);
        assert_eq!(
            fs::metadata(meta(p)).unwrap().len(),
            TABLE_AT + LOC_LEN * RECORDS
        );
        assert_eq!(p.join(DICT).exists(), f.codec == Codec::ZstdDict);
        // Records are striped by id and packed in order within their shard.
        let mut next = [0u64; SHARDS];
        for i in 0..RECORDS {
            let loc = read_loc(p, i);
            let s = shard_of(p, i);
            assert_eq!(loc.offset, next[s], "{} record {i}", f.label());
            next[s] += u64::from(loc.phys_length);
            let logical = match f.kind {
                Kind::Dense => 4 * WIDTH,
                Kind::Ragged => 8 + 2 * ragged_len(i),
            };
            assert_eq!(loc.logic_length as usize, logical);
            if f.codec == Codec::Raw {
                assert_eq!(loc.phys_length, loc.logic_length);
            } else {
                let frame = read_bytes(&data(p, s), loc.offset, 4);
                assert_eq!(frame, [0x28, 0xb5, 0x2f, 0xfd], "zstd frame magic");
            }
        }
        assert_eq!(
            next.to_vec(),
            (0..SHARDS).map(|s| tail(p, s)).collect::<Vec<_>>()
        );
    }
}

// ---------------------------------------------------------------------------
// Corruption and bad input on disk.
// ---------------------------------------------------------------------------

#[test]
fn missing_store_or_meta_is_not_a_store() {
    let f = Fixture::new(Kind::Dense, Codec::Raw);
    let missing = f.dir.path().join("no_such_store");
    assert_err!(Store::open(&missing), ErrorKind::NotAStore { path } if *path == missing);
    assert_err!(Dense::<u32>::open(&missing), ErrorKind::NotAStore { .. });
    assert_err!(DynRagged::open(&missing), ErrorKind::NotAStore { .. });

    let no_meta = f.damaged(|p| fs::remove_file(meta(p)).unwrap());
    assert_err!(Store::open(&no_meta), ErrorKind::NotAStore { .. });

    let empty_dir = f.dir.path().join("empty_dir");
    fs::create_dir(&empty_dir).unwrap();
    assert_err!(Store::open(&empty_dir), ErrorKind::NotAStore { .. });
}

#[test]
fn truncated_or_zeroed_meta() {
    for f in Fixture::all() {
        let l = f.label();
        let empty = f.damaged(|p| truncate(&meta(p), 0));
        assert_err!(Store::open(&empty), ErrorKind::NotPublished { .. }, "{l}");

        for len in [1, 16, 100, 2056, 4095] {
            let short = f.damaged(|p| truncate(&meta(p), len));
            assert_err!(
                Store::open(&short),
                ErrorKind::Corrupt { .. },
                "{l} len {len}"
            );
        }

        // Cutting into the location table: the header claims more than it holds.
        let cut = f.damaged(|p| truncate(&meta(p), TABLE_AT + LOC_LEN * RECORDS - 1));
        assert_err!(Store::open(&cut), ErrorKind::Corrupt { .. }, "{l}");

        let zero_header = f.damaged(|p| patch(&meta(p), 0, &[0; 16]));
        assert_err!(
            Store::open(&zero_header),
            ErrorKind::NotPublished { .. },
            "{l}"
        );
        assert_err!(DynDense::open(&zero_header), ErrorKind::NotPublished { .. });
        assert_err!(
            DynRagged::open(&zero_header),
            ErrorKind::NotPublished { .. }
        );
    }
}

/// Damage done to a copy of a store.
type Damage<'a> = &'a dyn Fn(&Path);

#[test]
fn bad_header_fields_are_corrupt() {
    let cases: [(&str, Damage<'_>); 16] = [
        ("schema_length 0", &|p| {
            patch(&meta(p), SCHEMA_LENGTH_AT, &0u16.to_le_bytes())
        }),
        ("schema_length 2041", &|p| {
            patch(&meta(p), SCHEMA_LENGTH_AT, &2041u16.to_le_bytes())
        }),
        ("schema_length u16::MAX", &|p| {
            patch(&meta(p), SCHEMA_LENGTH_AT, &u16::MAX.to_le_bytes())
        }),
        ("data_shards 0", &|p| patch(&meta(p), SHARDS_AT, &[0])),
        ("data_shards one fewer", &|p| {
            patch(&meta(p), SHARDS_AT, &[SHARDS as u8 - 1])
        }),
        ("data_shards one more", &|p| {
            patch(&meta(p), SHARDS_AT, &[SHARDS as u8 + 1])
        }),
        ("codec tag 3", &|p| patch(&meta(p), CODEC_AT, &[3])),
        ("codec tag 255", &|p| patch(&meta(p), CODEC_AT, &[255])),
        ("reserved byte 0", &|p| patch(&meta(p), RESERVED_AT, &[1])),
        ("reserved byte 3", &|p| {
            patch(&meta(p), RESERVED_AT + 3, &[0x80])
        }),
        ("unused tail slot", &|p| set_tail(p, SHARDS, 1)),
        ("last unused tail slot", &|p| set_tail(p, 254, 1 << 40)),
        ("length 2^62", &|p| set_length(p, 1 << 62)),
        ("length u64::MAX", &|p| set_length(p, u64::MAX)),
        ("length 2^59 (no overflow)", &|p| set_length(p, 1 << 59)),
        ("length one past the table", &|p| set_length(p, RECORDS + 1)),
    ];
    for f in Fixture::all() {
        for (name, damage) in cases {
            let p = f.damaged(damage);
            let started = Instant::now();
            let result = Store::open(&p);
            let took = started.elapsed();
            assert_err!(result, ErrorKind::Corrupt { .. }, "{} {name}", f.label());
            assert!(took < Duration::from_secs(2), "{name}: open took {took:?}");
            match f.kind {
                Kind::Dense => assert_err!(Dense::<u32>::open(&p), ErrorKind::Corrupt { .. }),
                Kind::Ragged => assert_err!(Ragged::<u16>::open(&p), ErrorKind::Corrupt { .. }),
            }
        }
    }
}

#[test]
fn missing_or_short_payload_shard_is_corrupt() {
    for f in Fixture::all() {
        for shard in 0..SHARDS {
            let short = f.damaged(|p| truncate(&data(p, shard), tail(p, shard) - 1));
            assert_err!(
                Store::open(&short),
                ErrorKind::Corrupt { path, .. } if *path == data(&short, shard),
                "{} shard {shard}", f.label()
            );
            let gone = f.damaged(|p| fs::remove_file(data(p, shard)).unwrap());
            assert_err!(
                Store::open(&gone),
                ErrorKind::Corrupt { .. },
                "{}",
                f.label()
            );
        }
        // Bytes past a shard's committed tail are ignored.
        let longer = f.damaged(|p| patch(&data(p, 0), tail(p, 0), b"junk after the tail"));
        let all: Vec<u64> = (0..RECORDS).collect();
        assert_eq!(
            read_records(&longer, f.kind, &all).unwrap(),
            expected_records(f.kind, &all)
        );
    }
}

#[test]
fn bad_schemas_are_corrupt() {
    let dense = Fixture::new(Kind::Dense, Codec::Zstd);
    let ragged = Fixture::new(Kind::Ragged, Codec::Raw);
    let cases: [(&Fixture, &str, &[u8]); 14] = [
        (&dense, "garbage", &[0xc1; 12]),
        (&dense, "not a map", b"\x92\x01\x02"),
        (&dense, "truncated map", b"\x83\xa5dtype\xa3<u4\xa4ndim"),
        (
            &dense,
            "extra key",
            b"\x84\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x04\xa1x\x01",
        ),
        (
            &dense,
            "missing ndim",
            b"\x82\xa5dtype\xa3<u4\xaaitem_shape\x91\x04",
        ),
        (
            &dense,
            "missing dtype",
            b"\x82\xa4ndim\x01\xaaitem_shape\x91\x04",
        ),
        (
            &dense,
            "ndim does not match item_shape",
            b"\x83\xa5dtype\xa3<u4\xa4ndim\x02\xaaitem_shape\x91\x04",
        ),
        (
            &dense,
            "zero-size item",
            b"\x83\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x00",
        ),
        (
            &dense,
            "trailing byte",
            b"\x83\xa5dtype\xa3<u4\xa4ndim\x01\xaaitem_shape\x91\x04\x00",
        ),
        (
            &dense,
            "dtype not a string",
            b"\x82\xa5dtype\x04\xa4ndim\x01",
        ),
        (
            &ragged,
            "ragged ndim 0",
            b"\x82\xa5dtype\xa3<u2\xa4ndim\x00",
        ),
        (
            &ragged,
            "ragged ndim 65",
            b"\x82\xa5dtype\xa3<u2\xa4ndim\x41",
        ),
        (&ragged, "ragged missing dtype", b"\x81\xa4ndim\x01"),
        (
            &ragged,
            "negative ndim",
            b"\x82\xa5dtype\xa3<u2\xa4ndim\xff",
        ),
    ];
    for (f, name, schema) in cases {
        let p = f.damaged(|p| set_schema(p, schema));
        assert_err!(Store::open(&p), ErrorKind::Corrupt { .. }, "{name}");
    }
    // Dropping the last byte of a valid schema through schema_length alone.
    let p = dense.damaged(|p| {
        let len = u16::from_le_bytes(
            read_bytes(&meta(p), SCHEMA_LENGTH_AT, 2)
                .try_into()
                .unwrap(),
        );
        patch(&meta(p), SCHEMA_LENGTH_AT, &(len - 1).to_le_bytes());
    });
    assert_err!(Store::open(&p), ErrorKind::Corrupt { .. });

    // Element types loaderx does not support: a Corrupt store whose detail names the type.
    for (f, schema, dtype) in [
        (
            &dense,
            &b"\x83\xa5dtype\xa3>i4\xa4ndim\x01\xaaitem_shape\x91\x04"[..],
            ">i4",
        ),
        (
            &dense,
            // bfloat16's NumPy `dtype.str`: no generation spells it so.
            b"\x83\xa5dtype\xa3<V2\xa4ndim\x01\xaaitem_shape\x91\x04",
            "<V2",
        ),
        (&ragged, b"\x82\xa5dtype\xa3|O8\xa4ndim\x01", "|O8"),
    ] {
        let p = f.damaged(|p| set_schema(p, schema));
        assert_err!(
            Store::open(&p),
            ErrorKind::Corrupt { detail, .. } if detail.contains(dtype),
            "{dtype}"
        );
    }
}

#[test]
fn dictionary_file_must_match_the_codec() {
    let dict_store = Fixture::new(Kind::Dense, Codec::ZstdDict);
    let gone = dict_store.damaged(|p| fs::remove_file(p.join(DICT)).unwrap());
    assert_err!(Store::open(&gone), ErrorKind::Corrupt { .. });
    let empty = dict_store.damaged(|p| truncate(&p.join(DICT), 0));
    assert_err!(Store::open(&empty), ErrorKind::Corrupt { .. });

    for codec in [Codec::Raw, Codec::Zstd] {
        let f = Fixture::new(Kind::Ragged, codec);
        let extra = f.damaged(|p| fs::write(p.join(DICT), test_dict()).unwrap());
        assert_err!(Store::open(&extra), ErrorKind::Corrupt { .. }, "{codec}");
    }
}

/// Turns a record's location, given its shard's tail, into a damaged one.
type LocDamage = fn(RecordLoc, u64) -> RecordLoc;

/// Ways to damage one record's location, given the location and its shard's tail.
const LOC_DAMAGE: [(&str, LocDamage); 11] = [
    ("offset at the shard tail", |l, t| RecordLoc {
        offset: t,
        ..l
    }),
    ("payload straddles the tail", |l, t| RecordLoc {
        offset: t + 1 - u64::from(l.phys_length),
        ..l
    }),
    ("offset + length overflows", |l, _| RecordLoc {
        offset: u64::MAX - 1,
        ..l
    }),
    ("phys_length 0", |l, _| RecordLoc {
        phys_length: 0,
        ..l
    }),
    ("phys_length u32::MAX", |l, _| RecordLoc {
        phys_length: u32::MAX,
        ..l
    }),
    ("phys_length one short", |l, _| RecordLoc {
        phys_length: l.phys_length - 1,
        ..l
    }),
    ("logic_length 0", |l, _| RecordLoc {
        logic_length: 0,
        ..l
    }),
    ("logic_length over 2 GiB", |l, _| RecordLoc {
        logic_length: u32::MAX,
        ..l
    }),
    ("logic_length one more", |l, _| RecordLoc {
        logic_length: l.logic_length + 1,
        ..l
    }),
    ("logic_length one less", |l, _| RecordLoc {
        logic_length: l.logic_length - 1,
        ..l
    }),
    ("logic_length 3", |l, _| RecordLoc {
        logic_length: 3,
        ..l
    }),
];

#[test]
fn bad_record_locations_are_corrupt_records() {
    const BAD: u64 = 7;
    for f in Fixture::all() {
        for (name, damage) in LOC_DAMAGE {
            let p = f.damaged(|p| {
                let t = tail(p, shard_of(p, BAD));
                write_loc(p, BAD, damage(read_loc(p, BAD), t));
            });
            let l = format!("{} {name}", f.label());
            // The store opens: locations are checked when read.
            assert_err!(
                read_records(&p, f.kind, &[0, BAD, 1]),
                ErrorKind::CorruptRecord { index: BAD, .. },
                "{l}"
            );
            assert_err!(
                open_and_digest(&p),
                ErrorKind::CorruptRecord { index: BAD, .. },
                "{l}"
            );
            // Every other record still reads.
            let others: Vec<u64> = (0..RECORDS).filter(|&i| i != BAD).collect();
            assert_eq!(
                read_records(&p, f.kind, &others).unwrap(),
                expected_records(f.kind, &others),
                "{l}"
            );
        }
    }
}

#[test]
fn verify_names_the_first_bad_record_of_a_parallel_batch() {
    // Records read in parallel fail in whatever order the workers meet
    // them; the full read (what `loaderx verify` runs) must still report the
    // lowest bad index.
    let dir = tempfile::tempdir().unwrap();
    for kind in KINDS {
        let path = dir.path().join(format!("{kind:?}"));
        match kind {
            Kind::Dense => build_dense(&path, Codec::Zstd, 3000, 16, 3),
            Kind::Ragged => build_ragged(&path, Codec::Zstd, 3000, 3),
        }
        for bad in [2900, 1777, 1200] {
            let t = tail(&path, shard_of(&path, bad));
            let mut loc = read_loc(&path, bad);
            loc.offset = t + 1;
            write_loc(&path, bad, loc);
        }
        let store = Store::open(&path).unwrap();
        assert_err!(
            store.for_each_record(|_, _, _| Ok(())),
            ErrorKind::CorruptRecord { index: 1200, .. },
            "{kind:?}"
        );
        assert_err!(digest(&store), ErrorKind::CorruptRecord { index: 1200, .. });
    }
}

#[test]
fn damaged_zstd_frames() {
    const BAD: u64 = 5;
    for f in Fixture::all().into_iter().filter(|f| f.codec != Codec::Raw) {
        let loc = read_loc(&f.pristine, BAD);
        let shard = shard_of(&f.pristine, BAD);
        // A flipped frame magic is always detected.
        let p = f.damaged(|p| flip_byte(&data(p, shard), loc.offset, 0xff));
        assert_err!(
            read_records(&p, f.kind, &[BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{}",
            f.label()
        );
        assert_err!(
            open_and_digest(&p),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );

        // Any other single flipped byte: an error naming the record, or
        // (zstd frames carry no checksum) a successful read; never a panic,
        // and never an effect on another record.
        let p = f.damaged(|_| {});
        for k in 0..u64::from(loc.phys_length) {
            for xor in [0x01, 0x80, 0xff] {
                flip_byte(&data(&p, shard), loc.offset + k, xor);
                match read_records(&p, f.kind, &[BAD - 1, BAD, BAD + 1]) {
                    Ok(recs) => {
                        let expect = expected_records(f.kind, &[BAD - 1, BAD + 1]);
                        assert_eq!([&recs[0], &recs[2]], [&expect[0], &expect[1]]);
                    }
                    Err(e) => assert!(
                        matches!(e.kind(), ErrorKind::CorruptRecord { index: BAD, .. }),
                        "{} byte {k} ^ {xor:#x}: {e:?}",
                        f.label()
                    ),
                }
                flip_byte(&data(&p, shard), loc.offset + k, xor);
            }
        }
        assert_eq!(
            read_records(&p, f.kind, &[BAD]).unwrap(),
            expected_records(f.kind, &[BAD])
        );
    }
}

#[test]
fn ragged_shape_header_must_match_the_payload() {
    const BAD: u64 = 4;
    for codec in CODECS {
        let f = Fixture::new(Kind::Ragged, codec);
        let rec = ragged_record(BAD);
        let n = rec.len() as u64;
        let elements = u16_bytes(&rec);

        // The helper itself: a valid replacement reads back as written.
        let replaced: Vec<u16> = vec![9, 8, 7, 6, 5];
        let p = f.damaged(|p| {
            replace_record(p, BAD, &ragged_payload(&[5], &u16_bytes(&replaced)));
        });
        let got = Ragged::<u16>::open(&p).unwrap().gather(&[BAD]).unwrap();
        assert_eq!(got.data(0), &replaced[..]);

        for dims in [n + 1, n - 1, 0, n * 2, u64::MAX, 1 << 63] {
            let p = f.damaged(|p| replace_record(p, BAD, &ragged_payload(&[dims], &elements)));
            assert_err!(
                read_records(&p, Kind::Ragged, &[0, BAD]),
                ErrorKind::CorruptRecord { index: BAD, .. },
                "{codec} dims {dims}"
            );
            assert_err!(
                DynRagged::open(&p).unwrap().gather(&[BAD]),
                ErrorKind::CorruptRecord { index: BAD, .. }
            );
            assert_err!(
                open_and_digest(&p),
                ErrorKind::CorruptRecord { index: BAD, .. }
            );
        }
        // Element bytes that are not a whole number of u16 elements.
        let p = f.damaged(|p| replace_record(p, BAD, &ragged_payload(&[1], &[1, 2, 3])));
        assert_err!(
            read_records(&p, Kind::Ragged, &[BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );
    }
}

#[test]
fn ragged_gather_checks_logical_lengths_before_sizing_memory() {
    // 2 GiB, the largest logical length a location may claim: RECORDS of them
    // would be a 48 GiB allocation, which must never be attempted.
    const HUGE: u32 = 1 << 31;
    let all: Vec<u64> = (0..RECORDS).collect();
    for codec in CODECS {
        let f = Fixture::new(Kind::Ragged, codec);
        let p = f.damaged(|p| {
            for i in 0..RECORDS {
                let loc = read_loc(p, i);
                write_loc(
                    p,
                    i,
                    RecordLoc {
                        logic_length: HUGE,
                        ..loc
                    },
                );
            }
        });
        let r = DynRagged::open(&p).unwrap();
        assert_err!(
            r.gather_len(&all),
            ErrorKind::CorruptRecord { index: 0, .. },
            "{codec}"
        );
        assert_err!(
            r.gather(&all),
            ErrorKind::CorruptRecord { index: 0, .. },
            "{codec}"
        );
        assert_err!(
            open_and_digest(&p),
            ErrorKind::CorruptRecord { index: 0, .. }
        );

        if codec == Codec::Raw {
            continue;
        }
        // A zstd frame need not declare its content size: such a record reads ...
        let payload = ragged_payload(&[3], &u16_bytes(&[7, 8, 9]));
        let p = f.damaged(|p| {
            let frame = encode(p, &payload, false);
            assert!(matches!(
                zstd::zstd_safe::get_frame_content_size(&frame),
                Ok(None)
            ));
            replace_stored(p, 0, &frame, payload.len() as u32);
        });
        let got = Ragged::<u16>::open(&p).unwrap().gather(&[0, 1]).unwrap();
        assert_eq!(got.data(0), &[7, 8, 9]);
        assert_eq!(got.data(1), &ragged_record(1)[..]);
        // ... but its few bytes cannot claim 2 GiB, here for every record at once.
        let p = f.damaged(|p| {
            let frame = encode(p, &payload, false);
            let locs: Vec<RecordLoc> = (0..SHARDS as u64)
                .map(|i| replace_stored(p, i, &frame, HUGE))
                .collect();
            for i in 0..RECORDS {
                write_loc(p, i, locs[i as usize % SHARDS]);
            }
        });
        assert_err!(
            DynRagged::open(&p).unwrap().gather(&all),
            ErrorKind::CorruptRecord { index: 0, .. },
            "{codec}"
        );
    }
}

#[test]
fn bool_bytes_other_than_0_and_1_are_rejected() {
    const BAD: u64 = 3;
    let bad_bytes = [0u8, 1, 2, 0, 1, 0, 1, 0];
    for codec in CODECS {
        let dir = tempfile::tempdir().unwrap();

        let dense = dir.path().join("dense");
        let mut w = DenseWriter::<bool>::create_with(&dense, &[8], &options(codec, 2)).unwrap();
        w.append(&Array2::from_shape_fn((6, 8), |(i, j)| (i + j) % 3 == 0))
            .unwrap();
        w.close().unwrap();
        replace_record(&dense, BAD, &bad_bytes);

        let r = Dense::<bool>::open(&dense).unwrap();
        assert!(r.gather(&[0, 2, 4, 5]).is_ok());
        assert_err!(
            r.gather(&[0, BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{codec}"
        );
        assert_err!(r.get(BAD), ErrorKind::CorruptRecord { index: BAD, .. });
        let mut out = [false; 8];
        assert_err!(
            r.gather_into(&[BAD], &mut out),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );
        // The untyped reader hands out the stored bytes as they are.
        assert_eq!(r.as_dyn().gather_bytes(&[BAD]).unwrap(), bad_bytes);
        let store = Store::open(&dense).unwrap();
        assert_err!(
            store.for_each_record(|_, _, _| Ok(())),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{codec}"
        );
        assert_err!(digest(&store), ErrorKind::CorruptRecord { index: BAD, .. });

        let ragged = dir.path().join("ragged");
        let mut w = RaggedWriter::<bool>::create_with(&ragged, 1, &options(codec, 2)).unwrap();
        w.append((0..6).map(|i| vec![i % 2 == 0; i + 1])).unwrap();
        w.close().unwrap();
        replace_record(&ragged, BAD, &ragged_payload(&[8], &bad_bytes));
        let r = Ragged::<bool>::open(&ragged).unwrap();
        assert!(r.gather(&[0, 2, 4, 5]).is_ok());
        assert_err!(
            r.gather(&[0, BAD]),
            ErrorKind::CorruptRecord { index: BAD, .. },
            "{codec}"
        );
        assert_err!(
            Store::open(&ragged)
                .unwrap()
                .for_each_record(|_, _, _| Ok(())),
            ErrorKind::CorruptRecord { index: BAD, .. }
        );
    }
}

/// Where a random byte flip lands.
#[derive(Debug, Clone, Copy)]
enum Region {
    Header,
    UsedTails,
    Schema,
    Table,
    Payload(usize),
}

fn region() -> impl Strategy<Value = Region> {
    prop_oneof![
        Just(Region::Header),
        Just(Region::UsedTails),
        Just(Region::Schema),
        Just(Region::Table),
        (0..SHARDS).prop_map(Region::Payload),
    ]
}

fn region_span(store: &Path, region: Region) -> (PathBuf, u64, u64) {
    match region {
        Region::Header => (meta(store), 0, 16),
        Region::UsedTails => (meta(store), TAILS_AT, 8 * SHARDS as u64),
        Region::Schema => {
            let len = read_bytes(&meta(store), SCHEMA_LENGTH_AT, 2);
            (
                meta(store),
                SCHEMA_AT,
                u64::from(u16::from_le_bytes([len[0], len[1]])),
            )
        }
        Region::Table => (meta(store), TABLE_AT, LOC_LEN * RECORDS),
        Region::Payload(s) => (data(store, s), 0, tail(store, s)),
    }
}

/// Is `e` a kind a damaged store may legitimately produce?
fn is_damage_error(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Corrupt { .. }
            | ErrorKind::CorruptRecord { .. }
            | ErrorKind::NotPublished { .. }
            // A flipped schema byte can name another element type or contract.
            | ErrorKind::DTypeMismatch { .. }
            | ErrorKind::KindMismatch { .. }
    )
}

/// A random flipped byte anywhere a reader looks gives a result or a
/// corruption error, never a panic, through every read path.
#[test]
fn random_byte_flips_never_panic() {
    let fixtures = Fixture::all();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let cases = (0..fixtures.len(), region(), any::<u64>(), 1u8..=255);
    runner
        .run(&cases, |(k, region, pos, xor)| {
            let f = &fixtures[k];
            let p = f.damaged(|p| {
                let (file, start, len) = region_span(p, region);
                flip_byte(&file, start + pos % len, xor);
            });
            // A flipped length may shrink the store: read what it claims.
            let len = Store::open(&p).map_or(RECORDS, |s| s.len());
            let all: Vec<u64> = (0..len).collect();
            if let Err(e) = open_and_digest(&p) {
                prop_assert!(is_damage_error(&e), "digest: {e:?}");
            }
            if let Err(e) = read_records(&p, f.kind, &all) {
                prop_assert!(is_damage_error(&e), "typed gather: {e:?}");
            }
            if let Ok(store) = Store::open(&p) {
                let result = match &store {
                    Store::Dense(d) => d.gather_bytes(&all).map(drop),
                    Store::Ragged(r) => r.gather(&all).map(drop),
                };
                for e in [store.logical_bytes().err(), result.err()]
                    .into_iter()
                    .flatten()
                {
                    prop_assert!(is_damage_error(&e), "untyped gather: {e:?}");
                }
            }
            Ok(())
        })
        .unwrap();
}

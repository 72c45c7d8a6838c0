//! The Hugging Face `Audio` feature: WAV, FLAC, MP3 or OGG/Vorbis bytes in a
//! `{bytes, path}` struct, decoded with `symphonia` to `f32` samples.
//!
//! A column becomes two stores:
//!
//! - `<column>`: Ragged `f32`, `[samples]` when every record of the column is
//!   mono, else `[channels, samples]` (mono records then `[1, samples]`);
//!   samples are scaled to `[-1, 1)` as `soundfile` and `datasets` do
//!   (16-bit PCM divided by 32768, ...);
//! - `<column>.sampling_rate`: Dense `u32` scalars, each record's own rate.
//!
//! Nothing is resampled or downmixed: a record keeps its file's rate and
//! channels. A first pass reads only the headers ([`probe`]) to choose the
//! rank and to size write batches.

use std::io::Cursor;
use std::panic::{AssertUnwindSafe, catch_unwind};

use symphonia::core::codecs::audio::AudioDecoderOptions;
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::probe::Hint;
use symphonia::core::formats::{FormatOptions, FormatReader, TrackType};
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;

use loaderx_core::MAX_RECORD_LEN;

use super::decode::{DecodeError, RecordBuffer};

/// Bytes of one decoded sample (`f32`).
const SAMPLE_BYTES: u64 = 4;

/// What a file's headers say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AudioHeader {
    /// Channels per frame.
    pub(crate) channels: usize,
    /// Frames per second.
    pub(crate) sample_rate: u32,
    /// Frames, when the container declares them.
    pub(crate) frames: Option<u64>,
}

/// Decoded audio: its header and one vector of samples per channel.
pub(crate) type Samples = (AudioHeader, Vec<Vec<f32>>);

fn open(bytes: &[u8]) -> Result<Box<dyn FormatReader + '_>, String> {
    let stream = MediaSourceStream::new(Box::new(Cursor::new(bytes)), Default::default());
    symphonia::default::get_probe()
        .probe(
            &Hint::new(),
            stream,
            FormatOptions::default(),
            MetadataOptions::default(),
        )
        .map_err(|e| format!("not a WAV, FLAC, MP3 or OGG/Vorbis file ({e})"))
}

/// The header of the default audio track of `reader`, and its track id.
fn header(reader: &dyn FormatReader) -> Result<(u32, AudioHeader), String> {
    let track = reader
        .default_track(TrackType::Audio)
        .ok_or("the file has no audio track")?;
    let params = track
        .codec_params
        .as_ref()
        .and_then(|p| p.audio())
        .ok_or("the audio track has no codec parameters")?;
    let channels = params
        .channels
        .as_ref()
        .map(|c| c.count())
        .filter(|&c| c > 0)
        .ok_or("the audio track does not say how many channels it has")?;
    let sample_rate = params
        .sample_rate
        .filter(|&r| r > 0)
        .ok_or("the audio track does not say its sampling rate")?;
    Ok((
        track.id,
        AudioHeader {
            channels,
            sample_rate,
            frames: track.num_frames,
        },
    ))
}

/// Runs `f`, turning a decoder panic (malformed input) into an error.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err("the audio decoder failed on malformed data".to_owned()))
}

/// The bytes of `frames` frames of `channels` `f32` samples; an error when
/// that is more than a record may hold (`limit` bytes) or overflows.
fn sample_bytes(frames: u64, channels: usize, limit: u64) -> Result<u64, String> {
    (channels as u64)
        .checked_mul(frames)
        .and_then(|s| s.checked_mul(SAMPLE_BYTES))
        .filter(|&b| b <= limit)
        .ok_or_else(|| {
            format!(
                "{frames} frames of {channels} channel(s), more than a record may hold \
                 ({limit} bytes of {SAMPLE_BYTES}-byte samples)"
            )
        })
}

/// Reads the headers of an encoded audio file. A header declaring more
/// samples than a record may hold is an error: such a file either decodes
/// to a record too large to store or is truncated.
pub(crate) fn probe(bytes: &[u8]) -> Result<AudioHeader, String> {
    guarded(|| {
        let (_, head) = header(open(bytes)?.as_ref())?;
        if let Some(frames) = head.frames {
            sample_bytes(frames, head.channels, MAX_RECORD_LEN)
                .map_err(|e| format!("the audio headers declare {e}"))?;
        }
        Ok(head)
    })
}

/// Frames reserved per channel before decoding `input_len` bytes whose
/// headers declare `declared` frames: never more than the input's length
/// (uncompressed PCM holds at least one byte per frame; compressed input
/// that decodes to more grows its buffers as it decodes), so a forged
/// header cannot size an allocation.
fn reserve_frames(declared: Option<u64>, input_len: usize) -> usize {
    declared
        .and_then(|f| usize::try_from(f).ok())
        .unwrap_or(0)
        .min(input_len)
}

/// Decodes a whole file to `f32` samples, one vector per channel.
pub(crate) fn decode(bytes: &[u8]) -> Result<Samples, String> {
    decode_limited(bytes, MAX_RECORD_LEN)
}

/// [`decode`], refusing audio that decodes to more than `limit` bytes of
/// samples (as soon as it does, not after decoding it whole).
pub(crate) fn decode_limited(bytes: &[u8], limit: u64) -> Result<Samples, String> {
    guarded(|| {
        let mut reader = open(bytes)?;
        let (track_id, head) = header(reader.as_ref())?;
        let params = reader
            .tracks()
            .iter()
            .find(|t| t.id == track_id)
            .and_then(|t| t.codec_params.as_ref())
            .and_then(|p| p.audio())
            .ok_or("the audio track has no codec parameters")?
            .clone();
        let mut decoder = symphonia::default::get_codecs()
            .make_audio_decoder(&params, &AudioDecoderOptions::default())
            .map_err(|e| format!("no decoder for this audio codec ({e})"))?;
        let mut channels: Vec<Vec<f32>> = vec![Vec::new(); head.channels];
        let reserve = reserve_frames(head.frames, bytes.len());
        for c in &mut channels {
            c.try_reserve_exact(reserve)
                .map_err(|e| format!("cannot allocate {reserve} frames of samples: {e}"))?;
        }
        let mut planes: Vec<Vec<f32>> = Vec::new();
        loop {
            let packet = match reader.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                // The stream ends early: an error when the headers said
                // how long it is and it is shorter.
                Err(SymphoniaError::IoError(e))
                    if e.kind() == std::io::ErrorKind::UnexpectedEof =>
                {
                    let decoded = channels[0].len() as u64;
                    match head.frames {
                        Some(want) if decoded < want => {
                            return Err(format!(
                                "the audio is truncated: its headers declare {want} frames, \
                                 {decoded} could be read"
                            ));
                        }
                        _ => break,
                    }
                }
                Err(e) => return Err(format!("cannot read the audio stream: {e}")),
            };
            if packet.track_id != track_id {
                continue;
            }
            let buffer = decoder
                .decode(&packet)
                .map_err(|e| format!("cannot decode the audio: {e}"))?;
            if buffer.num_planes() != head.channels {
                return Err(format!(
                    "the audio changes from {} to {} channels",
                    head.channels,
                    buffer.num_planes()
                ));
            }
            buffer.copy_to_vecs_planar::<f32>(&mut planes);
            let frames = planes.first().map_or(0, Vec::len);
            let total = (channels[0].len() as u64).saturating_add(frames as u64);
            sample_bytes(total, head.channels, limit)
                .map_err(|e| format!("the audio decodes to {e}"))?;
            for (all, plane) in channels.iter_mut().zip(&planes) {
                all.try_reserve(plane.len())
                    .map_err(|e| format!("cannot allocate {total} frames of samples: {e}"))?;
                all.extend_from_slice(plane);
            }
        }
        if channels[0].is_empty() {
            return Err("the audio holds no samples".to_owned());
        }
        Ok((head, channels))
    })
}

/// Decodes every file of `encoded` (in parallel) into `samples` (rank
/// `ndim`: 1 for mono columns, 2 otherwise) and `rates`, in order.
pub(crate) fn decode_into(
    encoded: &[&[u8]],
    first_row: u64,
    ndim: usize,
    samples: &mut RecordBuffer,
    rates: &mut RecordBuffer,
) -> Result<(), DecodeError> {
    use rayon::prelude::*;
    let decoded: Vec<Result<Samples, String>> = encoded.par_iter().map(|b| decode(b)).collect();
    for (i, d) in decoded.into_iter().enumerate() {
        let row = first_row + i as u64;
        let (head, channels) = d.map_err(|e| DecodeError::at(row, e))?;
        let frames = channels[0].len();
        if ndim == 1 && channels.len() != 1 {
            return Err(DecodeError::at(
                row,
                format!("{} channels where the headers said mono", channels.len()),
            ));
        }
        for c in &channels {
            for s in c {
                samples.data.extend_from_slice(&s.to_le_bytes());
            }
        }
        if ndim == 1 {
            samples.finish_record(&[frames]);
        } else {
            samples.finish_record(&[channels.len(), frames]);
        }
        rates.push(&[], &head.sample_rate.to_le_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 16-bit PCM WAV file of interleaved `samples`.
    fn wav(rate: u32, channels: u16, samples: &[i16]) -> Vec<u8> {
        let data_len = (samples.len() * 2) as u32;
        let mut out = Vec::new();
        out.extend_from_slice(b"RIFF");
        out.extend_from_slice(&(36 + data_len).to_le_bytes());
        out.extend_from_slice(b"WAVEfmt ");
        out.extend_from_slice(&16u32.to_le_bytes());
        out.extend_from_slice(&1u16.to_le_bytes());
        out.extend_from_slice(&channels.to_le_bytes());
        out.extend_from_slice(&rate.to_le_bytes());
        out.extend_from_slice(&(rate * u32::from(channels) * 2).to_le_bytes());
        out.extend_from_slice(&(channels * 2).to_le_bytes());
        out.extend_from_slice(&16u16.to_le_bytes());
        out.extend_from_slice(b"data");
        out.extend_from_slice(&data_len.to_le_bytes());
        for s in samples {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    #[test]
    fn pcm_wav_decodes_to_scaled_planar_samples() {
        let stereo = wav(22_050, 2, &[0, 1, -32768, 32767, 16384, -16384]);
        let head = probe(&stereo).unwrap();
        assert_eq!(
            head,
            AudioHeader {
                channels: 2,
                sample_rate: 22_050,
                frames: Some(3)
            }
        );
        let (_, ch) = decode(&stereo).unwrap();
        assert_eq!(ch[0], [0.0, -1.0, 0.5]);
        assert_eq!(ch[1], [1.0 / 32768.0, 32767.0 / 32768.0, -0.5]);

        let mono = wav(8_000, 1, &[100, -100]);
        let mut samples = RecordBuffer::new(2);
        let mut rates = RecordBuffer::new(0);
        decode_into(&[&stereo, &mono], 10, 2, &mut samples, &mut rates).unwrap();
        assert_eq!(samples.record(0).0, [2, 3]);
        assert_eq!(samples.record(1).0, [1, 2]);
        assert_eq!(rates.record(1).1, 8_000u32.to_le_bytes());
        // A mono column refuses a stereo record, naming its row.
        let e = decode_into(
            &[&mono, &stereo],
            10,
            1,
            &mut RecordBuffer::new(1),
            &mut RecordBuffer::new(0),
        )
        .unwrap_err();
        assert_eq!(e.row, Some(11));
    }

    /// A 16-bit mono WAV whose `data` chunk declares `data_len` bytes but
    /// holds only `samples`.
    fn wav_claiming(data_len: u32, samples: &[i16]) -> Vec<u8> {
        let mut out = wav(16_000, 1, samples);
        out[4..8].copy_from_slice(&data_len.saturating_add(36).to_le_bytes());
        out[40..44].copy_from_slice(&data_len.to_le_bytes());
        out
    }

    #[test]
    fn forged_lengths_size_no_allocation() {
        // The headers declare 2^31 - 8 frames (8 GiB of f32 samples) in
        // 48 bytes: probing refuses it (the record could not be stored),
        // decoding reserves by the input's length, not the claim, and finds
        // the file truncated. This used to `reserve_exact` 8 GiB.
        let forged = wav_claiming(0xFFFF_FFF0, &[1, 2]);
        let e = probe(&forged).unwrap_err();
        assert!(e.contains("more than a record may hold"), "{e}");
        assert!(e.contains("2147483640 frames"), "{e}");
        let e = decode(&forged).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        assert_eq!(reserve_frames(Some(1 << 36), 48), 48);
        assert_eq!(reserve_frames(Some(3), 48), 3);
        assert_eq!(reserve_frames(None, 48), 0);
        assert_eq!(reserve_frames(Some(u64::MAX), 10), 10);
        // Products that would overflow are errors, not wrap-arounds.
        assert!(sample_bytes(u64::MAX, 2, u64::MAX).is_err());
        assert!(sample_bytes(1 << 62, 1, u64::MAX).is_err());
        assert_eq!(sample_bytes(3, 2, 24), Ok(24));
        assert!(sample_bytes(3, 2, 23).is_err());
        // Audio decoding to more than a record may hold stops decoding.
        let ok = wav(16_000, 2, &[1; 64]);
        assert!(decode_limited(&ok, 32 * 2 * 4).is_ok());
        let e = decode_limited(&ok, 32 * 2 * 4 - 1).unwrap_err();
        assert!(e.contains("more than a record may hold"), "{e}");
    }

    #[test]
    fn forged_lengths_under_an_address_space_limit() {
        // A child under a 1 GiB address-space limit decodes the forged file:
        // an allocation sized by its header would abort the child.
        if std::env::var_os(CHILD_ENV).is_some() {
            let forged = wav_claiming(0xFFFF_FFF0, &[1, 2]);
            assert!(probe(&forged).is_err());
            assert!(decode(&forged).is_err());
            return;
        }
        let out = std::process::Command::new("prlimit")
            .arg(format!("--as={}", 1u64 << 30))
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "table::audio::tests::forged_lengths_under_an_address_space_limit",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .output()
            .unwrap();
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{log}");
        assert!(log.contains("1 passed"), "{log}");
    }

    /// Set in the child process of
    /// `forged_lengths_under_an_address_space_limit`.
    const CHILD_ENV: &str = "LOADERX_CONVERT_AUDIO_CHILD";

    #[test]
    fn bad_files_are_errors_not_panics() {
        assert!(
            probe(b"not audio at all")
                .unwrap_err()
                .contains("not a WAV")
        );
        let good = wav(16_000, 1, &[1, 2, 3, 4]);
        for cut in [0, 12, 30, 44] {
            assert!(decode(&good[..cut]).is_err(), "{cut}");
        }
        // Cut inside the samples: a truncated file, not a shorter one.
        let long = wav(16_000, 1, &[7; 4000]);
        let e = decode(&long[..long.len() - 1000]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
        // Garbage after a valid header.
        let mut bad = good[..44].to_vec();
        bad.extend_from_slice(&[0xff; 3]);
        let _ = decode(&bad);
        let empty = wav(16_000, 1, &[]);
        assert!(decode(&empty).is_err());
    }
}

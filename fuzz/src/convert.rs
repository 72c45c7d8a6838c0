//! Fuzz targets of the converters (`loaderx-convert`): an IDX file's
//! header and data ([`idx`]), and the image ([`image`]) and audio
//! ([`audio`]) decoders a Hugging Face conversion runs on each row's
//! encoded file, through the converter's own functions
//! ([`loaderx_convert::fuzzing`]).

use loaderx_convert::fuzzing;

/// Decoded bytes one input may make a target decode. The converter allows
/// up to a record's size (2 GiB); the fuzzer should spend its time on
/// parsing, not on filling memory.
const DECODE_BUDGET: usize = 64 << 20;

/// Reads `data` as an uncompressed IDX file; when it reads, its data holds
/// exactly the elements its dimensions declare.
pub fn idx(data: &[u8]) {
    let Ok(array) = fuzzing::idx(data) else {
        return;
    };
    assert!(!array.dims.is_empty(), "an IDX array without dimensions");
    let elements = array
        .dims
        .iter()
        .try_fold(array.dtype.size(), |acc, &d| acc.checked_mul(d));
    assert_eq!(
        elements,
        Some(array.data.len()),
        "dimensions {:?} of {} do not match {} data bytes",
        array.dims,
        array.dtype,
        array.data.len()
    );
}

/// Probes `data` as a PNG, JPEG or WebP image, decodes it in its own mode, and
/// converts 8-bit images to one of `L`, `RGB`, `RGBA` (chosen by the input's
/// length); every decoded image has the probed shape and exactly its bytes.
pub fn image(data: &[u8]) {
    let Ok(header) = fuzzing::probe_image(data) else {
        return;
    };
    let pixels: usize = header.shape.iter().product();
    // Converted to RGBA, an image takes at most 4 bytes a pixel more.
    let Some(worst) = pixels.checked_mul(header.element_bytes.max(1) * 4) else {
        return;
    };
    if worst > DECODE_BUDGET {
        return;
    }
    if let Ok((shape, bytes)) = fuzzing::decode_image(data, None) {
        assert_eq!(
            shape, header.shape,
            "decoded shape differs from the probed one"
        );
        assert_eq!(bytes.len(), pixels * header.element_bytes);
    }
    if header.element_bytes != 1 {
        return;
    }
    let (mode, channels) = [("L", 1), ("RGB", 3), ("RGBA", 4)][data.len() % 3];
    if let Ok((shape, bytes)) = fuzzing::decode_image(data, Some(mode)) {
        assert_eq!(shape[..2], header.shape[..2], "converting changed the size");
        assert_eq!(shape.get(2).copied().unwrap_or(1), channels, "{mode}");
        assert_eq!(
            bytes.len(),
            pixels / header.shape.get(2).copied().unwrap_or(1) * channels
        );
    }
}

/// Probes and decodes `data` as a WAV, FLAC, MP3 or OGG/Vorbis file; decoded
/// audio has the declared channels, all of one non-zero length.
pub fn audio(data: &[u8]) {
    let Ok(audio) = fuzzing::decode_audio(data, DECODE_BUDGET as u64) else {
        return;
    };
    assert_eq!(
        audio.samples.len(),
        audio.channels,
        "channels differ from the headers'"
    );
    assert!(audio.sample_rate > 0);
    let frames = audio.samples[0].len();
    assert!(frames > 0, "decoded audio without samples");
    for (c, s) in audio.samples.iter().enumerate() {
        assert_eq!(s.len(), frames, "channel {c} has another length");
    }
}

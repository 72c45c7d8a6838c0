//! A JPEG's frame header (SOF), read by walking the marker segments that
//! precede it: dimensions, components and their sampling factors, for the
//! pixel-limit checks and the crop-first decode's alignment. Every legal
//! sampling factor (1 to 4, 3 included) is accepted, as libjpeg does;
//! every read is bounds-checked.

/// What a JPEG's frame header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Frame {
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Components in the frame (1 gray, 3 colour, 4 CMYK/YCCK).
    pub(crate) components: usize,
    /// The largest horizontal sampling factor of any component (1..=4).
    pub(crate) max_h: u32,
}

/// Reads the frame header of the JPEG `bytes` (which start with the
/// start-of-image marker), or says why it cannot.
pub(crate) fn frame(bytes: &[u8]) -> Result<Frame, String> {
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return Err("no start-of-image marker".into());
    }
    let mut at = 2;
    loop {
        if bytes.get(at) != Some(&0xFF) {
            return Err(format!("no marker at byte {at}"));
        }
        // Any number of fill bytes (FF) may precede a marker's code.
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let code = *bytes
            .get(at)
            .ok_or("the file ends before its frame header")?;
        at += 1;
        match code {
            // Markers without a segment: TEM, RST0..7.
            0x01 | 0xD0..=0xD7 => continue,
            0xD8 | 0xD9 | 0xDA | 0x00 => {
                return Err(format!("marker FF {code:02X} before the frame header"));
            }
            _ => {}
        }
        let len = match bytes.get(at..at + 2) {
            Some(&[hi, lo]) => usize::from(u16::from_be_bytes([hi, lo])),
            _ => return Err(format!("marker FF {code:02X} at byte {at} is cut short")),
        };
        let segment = len
            .checked_sub(2)
            .and_then(|n| bytes.get(at + 2..at + 2 + n))
            .ok_or_else(|| {
                format!("marker FF {code:02X} at byte {at} of {len} bytes is cut short")
            })?;
        // SOF0..SOF15, less DHT (C4), JPG (C8) and DAC (CC).
        if matches!(code, 0xC0..=0xCF) && !matches!(code, 0xC4 | 0xC8 | 0xCC) {
            return parse_sof(segment);
        }
        at += len;
    }
}

/// Whether the JPEG `bytes` defines its own quantisation (DQT) and Huffman
/// (DHT) tables before its first scan. An abbreviated stream (a
/// Motion-JPEG frame relies on the standard Huffman tables) does not: a
/// libjpeg instance reused from an earlier image would decode it with that
/// image's tables, so it gets a fresh one. A stream this walk cannot
/// follow counts as not defining them (a fresh instance, which then
/// reports what is wrong).
pub(crate) fn defines_its_tables(bytes: &[u8]) -> bool {
    let (mut dqt, mut dht) = (false, false);
    let mut at = 2;
    loop {
        if bytes.get(at) != Some(&0xFF) {
            return false;
        }
        while bytes.get(at) == Some(&0xFF) {
            at += 1;
        }
        let Some(&code) = bytes.get(at) else {
            return false;
        };
        at += 1;
        match code {
            0x01 | 0xD0..=0xD7 => continue,
            0xDA => return dqt && dht,
            0xD8 | 0xD9 | 0x00 => return false,
            0xDB => dqt = true,
            0xC4 => dht = true,
            _ => {}
        }
        let Some(&[hi, lo]) = bytes.get(at..at + 2) else {
            return false;
        };
        at += usize::from(u16::from_be_bytes([hi, lo]));
    }
}

/// A frame header's fields: precision, height, width, the component
/// count, then id, sampling factors (`h << 4 | v`) and table per component.
fn parse_sof(s: &[u8]) -> Result<Frame, String> {
    let Some((&[_precision, h0, h1, w0, w1, n], rest)) = s.split_first_chunk::<6>() else {
        return Err("frame header cut short".into());
    };
    let components = usize::from(n);
    if components == 0 || rest.len() < 3 * components {
        return Err(format!(
            "frame header of {} bytes for {components} components",
            s.len()
        ));
    }
    let mut max_h = 1;
    for (i, c) in rest.chunks_exact(3).take(components).enumerate() {
        let (h, v) = (c[1] >> 4, c[1] & 0x0F);
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
            return Err(format!("component {i} has sampling factors {h}x{v}"));
        }
        max_h = max_h.max(u32::from(h));
    }
    Ok(Frame {
        width: u32::from(u16::from_be_bytes([w0, w1])),
        height: u32::from(u16::from_be_bytes([h0, h1])),
        components,
        max_h,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// SOI, an APP0 with fill bytes before it, a restart marker, then an
    /// SOF2 of 61 x 45 with three components sampled 3x1, 1x2, 1x1.
    fn sample() -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xFF, 0xE0, 0x00, 0x05, b'J', b'F', b'I'];
        b.extend_from_slice(&[0xFF, 0xD0]);
        b.extend_from_slice(&[0xFF, 0xC2, 0x00, 17, 8, 0, 45, 0, 61, 3]);
        b.extend_from_slice(&[1, 0x31, 0, 2, 0x12, 1, 3, 0x11, 1]);
        b.extend_from_slice(&[0xFF, 0xDA]);
        b
    }

    #[test]
    fn streams_without_their_own_tables_are_told_apart() {
        // The sample has neither table before its scan.
        assert!(!defines_its_tables(&sample()));
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xDB, 0x00, 0x03, 0x00];
        assert!(!defines_its_tables(&[b.clone(), vec![0xFF, 0xDA]].concat()));
        b.extend_from_slice(&[0xFF, 0xC4, 0x00, 0x03, 0x00, 0xFF, 0xDA]);
        assert!(defines_its_tables(&b));
        assert!(!defines_its_tables(&b[..9]));
    }

    #[test]
    fn reads_the_frame_header_past_other_segments() {
        let f = frame(&sample()).unwrap();
        assert_eq!(
            f,
            Frame {
                width: 61,
                height: 45,
                components: 3,
                max_h: 3
            }
        );
    }

    #[test]
    fn refuses_bad_headers_without_panicking() {
        let good = sample();
        // Cut anywhere: an error, never a panic or a read past the end.
        for cut in 0..good.len() - 2 {
            assert!(frame(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut zero = good.clone();
        zero[23] = 0x01; // component 0 sampled 0x1
        assert!(frame(&zero).unwrap_err().contains("0x1"));
        let mut five = good.clone();
        five[26] = 0x15; // component 1 sampled 1x5
        assert!(frame(&five).unwrap_err().contains("1x5"));
        let mut none = good.clone();
        none[21] = 0; // no components
        assert!(frame(&none).is_err());
        // A scan before any frame header.
        assert!(frame(&[0xFF, 0xD8, 0xFF, 0xDA, 0, 2]).is_err());
        // A segment length under 2.
        assert!(frame(&[0xFF, 0xD8, 0xFF, 0xE0, 0, 1, 0xFF, 0xC0]).is_err());
        // Every byte pattern of a short file: no panic.
        for a in 0..=255u8 {
            for b in [0x00, 0x01, 0x02, 0xFF] {
                let _ = frame(&[0xFF, 0xD8, 0xFF, a, 0, b, 0xFF, 0xC0, 0, 8, 8]);
            }
        }
    }
}

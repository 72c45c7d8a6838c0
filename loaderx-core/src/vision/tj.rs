//! JPEG decodes with libjpeg-turbo 3 through its TurboJPEG API (the
//! `turbojpeg` crate's `raw` bindings; the safe API has no cropping):
//! full, scaled (`tj3SetScalingFactor`: 1/2, 1/4, 1/8, a reduced IDCT) and
//! cropped (`tj3SetCroppingRegion`: only the rows and iMCU columns of a
//! region are decoded past the entropy decoder; rows below it are not read
//! at all). The vision module's only `unsafe` code.
//!
//! libjpeg reports errors by `longjmp` inside its own C frames, to the
//! `setjmp` TurboJPEG sets in the same call: no Rust frame is ever jumped
//! over, and every failure comes back as a `-1` and a message. Warnings
//! (corrupt entropy data, a premature end) stop the decode and are errors
//! too (`TJPARAM_STOPONWARNING`), as zune-jpeg's strict mode.

use std::cell::RefCell;
use std::ffi::CStr;

use turbojpeg::raw;

use super::decode::{Image, alloc};
use super::jpeg::Frame;

/// A rectangle of the (scaled) image: left, top, width, height.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rect {
    pub(crate) x: u32,
    pub(crate) y: u32,
    pub(crate) w: u32,
    pub(crate) h: u32,
}

/// A decompressor instance, reused by one thread.
struct Handle(raw::tjhandle);

impl Handle {
    fn new() -> Result<Handle, String> {
        // SAFETY: tj3Init has no preconditions; a null result is checked.
        let ptr = unsafe { raw::tj3Init(raw::TJINIT_TJINIT_DECOMPRESS as libc::c_int) };
        if ptr.is_null() {
            return Err("cannot create a libjpeg-turbo decompressor".into());
        }
        let mut h = Handle(ptr);
        h.set(raw::TJPARAM_TJPARAM_STOPONWARNING, 1)?;
        // A progressive stream of hostile thousands of scans is refused
        // (real ones have about 10).
        h.set(raw::TJPARAM_TJPARAM_SCANLIMIT, 500)?;
        Ok(h)
    }

    /// The instance's last error, as text.
    fn error(&self) -> String {
        // SAFETY: `self.0` is a live instance; tj3GetErrorStr returns a
        // NUL-terminated string owned by it (or a static one), copied here
        // before any other call on the instance.
        let msg = unsafe { CStr::from_ptr(raw::tj3GetErrorStr(self.0)) };
        msg.to_string_lossy().trim().replace('\n', " ")
    }

    fn check(&self, rc: libc::c_int) -> Result<(), String> {
        if rc == 0 { Ok(()) } else { Err(self.error()) }
    }

    fn get(&self, param: raw::TJPARAM) -> libc::c_int {
        // SAFETY: `self.0` is a live instance; tj3Get only reads it.
        unsafe { raw::tj3Get(self.0, param as libc::c_int) }
    }

    fn set(&mut self, param: raw::TJPARAM, value: libc::c_int) -> Result<(), String> {
        // SAFETY: `self.0` is a live instance, used by this thread only.
        let rc = unsafe { raw::tj3Set(self.0, param as libc::c_int, value) };
        self.check(rc)
    }

    /// Reads the header of `bytes` into the instance.
    fn header(&mut self, bytes: &[u8]) -> Result<(), String> {
        // SAFETY: the pointer and length describe `bytes`, which outlive
        // the call; the instance keeps no pointer into them afterwards
        // (its source manager is re-pointed at every call).
        let rc =
            unsafe { raw::tj3DecompressHeader(self.0, bytes.as_ptr(), bytes.len() as raw::size_t) };
        self.check(rc)
    }

    fn set_scale(&mut self, denom: u32) -> Result<(), String> {
        let factor = raw::tjscalingfactor {
            num: 1,
            denom: denom as libc::c_int,
        };
        // SAFETY: `self.0` is a live instance, used by this thread only.
        let rc = unsafe { raw::tj3SetScalingFactor(self.0, factor) };
        self.check(rc)
    }

    fn set_crop(&mut self, r: Option<Rect>) -> Result<(), String> {
        let region = match r {
            Some(r) => raw::tjregion {
                x: r.x as libc::c_int,
                y: r.y as libc::c_int,
                w: r.w as libc::c_int,
                h: r.h as libc::c_int,
            },
            None => raw::tjregion {
                x: 0,
                y: 0,
                w: 0,
                h: 0,
            },
        };
        // SAFETY: `self.0` is a live instance whose header was read.
        let rc = unsafe { raw::tj3SetCroppingRegion(self.0, region) };
        self.check(rc)
    }

    /// Decodes `bytes` (whose header was read) into `out`, rows of
    /// `pitch` bytes in `format`.
    fn decompress(
        &mut self,
        bytes: &[u8],
        out: &mut [u8],
        pitch: usize,
        rows: usize,
        format: raw::TJPF,
    ) -> Result<(), String> {
        // (A pitch of 0 would tell TurboJPEG to compute its own.)
        if pitch == 0 || pitch.checked_mul(rows) != Some(out.len()) || i32::try_from(pitch).is_err()
        {
            return Err(format!(
                "JPEG output of {} bytes for {rows} rows of {pitch}",
                out.len()
            ));
        }
        // SAFETY: `out` holds exactly `rows` rows of `pitch` bytes, and the
        // caller sized `rows` and `pitch` from the instance's (scaled,
        // cropped) output size in `format`, so libjpeg-turbo writes inside
        // it; `bytes` outlives the call and is only read.
        let rc = unsafe {
            raw::tj3Decompress8(
                self.0,
                bytes.as_ptr(),
                bytes.len() as raw::size_t,
                out.as_mut_ptr(),
                pitch as libc::c_int,
                format as libc::c_int,
            )
        };
        self.check(rc)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from tj3Init and is destroyed once.
        unsafe { raw::tj3Destroy(self.0) }
    }
}

thread_local! {
    /// One decompressor per thread (a loader worker), reused.
    static HANDLE: RefCell<Option<Handle>> = const { RefCell::new(None) };
}

/// A decode by libjpeg-turbo.
pub(crate) struct Decoded {
    /// The pixels: the whole image at `1 / scale`, or the part of it asked
    /// for, widened to the left to the scaled iMCU boundary.
    pub(crate) image: Image,
    /// Where `image` lies in the scaled image: its left and top.
    pub(crate) x: u32,
    pub(crate) y: u32,
}

/// The scaled size of `n` pixels at `1 / denom`, as libjpeg-turbo rounds
/// it (up).
pub(crate) fn scaled(n: u32, denom: u32) -> u32 {
    n.div_ceil(denom)
}

/// JPEG's end-of-image marker.
const EOI: [u8; 2] = [0xFF, 0xD9];

/// The iMCU width of a subsampling (libjpeg-turbo's `tjMCUWidth`, indexed
/// by `TJSAMP`: 4:4:4, 4:2:2, 4:2:0, gray, 4:4:0, 4:1:1, 4:4:1).
fn mcu_width(subsamp: libc::c_int) -> u32 {
    match subsamp {
        raw::TJSAMP_TJSAMP_422 | raw::TJSAMP_TJSAMP_420 => 16,
        raw::TJSAMP_TJSAMP_411 => 32,
        _ => 8,
    }
}

/// What a crop's left edge is a multiple of, in pixels of the image at
/// `1 / scale`. Two libraries must agree on it: `tj3SetCroppingRegion`
/// wants a multiple of the scaled iMCU width of the frame's subsampling
/// class (`TJSCALED(tjMCUWidth[subsamp])`), while libjpeg's
/// `jpeg_crop_scanline` moves the edge down to the frame's own iMCU
/// column (`min_DCT_scaled_size * max_h_samp_factor`, or the scaled DCT
/// size alone for a one-component frame) and `tj3Decompress8` refuses a
/// crop it moved. They differ for sampling factors filed under another
/// class: every component 2x1 is "4:4:4" (8 wide, iMCU 16), luma 2x2
/// with chroma 2x1 "4:4:0" (8, iMCU 16). Their least common multiple
/// satisfies both.
fn crop_align(subsamp: libc::c_int, scale: u32, frame: &Frame) -> u32 {
    // libjpeg's min_DCT_scaled_size at 1/1, 1/2, 1/4, 1/8.
    let dct = (8 / scale.max(1)).max(1);
    let imcu = if frame.components == 1 {
        dct
    } else {
        dct * frame.max_h
    };
    lcm(scaled(mcu_width(subsamp), scale).max(1), imcu)
}

fn lcm(a: u32, b: u32) -> u32 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// Decodes `bytes` (whose frame header is `frame`) at `1 / scale` (1, 2,
/// 4, 8), to luma for a gray JPEG and RGB otherwise, only the part `want`
/// of the scaled image when given (its left edge moved down to the scaled
/// iMCU boundary, [`crop_align`]). `Ok(None)` for
/// a JPEG libjpeg-turbo does not decode to RGB (CMYK, YCCK, 12-bit,
/// lossless): for zune-jpeg.
pub(crate) fn decode(
    bytes: &[u8],
    frame: &Frame,
    scale: u32,
    want: Option<Rect>,
) -> Result<Option<Decoded>, String> {
    // A stream that does not end in an end-of-image marker (truncated, or
    // complete but for the marker, or with bytes after it) is decoded in
    // full with the marker appended: a scan that stops short then meets it
    // (libjpeg's "premature end of data segment", an error), while a
    // crop-first decode, which does not read the rows below the crop,
    // could not tell. (An entropy-coded segment cannot hold `FF D9`.)
    let mut owned = Vec::new();
    let (bytes, want) = if bytes.ends_with(&EOI) {
        (bytes, want)
    } else {
        owned
            .try_reserve_exact(bytes.len() + EOI.len())
            .map_err(|_| format!("cannot allocate {} bytes", bytes.len() + 2))?;
        owned.extend_from_slice(bytes);
        owned.extend_from_slice(&EOI);
        (&owned[..], None)
    };
    HANDLE.with_borrow_mut(|slot| {
        if !super::jpeg::defines_its_tables(bytes) {
            // Tables a stream does not define would be the last image's.
            *slot = None;
        }
        let tj = match slot {
            Some(tj) => tj,
            None => slot.insert(Handle::new()?),
        };
        let decoded = decode_with(tj, bytes, frame, scale, want);
        if decoded.is_err() {
            // A failed decode may leave state behind in the instance: the
            // Huffman and quantisation tables of a bad stream, which
            // libjpeg keeps for a next (abbreviated) one. A fresh instance
            // for the next image.
            *slot = None;
        }
        decoded
    })
}

/// [`decode`] with the thread's instance `tj`.
fn decode_with(
    tj: &mut Handle,
    bytes: &[u8],
    frame: &Frame,
    scale: u32,
    want: Option<Rect>,
) -> Result<Option<Decoded>, String> {
    tj.header(bytes).map_err(|e| format!("bad JPEG: {e}"))?;
    let colorspace = tj.get(raw::TJPARAM_TJPARAM_COLORSPACE);
    if tj.get(raw::TJPARAM_TJPARAM_PRECISION) != 8
        || tj.get(raw::TJPARAM_TJPARAM_LOSSLESS) != 0
        || colorspace == raw::TJCS_TJCS_CMYK as libc::c_int
        || colorspace == raw::TJCS_TJCS_YCCK as libc::c_int
    {
        return Ok(None);
    }
    let (w, h) = (
        tj.get(raw::TJPARAM_TJPARAM_JPEGWIDTH),
        tj.get(raw::TJPARAM_TJPARAM_JPEGHEIGHT),
    );
    let (Ok(w @ 1..), Ok(h @ 1..)) = (u32::try_from(w), u32::try_from(h)) else {
        return Err(format!("JPEG of {w} x {h} pixels"));
    };
    tj.set_scale(scale)
        .map_err(|e| format!("JPEG scaling: {e}"))?;
    let (sw, sh) = (scaled(w, scale), scaled(h, scale));
    let subsamp = tj.get(raw::TJPARAM_TJPARAM_SUBSAMP);
    // The part decoded: `want` widened left to the scaled iMCU
    // boundary, or everything (also when the subsampling is one
    // libjpeg-turbo cannot crop).
    let region = match want {
        Some(r) if subsamp != raw::TJSAMP_TJSAMP_UNKNOWN => {
            let align = crop_align(subsamp, scale, frame);
            // At least a pixel, inside the image: an empty region
            // would mean "the whole width" to TurboJPEG.
            let x1 = r.x.saturating_add(r.w).clamp(1, sw);
            let y1 = r.y.saturating_add(r.h).clamp(1, sh);
            let x = r.x.min(x1 - 1);
            let x = x - x % align;
            // Rows need no alignment: libjpeg skips to any row.
            let y = r.y.min(y1 - 1);
            Rect {
                x,
                y,
                w: x1 - x,
                h: y1 - y,
            }
        }
        _ => Rect {
            x: 0,
            y: 0,
            w: sw,
            h: sh,
        },
    };
    let whole = (region.w, region.h) == (sw, sh);
    tj.set_crop((!whole).then_some(region))
        .map_err(|e| format!("JPEG crop {region:?} of {sw} x {sh}: {e}"))?;
    let (channels, format) = if colorspace == raw::TJCS_TJCS_GRAY as libc::c_int {
        (1, raw::TJPF_TJPF_GRAY)
    } else {
        (3, raw::TJPF_TJPF_RGB)
    };
    let (rw, rh) = (region.w as usize, region.h as usize);
    let pitch = rw * channels;
    let len = pitch
        .checked_mul(rh)
        .ok_or_else(|| format!("{rw} x {rh} pixels do not fit in memory"))?;
    let mut pixels = alloc(len)?;
    tj.decompress(bytes, &mut pixels, pitch, rh, format)
        .map_err(|e| format!("bad JPEG: {e}"))?;
    Ok(Some(Decoded {
        image: Image {
            width: region.w,
            height: region.h,
            channels,
            pixels,
        },
        x: region.x,
        y: region.y,
    }))
}

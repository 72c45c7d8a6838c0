//! Where gathered records are written: caller memory (`u8`) or memory that
//! was never initialised (`MaybeUninit<u8>`: a fresh allocation's or a
//! pooled buffer's spare capacity), so that no gather zeroes its
//! destination before overwriting it.

use std::io;
use std::mem::MaybeUninit;

use zstd::bulk::Decompressor;
use zstd::zstd_safe::WriteBuf;

/// A byte of a gather's destination. Every write goes through these
/// methods, which write initialised bytes only.
pub(crate) trait Sink: Sized + Send {
    /// Copies `src` into `dst`, of the same length.
    fn put(dst: &mut [Self], src: &[u8]);

    /// Writes zeros over `dst`.
    fn zero(dst: &mut [Self]);

    /// Decompresses the zstd frame `src` into `dst`; returns the bytes
    /// written, which are then initialised (the first ones of `dst`).
    fn decompress(dctx: &mut Decompressor<'_>, src: &[u8], dst: &mut [Self]) -> io::Result<usize>;

    /// `dst` as bytes.
    ///
    /// # Safety
    ///
    /// Every element of `dst` must have been written (for `MaybeUninit<u8>`:
    /// initialised) through the methods above.
    unsafe fn assume_init(dst: &mut [Self]) -> &mut [u8];
}

impl Sink for u8 {
    #[inline(always)]
    fn put(dst: &mut [u8], src: &[u8]) {
        dst.copy_from_slice(src);
    }

    fn zero(dst: &mut [u8]) {
        dst.fill(0);
    }

    fn decompress(dctx: &mut Decompressor<'_>, src: &[u8], dst: &mut [u8]) -> io::Result<usize> {
        dctx.decompress_to_buffer(src, dst)
    }

    unsafe fn assume_init(dst: &mut [u8]) -> &mut [u8] {
        dst
    }
}

impl Sink for MaybeUninit<u8> {
    #[inline(always)]
    fn put(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
        dst.write_copy_of_slice(src);
    }

    fn zero(dst: &mut [MaybeUninit<u8>]) {
        dst.fill(MaybeUninit::new(0));
    }

    fn decompress(
        dctx: &mut Decompressor<'_>,
        src: &[u8],
        dst: &mut [MaybeUninit<u8>],
    ) -> io::Result<usize> {
        dctx.decompress_to_buffer(
            src,
            &mut Uninit {
                buf: dst,
                filled: 0,
            },
        )
    }

    unsafe fn assume_init(dst: &mut [MaybeUninit<u8>]) -> &mut [u8] {
        // SAFETY: the caller guarantees every byte of `dst` is initialised;
        // `MaybeUninit<u8>` has the size and alignment of `u8`.
        unsafe { dst.assume_init_mut() }
    }
}

/// Uninitialised memory zstd decompresses into: a prefix of `filled` bytes
/// that zstd reported written, then bytes never read.
struct Uninit<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    filled: usize,
}

// SAFETY: `as_slice` covers only the first `filled` bytes, which zstd
// reported written (`filled_until` is only called, by `write_from`, with a
// count zstd wrote, at most the capacity); `capacity` and `as_mut_ptr`
// describe exactly the memory of `buf`, which zstd only writes.
unsafe impl WriteBuf for Uninit<'_> {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes of `buf` are initialised (see
        // `filled_until`), and `filled <= buf.len()`.
        unsafe { self.buf[..self.filled].assume_init_ref() }
    }

    fn capacity(&self) -> usize {
        self.buf.len()
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast()
    }

    unsafe fn filled_until(&mut self, n: usize) {
        // Clamped, so that `as_slice` never reaches past the buffer.
        self.filled = n.min(self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_decodes_into_uninitialised_memory_as_into_bytes() {
        let src: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let frame = zstd::bulk::compress(&src, 3).unwrap();
        let mut dctx = Decompressor::new().unwrap();
        let mut init = vec![0u8; src.len()];
        assert_eq!(
            u8::decompress(&mut dctx, &frame, &mut init).unwrap(),
            src.len()
        );
        let mut spare = Vec::<u8>::with_capacity(src.len() + 3);
        let dst = &mut spare.spare_capacity_mut()[..src.len()];
        assert_eq!(
            <MaybeUninit<u8> as Sink>::decompress(&mut dctx, &frame, dst).unwrap(),
            src.len()
        );
        // SAFETY: zstd wrote all `src.len()` bytes, as it reported.
        let written = unsafe { <MaybeUninit<u8> as Sink>::assume_init(dst) };
        assert_eq!(written, &src[..]);
        assert_eq!(init, src);
        // Too little room is an error, not a write past the buffer.
        let mut short = Vec::<u8>::with_capacity(100);
        assert!(
            <MaybeUninit<u8> as Sink>::decompress(&mut dctx, &frame, short.spare_capacity_mut())
                .is_err()
        );
    }
}

//! The five 8-bit floating-point element types of Python loaderx 2.8
//! (from `ml_dtypes`), as newtypes over their bits.
//!
//! No well-kept Rust crate covers all five (`float8` has the two `fn`
//! variants only), so each is a `#[repr(transparent)]` byte with exact
//! conversions to `f32`. Stores and adapters move the bits untouched; a
//! value is only converted when asked ([`to_f32`](F8E4M3Fn::to_f32)).
//!
//! | type           | exponent bits, bias | mantissa bits | infinities | NaN           | −0 |
//! |----------------|---------------------|---------------|------------|---------------|----|
//! | [`F8E4M3Fn`]   | 4, 7                | 3             | no         | `S.1111.111`  | yes |
//! | [`F8E4M3Fnuz`] | 4, 8                | 3             | no         | `0x80` only   | no |
//! | [`F8E5M2`]     | 5, 15               | 2             | `S.11111.00` | `S.11111.xx` | yes |
//! | [`F8E5M2Fnuz`] | 5, 16               | 2             | no         | `0x80` only   | no |
//! | [`F8E8M0Fnu`]  | 8, 127 (no sign)    | 0             | no         | `0xFF`        | no (and no zero) |
//!
//! ```
//! use loaderx_core::{F8E4M3Fn, F8E8M0Fnu};
//! assert_eq!(F8E4M3Fn::from_bits(0x7E).to_f32(), 448.0);
//! assert!(F8E4M3Fn::from_bits(0x7F).to_f32().is_nan());
//! assert_eq!(F8E8M0Fnu::from_bits(127).to_f32(), 1.0);
//! ```

/// Decodes a sign-exponent-mantissa byte with `exp` exponent bits, `man`
/// mantissa bits and `bias`; the caller handles the special codes.
fn decode(bits: u8, exp: u32, man: u32, bias: i32) -> f32 {
    let sign = if bits & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((bits >> man) & ((1 << exp) - 1) as u8);
    let m = f32::from(bits & ((1 << man) - 1) as u8);
    let scale = (1u32 << man) as f32;
    let magnitude = if e == 0 {
        m / scale * 2f32.powi(1 - bias)
    } else {
        (1.0 + m / scale) * 2f32.powi(e - bias)
    };
    sign * magnitude
}

macro_rules! float8 {
    ($(#[$doc:meta])* $name:ident, |$b:ident| $to_f32:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
        #[repr(transparent)]
        pub struct $name(u8);

        impl $name {
            /// The value with these bits.
            pub const fn from_bits(bits: u8) -> $name {
                $name(bits)
            }

            /// The bits.
            pub const fn to_bits(self) -> u8 {
                self.0
            }

            /// The exact value as an `f32` (every code is representable).
            pub fn to_f32(self) -> f32 {
                let $b = self.0;
                $to_f32
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.to_f32())
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&self.to_f32(), f)
            }
        }

        // SAFETY: a `#[repr(transparent)]` wrapper of one `u8`: every bit
        // pattern is a valid value, zero included, and there is no padding.
        unsafe impl bytemuck::Zeroable for $name {}
        // SAFETY: as above; `u8` is `Pod` and the wrapper adds nothing.
        unsafe impl bytemuck::Pod for $name {}
    };
}

float8!(
    /// `float8_e4m3fn`: 4 exponent bits (bias 7), 3 mantissa bits, finite
    /// only; `S.1111.111` is NaN, the largest magnitude 448.
    F8E4M3Fn,
    |b| if b & 0x7F == 0x7F { f32::NAN } else { decode(b, 4, 3, 7) }
);

float8!(
    /// `float8_e4m3fnuz`: 4 exponent bits (bias 8), 3 mantissa bits,
    /// finite only, no negative zero; `0x80` is the one NaN, the largest
    /// magnitude 240.
    F8E4M3Fnuz,
    |b| if b == 0x80 { f32::NAN } else { decode(b, 4, 3, 8) }
);

float8!(
    /// `float8_e5m2`: IEEE-style, 5 exponent bits (bias 15), 2 mantissa
    /// bits, with infinities and NaNs; the largest finite magnitude 57344.
    F8E5M2,
    |b| match (b >> 2) & 0x1F {
        0x1F if b & 0x03 == 0 => {
            if b & 0x80 != 0 { f32::NEG_INFINITY } else { f32::INFINITY }
        }
        0x1F => f32::NAN,
        _ => decode(b, 5, 2, 15),
    }
);

float8!(
    /// `float8_e5m2fnuz`: 5 exponent bits (bias 16), 2 mantissa bits,
    /// finite only, no negative zero; `0x80` is the one NaN, the largest
    /// magnitude 57344.
    F8E5M2Fnuz,
    |b| if b == 0x80 { f32::NAN } else { decode(b, 5, 2, 16) }
);

float8!(
    /// `float8_e8m0fnu`: an unsigned power of two, `2^(bits - 127)`, the
    /// scale of microscaling (MX) formats; `0xFF` is NaN and there is no
    /// zero.
    F8E8M0Fnu,
    |b| if b == 0xFF { f32::NAN } else { 2f32.powi(i32::from(b) - 127) }
);

#[cfg(test)]
mod tests {
    use super::*;

    /// `(bits, value)` pairs printed by `ml_dtypes` 0.5 (`np.arange(256,
    /// dtype=np.uint8).view(t).astype(np.float64)`).
    #[test]
    #[allow(
        clippy::excessive_precision,
        reason = "the exact values as ml_dtypes prints them, each an f32"
    )]
    fn values_match_ml_dtypes() {
        let e4m3fn = [
            (0, 0.0),
            (1, 0.001953125),
            (7, 0.013671875),
            (8, 0.015625),
            (56, 1.0),
            (63, 1.875),
            (123, 352.0),
            (126, 448.0),
            (129, -0.001953125),
            (254, -448.0),
        ];
        for (b, v) in e4m3fn {
            assert_eq!(F8E4M3Fn::from_bits(b).to_f32(), v, "{b}");
        }
        assert!(F8E4M3Fn::from_bits(127).to_f32().is_nan());
        assert!(F8E4M3Fn::from_bits(255).to_f32().is_nan());
        assert!(F8E4M3Fn::from_bits(128).to_f32().is_sign_negative());

        let e4m3fnuz = [
            (1, 0.0009765625),
            (8, 0.0078125),
            (56, 0.5),
            (64, 1.0),
            (127, 240.0),
            (129, -0.0009765625),
            (255, -240.0),
        ];
        for (b, v) in e4m3fnuz {
            assert_eq!(F8E4M3Fnuz::from_bits(b).to_f32(), v, "{b}");
        }
        assert!(F8E4M3Fnuz::from_bits(128).to_f32().is_nan());

        let e5m2 = [
            (1, 1.52587890625e-05),
            (8, 0.0001220703125),
            (56, 0.5),
            (63, 1.75),
            (123, 57344.0),
            (124, f32::INFINITY),
            (252, f32::NEG_INFINITY),
            (129, -1.52587890625e-05),
        ];
        for (b, v) in e5m2 {
            assert_eq!(F8E5M2::from_bits(b).to_f32(), v, "{b}");
        }
        for b in [125, 126, 127, 253, 254, 255] {
            assert!(F8E5M2::from_bits(b).to_f32().is_nan(), "{b}");
        }

        let e5m2fnuz = [
            (1, 7.62939453125e-06),
            (8, 6.103515625e-05),
            (56, 0.25),
            (64, 1.0),
            (124, 32768.0),
            (127, 57344.0),
            (255, -57344.0),
        ];
        for (b, v) in e5m2fnuz {
            assert_eq!(F8E5M2Fnuz::from_bits(b).to_f32(), v, "{b}");
        }
        assert!(F8E5M2Fnuz::from_bits(128).to_f32().is_nan());

        let e8m0 = [
            (0, 5.877471754111438e-39),
            (1, 1.1754943508222875e-38),
            (123, 0.0625),
            (127, 1.0),
            (128, 2.0),
            (254, 1.7014118346046923e38),
        ];
        for (b, v) in e8m0 {
            assert_eq!(F8E8M0Fnu::from_bits(b).to_f32(), v as f32, "{b}");
        }
        assert!(F8E8M0Fnu::from_bits(255).to_f32().is_nan());
    }

    #[test]
    fn bits_are_kept() {
        for b in 0..=255u8 {
            assert_eq!(F8E5M2::from_bits(b).to_bits(), b);
            assert_eq!(
                bytemuck::cast::<F8E4M3Fnuz, u8>(F8E4M3Fnuz::from_bits(b)),
                b
            );
        }
    }
}

//! AFL++ entry point for [`loaderx_fuzz::convert::audio`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::convert::audio(data);
    });
}

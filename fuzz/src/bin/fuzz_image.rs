//! AFL++ entry point for [`loaderx_fuzz::convert::image`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::convert::image(data);
    });
}

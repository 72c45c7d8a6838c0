//! AFL++ entry point for [`loaderx_fuzz::convert::idx`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::convert::idx(data);
    });
}

//! AFL++ entry point for [`loaderx_fuzz::targets::store`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::targets::store(data);
    });
}

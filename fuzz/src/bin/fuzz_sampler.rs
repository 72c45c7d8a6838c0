//! AFL++ entry point for [`loaderx_fuzz::targets::sampler`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::targets::sampler(data);
    });
}

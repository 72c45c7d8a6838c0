//! AFL++ entry point for [`loaderx_fuzz::hf::card`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::hf::card(data);
    });
}

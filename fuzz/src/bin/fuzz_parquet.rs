//! AFL++ entry point for [`loaderx_fuzz::hf::parquet`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::hf::parquet(data);
    });
}

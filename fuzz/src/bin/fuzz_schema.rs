//! AFL++ entry point for [`loaderx_fuzz::targets::schema`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::targets::schema(data);
    });
}

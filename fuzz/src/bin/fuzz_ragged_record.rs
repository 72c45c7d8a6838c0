//! AFL++ entry point for [`loaderx_fuzz::targets::ragged_record`].

fn main() {
    afl::fuzz!(|data: &[u8]| {
        loaderx_fuzz::targets::ragged_record(data);
    });
}

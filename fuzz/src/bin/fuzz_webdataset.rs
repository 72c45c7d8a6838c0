//! AFL++ entry point for [`loaderx_fuzz::formats::webdataset`].

// `fuzz_nohook!`: decoder panics caught on purpose are not crashes (see
// fuzz_image.rs); a panic that escapes the target aborts the process.
fn main() {
    afl::fuzz_nohook!(|data: &[u8]| {
        loaderx_fuzz::formats::webdataset(data);
    });
}

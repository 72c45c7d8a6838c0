//! AFL++ entry point for [`loaderx_fuzz::targets::manifest`].

// `fuzz_nohook!`, not `fuzz!`: afl.rs's hook aborts on every panic, even one
// the code under test catches on purpose (the converters turn third-party
// decoder panics into typed errors). A panic that escapes the target still
// aborts the process, which AFL++ records as a crash.
fn main() {
    afl::fuzz_nohook!(|data: &[u8]| {
        loaderx_fuzz::targets::manifest(data);
    });
}

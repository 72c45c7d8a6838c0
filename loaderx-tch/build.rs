//! Gives this crate's test and example binaries an rpath to libtorch, and
//! keeps `libtorch_cuda` linked where it exists (with `--as-needed` linking
//! it would otherwise be dropped and CUDA would silently disappear).
//!
//! The same link arguments are published to the build scripts of crates
//! that depend on this one (`links = "loaderx_tch"`), as
//! `DEP_LOADERX_TCH_LINK_ARGS` (separated by `\x1f`), so a downstream binary
//! gets them with a two-line `build.rs` (see the crate documentation).

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    let mut args = Vec::new();
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        args.push(format!("-Wl,-rpath,{dir}"));
        if std::path::Path::new(&dir).join("libtorch_cuda.so").exists() {
            args.push("-Wl,--no-as-needed,-ltorch_cuda,--as-needed".to_owned());
        }
    }
    for arg in &args {
        println!("cargo:rustc-link-arg={arg}");
    }
    println!("cargo:link_args={}", args.join("\x1f"));
}

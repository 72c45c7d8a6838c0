//! With feature `tch`: libtorch's rpath and `libtorch_cuda` kept linked, as
//! loaderx-tch's build script publishes them (the two lines its crate docs
//! give every binary that links libtorch); nothing otherwise.

fn main() {
    let args = std::env::var("DEP_LOADERX_TCH_LINK_ARGS").unwrap_or_default();
    args.split('\x1f')
        .filter(|a| !a.is_empty())
        .for_each(|a| println!("cargo:rustc-link-arg={a}"));
}

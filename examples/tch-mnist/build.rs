//! The two lines a binary that uses loaderx-tch needs: libtorch's rpath and
//! `libtorch_cuda` kept linked, as loaderx-tch's build script publishes them.

fn main() {
    let args = std::env::var("DEP_LOADERX_TCH_LINK_ARGS").unwrap_or_default();
    args.split('\x1f')
        .filter(|a| !a.is_empty())
        .for_each(|a| println!("cargo:rustc-link-arg={a}"));
}

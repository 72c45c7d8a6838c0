//! The `loaderx` command-line tool.

fn main() -> std::process::ExitCode {
    loaderx_core::cli::main()
}

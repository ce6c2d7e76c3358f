fn main() {
    std::process::exit(pvisor::cli::main_with_args(std::env::args_os()));
}

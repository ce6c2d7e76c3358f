// glibc's allocator spends a quarter of a large prepare in malloc and free (many small JSON
// values made and dropped per line); mimalloc's thread-local free lists take most of it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(pvisor::cli::main_with_args(std::env::args_os()));
}

// glibc's allocator took about a quarter of a large prepare in malloc and free (many small
// JSON values made and dropped per line); mimalloc's free lists take most of that. Its v2
// line: the default v3 kept freed pages longer (99 MiB peak against 79 at 20,000 batches).
// docs/performance.md has the figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(pvisor::cli::main_with_args(std::env::args_os()));
}

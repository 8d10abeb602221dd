//! The `shape` command: all of it is the crate's library, which the fuzz
//! targets reach too.

fn main() -> std::process::ExitCode {
    shape::main()
}

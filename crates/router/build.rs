//! No build step. The script is here for its build-dependency (Cargo.toml): it gives the
//! router's proc macros the `syn` features of the Python module's (pyo3's macros turn on
//! `extra-traits`), so that `make build` compiles the plugin sandbox once for both.
fn main() {}

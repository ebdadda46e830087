//! The smallest pieces every bosun crate may share, each written once:
//!
//! - [`command`]: how a command of the binary ends ([`command::Outcome`]);
//! - [`sync`]: a `Mutex` locked past a panic ([`sync::Lock`]);
//! - [`fs`]: a file written atomically ([`fs::write_atomic`]);
//! - [`process`]: a child process that dies with its parent
//!   ([`process::die_with_parent`]), the workspace's one `unsafe` block
//!   outside the binary's allocator set-up.
//!
//! It depends on nothing of bosun's.

#![warn(missing_docs)]

pub mod command;
pub mod fs;
pub mod process;
pub mod sync;

//! Every black-box test in one binary: a change relinks one test executable, not one per
//! file. Each module is one area (its own `//!` says which); `cargo test -p fsd-tests
//! --test suite <module>::` runs one area.

mod backup;
mod backup_faults;
mod backup_fuse;
mod bucket_mount;
mod cloudflare;
mod confine;
mod exec;
mod files_errno;
mod files_large_write;
mod files_ops;
mod files_raw;
mod files_read_write;
mod files_stream;
mod fsctl;
mod gateway;
mod git;
mod hostile;
mod image;
mod init;
mod interpreter;
mod kubernetes;
mod layout;
mod mount_proxy;
mod official_sdk;
mod permissions;
mod port_watch;
mod presign;
mod process;
mod retention;
mod rpc;
mod sdk;
mod sdk_exec;
mod sdk_watch;
mod search;
mod split_writes;
mod sync;
mod system;
mod terminal;
mod time_machine;
mod tunnels;
mod watch;
mod watch_overflow;
mod worker_stack;
mod ws;

//! The echo plugin's tests: its router served on a loopback port, hit over HTTP.

mod binary;
mod common;
mod conformance;
mod http;

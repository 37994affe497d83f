//! Free loopback ports.

use std::net::{Ipv4Addr, TcpListener};

use super::error::{Error, Result};

/// A TCP port on 127.0.0.1 that nothing listens on right now.
///
/// Another process may take it before we bind it; callers retry on "address already in use".
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(Error::io("finding a free port", "127.0.0.1:0"))?;
    let port = listener
        .local_addr()
        .map_err(Error::io("finding a free port", "127.0.0.1:0"))?
        .port();
    Ok(port)
}

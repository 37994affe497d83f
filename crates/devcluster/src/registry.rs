//! A registry for `make dev` and `make e2e-existing`: distribution's (hack/registry/build.sh
//! builds it, cached), on 127.0.0.1, its storage in the run's folder, stopped with the rest.
//! Plugin images are pushed to it and installed from it, so what runs carries a real digest.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::process::{Process, ProcessSpec, tail};
use super::{Error, Result};

/// A running registry.
pub struct DevRegistry {
    process: Process,
    addr: SocketAddr,
}

impl DevRegistry {
    /// Starts `binary` on 127.0.0.1:`port` (a free one when None), storing under `dir`.
    pub async fn start(binary: &Path, dir: &Path, port: Option<u16>) -> Result<DevRegistry> {
        std::fs::create_dir_all(dir).map_err(Error::io("making the registry's folder", dir))?;
        let port = match port {
            Some(p) => p,
            None => super::ports::free_port()?,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let config = dir.join("config.yml");
        std::fs::write(&config, config_yaml(&dir.join("storage"), addr))
            .map_err(Error::io("writing the registry's config", &config))?;
        let spec = ProcessSpec::new("registry", binary, dir.join("registry.log"))
            .args(["serve".to_string(), config.display().to_string()]);
        let mut process = Process::spawn(&spec).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(DevRegistry { process, addr });
            }
            if let Some(status) = process.try_wait() {
                return Err(Error::Binaries(format!(
                    "the registry exited with {status}:\n{}",
                    tail(process.log(), 20)
                )));
            }
            if tokio::time::Instant::now() > deadline {
                process.kill();
                return Err(Error::Binaries(format!(
                    "the registry did not listen on {addr} within 15s:\n{}",
                    tail(process.log(), 20)
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `127.0.0.1:<port>`: the registry part of image references.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    pub fn log(&self) -> PathBuf {
        self.process.log().to_path_buf()
    }

    /// Stops it (SIGTERM, then SIGKILL).
    pub async fn stop(mut self) {
        self.process.stop(Duration::from_secs(3)).await;
    }
}

fn config_yaml(storage: &Path, addr: SocketAddr) -> String {
    format!(
        "version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
        storage.display()
    )
}

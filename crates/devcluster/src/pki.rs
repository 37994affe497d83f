//! The control plane's keys and certificates: a CA, the API server's serving certificate, the
//! service-account signing key, and bearer tokens for the admin and the controller manager.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

use super::error::{Error, Result};

/// The first address of the service range; the `kubernetes` Service gets it.
pub const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The service range the API server allocates ClusterIPs from.
pub const SERVICE_RANGE: &str = "10.0.0.0/24";

/// Files written for the control plane, all in one folder.
#[derive(Clone, Debug)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    /// The CA certificate, PEM, for kubeconfigs.
    pub ca_pem: String,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    /// The service-account signing key (private; the API server derives the public key from it).
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
    /// The static token file: the admin and the controller manager.
    pub tokens: PathBuf,
    pub admin_token: String,
    pub controller_manager_token: String,
}

/// The admin user (in group system:masters).
pub const ADMIN_USER: &str = "devcluster-admin";
/// The user kube-controller-manager authenticates as; bootstrap RBAC binds its role.
pub const CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";

impl Pki {
    /// Generates every key and certificate into `dir`.
    pub fn generate(dir: &Path) -> Result<Self> {
        let pki = |what| move |source| Error::Pki { what, source };

        let ca_key = KeyPair::generate().map_err(pki("the CA key"))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(pki("the CA"))?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "loop-plugins devcluster CA");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .map_err(pki("the CA certificate"))?;
        let ca_pem = ca_cert.pem();
        let ca_key_pem = ca_key.serialize_pem();
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate().map_err(pki("the serving key"))?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            "kubernetes.default.svc.cluster.local".to_string(),
        ])
        .map_err(pki("the serving certificate"))?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        serving
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(SERVICE_IP)));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving
            .signed_by(&serving_key, &issuer)
            .map_err(pki("the serving certificate"))?;

        let sa_key = KeyPair::generate().map_err(pki("the service-account key"))?;

        let admin_token = random_token();
        let controller_manager_token = random_token();
        let tokens = format!(
            "{admin_token},{ADMIN_USER},{ADMIN_USER},\"system:masters\"\n\
             {controller_manager_token},{CONTROLLER_MANAGER_USER},{CONTROLLER_MANAGER_USER}\n"
        );

        let files = Self {
            ca_cert: dir.join("ca.crt"),
            ca_key: dir.join("ca.key"),
            ca_pem: ca_pem.clone(),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            sa_key: dir.join("sa.key"),
            sa_pub: dir.join("sa.pub"),
            tokens: dir.join("tokens.csv"),
            admin_token,
            controller_manager_token,
        };
        write(&files.ca_cert, &ca_pem)?;
        write(&files.ca_key, &ca_key_pem)?;
        write(&files.serving_cert, &serving_cert.pem())?;
        write(&files.serving_key, &serving_key.serialize_pem())?;
        write(&files.sa_key, &sa_key.serialize_pem())?;
        write(&files.sa_pub, &sa_key.public_key_pem())?;
        write(&files.tokens, &tokens)?;
        Ok(files)
    }
}

fn random_token() -> String {
    hex::encode(rand::random::<[u8; 24]>())
}

fn write(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(Error::io("writing a key or certificate", path))?;
    file.write_all(text.as_bytes())
        .map_err(Error::io("writing a key or certificate", path))
}

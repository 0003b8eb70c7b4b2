//! In-memory full TLS 1.3 handshakes with rustls, timed per side, printed
//! as `go test -bench` lines (see Cargo.toml).
//!
//! Usage: ztls-rustls-bench CA.pem CHAIN.pem KEY.pem [SECONDS]
//!        ztls-rustls-bench --primitives [SECONDS [KEY.pem]]
//!
//! Each case is the one of tls13/bench_test.go's BenchmarkHandshake of
//! the same name: TLS_AES_128_GCM_SHA256, an ECDSA P-256 leaf signed by
//! the CA, one session ticket from the server (read by the client, not
//! used: every handshake is a full one), client authentication off.
//! x25519 uses rustls's ring provider (what rustls users get by default
//! with ring); X25519MLKEM768 uses aws-lc-rs (ring has no ML-KEM).
//!
//! `--primitives` times the key exchanges alone through rustls's
//! `SupportedKxGroup` (what its handshakes call), as
//! tls13/internal/kex's BenchmarkKeyExchange does for ztls:
//! `keygen` makes a share (`start` and its public key: a fixed-base
//! multiplication, plus the ML-KEM key generation for the hybrid);
//! `client` makes a share and completes it with a server's answer
//! (decapsulation and a ladder for the hybrid); `server` answers a
//! client's share (`start_and_complete`: encapsulation, a key and a ladder).
//! With KEY.pem (an ECDSA P-256 key) it also times the server's
//! CertificateVerify signature (ECDSA P-256 with SHA-256 over a 130-byte
//! message, as TLS 1.3 signs) with each provider's signer, and the
//! client's verification of it (`ecdsa-p256/verify`, SHA-256 included).

use std::env;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::Resumption;
use rustls::crypto::{aws_lc_rs, ring, CryptoProvider, SupportedKxGroup};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, Error, RootCertStore, ServerConfig, ServerConnection, SignatureScheme};

struct Case {
    name: &'static str,
    provider: fn() -> CryptoProvider,
}

fn ring_x25519() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![ring::cipher_suite::TLS13_AES_128_GCM_SHA256],
        kx_groups: vec![ring::kx_group::X25519],
        ..ring::default_provider()
    }
}

fn aws_lc_x25519mlkem768() -> CryptoProvider {
    CryptoProvider {
        cipher_suites: vec![aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256],
        kx_groups: vec![aws_lc_rs::kx_group::X25519MLKEM768],
        ..aws_lc_rs::default_provider()
    }
}

const CASES: &[Case] = &[
    Case { name: "x25519-ecdsa-aes128", provider: ring_x25519 },
    Case { name: "x25519mlkem768-ecdsa-aes128", provider: aws_lc_x25519mlkem768 },
];

struct Pki {
    roots: RootCertStore,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

fn load(ca: &str, chain: &str, key: &str) -> Result<Pki, String> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).map_err(|e| format!("{ca}: {e}"))? {
        roots.add(c.map_err(|e| format!("{ca}: {e}"))?).map_err(|e| format!("{ca}: {e}"))?;
    }
    let chain = CertificateDer::pem_file_iter(chain)
        .map_err(|e| format!("{chain}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{chain}: {e}"))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    Ok(Pki { roots, chain, key })
}

fn configs(case: &Case, pki: &Pki) -> Result<(Arc<ClientConfig>, Arc<ServerConfig>), String> {
    let provider = Arc::new((case.provider)());
    let mut client = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(pki.roots.clone())
        .with_no_client_auth();
    client.resumption = Resumption::disabled();
    let mut server = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(pki.chain.clone(), pki.key.clone_key())
        .map_err(|e| e.to_string())?;
    server.send_tls13_tickets = 1;
    Ok((Arc::new(client), Arc::new(server)))
}

/// Moves everything `from` has to write into `to`; returns the time each
/// side spent.
fn flight(from: &mut Connection, to: &mut Connection, buf: &mut Vec<u8>) -> Result<(Duration, Duration), String> {
    let t = Instant::now();
    buf.clear();
    while from.wants_write() {
        from.write_tls(buf).map_err(|e| e.to_string())?;
    }
    let wrote = t.elapsed();
    let t = Instant::now();
    let mut rd = &buf[..];
    while !rd.is_empty() {
        to.read_tls(&mut rd).map_err(|e| e.to_string())?;
        to.process_new_packets().map_err(|e| e.to_string())?;
    }
    Ok((wrote, t.elapsed()))
}

/// One full handshake, the server's ticket read by the client; returns
/// the client's and the server's time.
fn handshake(client: &Arc<ClientConfig>, server: &Arc<ServerConfig>, name: &ServerName<'static>, buf: &mut Vec<u8>) -> Result<(Duration, Duration), String> {
    let t = Instant::now();
    let mut c = Connection::Client(ClientConnection::new(client.clone(), name.clone()).map_err(|e| e.to_string())?);
    let mut ct = t.elapsed();
    let t = Instant::now();
    let mut s = Connection::Server(ServerConnection::new(server.clone()).map_err(|e| e.to_string())?);
    let mut st = t.elapsed();
    while c.wants_write() || s.wants_write() || c.is_handshaking() || s.is_handshaking() {
        let (w, r) = flight(&mut c, &mut s, buf)?;
        ct += w;
        st += r;
        let (w, r) = flight(&mut s, &mut c, buf)?;
        st += w;
        ct += r;
        if c.is_handshaking() && !c.wants_write() && !s.wants_write() {
            return Err("the handshake stalled".into());
        }
    }
    Ok((ct, st))
}

fn run(case: &Case, pki: &Pki, budget: Duration) -> Result<(), String> {
    let (client, server) = configs(case, pki)?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(16 << 10);
    for _ in 0..50 {
        handshake(&client, &server, &name, &mut buf)?; // warm-up
    }
    let (mut n, mut ct, mut st) = (0u64, Duration::ZERO, Duration::ZERO);
    let start = Instant::now();
    while start.elapsed() < budget {
        let (c, s) = handshake(&client, &server, &name, &mut buf)?;
        ct += c;
        st += s;
        n += 1;
    }
    let total = start.elapsed();
    println!(
        "BenchmarkHandshake/{}/rustls-1\t{}\t{} ns/op\t{} client-ns/op\t{} server-ns/op",
        case.name,
        n,
        total.as_nanos() / n as u128,
        ct.as_nanos() / n as u128,
        st.as_nanos() / n as u128
    );
    Ok(())
}

/// Runs op for budget after a warm-up and prints it as a benchmark line.
fn time_op(name: &str, budget: Duration, mut op: impl FnMut() -> Result<(), Error>) -> Result<(), String> {
    for _ in 0..50 {
        op().map_err(|e| format!("{name}: {e}"))?;
    }
    let mut n = 0u64;
    let start = Instant::now();
    while start.elapsed() < budget {
        op().map_err(|e| format!("{name}: {e}"))?;
        n += 1;
    }
    println!("BenchmarkKeyExchange/{name}-1\t{n}\t{} ns/op", start.elapsed().as_nanos() / n as u128);
    Ok(())
}

/// The server's signature alone, per provider (see the file's doc).
fn signatures(budget: Duration, key: &str) -> Result<(), String> {
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("{key}: {e}"))?;
    let msg = [0x20u8; 130];
    for (name, provider) in [("ring", ring::default_provider()), ("aws-lc-rs", aws_lc_rs::default_provider())] {
        let signing = provider.key_provider.load_private_key(key.clone_key()).map_err(|e| e.to_string())?;
        let signer = signing
            .choose_scheme(&[SignatureScheme::ECDSA_NISTP256_SHA256])
            .ok_or("the key is not an ECDSA P-256 key")?;
        time_op(&format!("ecdsa-p256/sign/{name}"), budget, || {
            std::hint::black_box(signer.sign(&msg)?);
            Ok(())
        })?;
        // The client's check of that signature with the algorithm rustls's
        // TLS 1.3 path uses for the scheme (the first of its mapping), given
        // the uncompressed point (the SPKI's last 65 bytes for P-256).
        let sig = signer.sign(&msg).map_err(|e| e.to_string())?;
        let spki = signing.public_key().ok_or("the key has no public key")?;
        let point = &spki.as_ref()[spki.as_ref().len() - 65..];
        let algs = provider
            .signature_verification_algorithms
            .mapping
            .iter()
            .find(|(s, _)| *s == SignatureScheme::ECDSA_NISTP256_SHA256)
            .ok_or("no verification algorithm for ECDSA P-256")?
            .1;
        time_op(&format!("ecdsa-p256/verify/{name}"), budget, || {
            algs[0]
                .verify_signature(point, std::hint::black_box(&msg), &sig)
                .map_err(|_| Error::General("the signature did not verify".into()))
        })?;
    }
    Ok(())
}

/// The key exchanges alone, per group and provider (see the file's doc).
fn primitives(budget: Duration) -> Result<(), String> {
    let groups: [(&str, &str, &'static dyn SupportedKxGroup); 3] = [
        ("x25519", "ring", ring::kx_group::X25519),
        ("x25519", "aws-lc-rs", aws_lc_rs::kx_group::X25519),
        ("x25519mlkem768", "aws-lc-rs", aws_lc_rs::kx_group::X25519MLKEM768),
    ];
    for (group, provider, kx) in groups {
        let client_share = kx.start().map_err(|e| e.to_string())?.pub_key().to_vec();
        let server_share = kx.start_and_complete(&client_share).map_err(|e| e.to_string())?.pub_key;
        time_op(&format!("{group}/keygen/{provider}"), budget, || {
            let k = kx.start()?;
            std::hint::black_box(k.pub_key().to_vec());
            Ok(())
        })?;
        time_op(&format!("{group}/client/{provider}"), budget, || {
            let k = kx.start()?;
            std::hint::black_box(k.pub_key().to_vec());
            std::hint::black_box(k.complete(&server_share)?);
            Ok(())
        })?;
        time_op(&format!("{group}/server/{provider}"), budget, || {
            std::hint::black_box(kx.start_and_complete(&client_share)?);
            Ok(())
        })?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().collect();
    if args.len() >= 2 && args[1] == "--primitives" {
        let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).filter(|s: &f64| *s > 0.0).unwrap_or(1.0);
        let budget = Duration::from_secs_f64(secs);
        let res = primitives(budget).and_then(|()| match args.get(3) {
            Some(key) => signatures(budget, key),
            None => Ok(()),
        });
        if let Err(e) = res {
            eprintln!("ztls-rustls-bench: {e}");
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    if args.len() < 4 || args.len() > 5 {
        eprintln!("usage: {} CA.pem CHAIN.pem KEY.pem [SECONDS]", args[0]);
        return ExitCode::from(2);
    }
    let secs: f64 = match args.get(4).map(|s| s.parse()) {
        None => 1.0,
        Some(Ok(s)) if s > 0.0 => s,
        _ => {
            eprintln!("SECONDS must be a positive number");
            return ExitCode::from(2);
        }
    };
    let pki = match load(&args[1], &args[2], &args[3]) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ztls-rustls-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    for case in CASES {
        if let Err(e) = run(case, &pki, Duration::from_secs_f64(secs)) {
            eprintln!("ztls-rustls-bench: {}: {e}", case.name);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

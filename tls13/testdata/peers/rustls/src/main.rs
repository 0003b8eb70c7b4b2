//! A rustls peer for ztls's interop tests (tls13/interop_rustls_test.go).
//!
//! Arguments are key=value pairs (see tls13/testdata/peers/README.md):
//!   role=client|server  port=N (client: where to connect; server: 0 = any)
//!   suites=0x1301,...   groups=0x001d,...  (IANA codepoints, preference order)
//!   ca=FILE  cert=FILE  key=FILE  conns=N  early=1  keyupdate=1
//!   compress=none|brotli|zlib (RFC 8879 algorithms offered or used)
//!
//! The server prints "LISTEN <port>", then serves connections one after the
//! other: for each it prints a HANDSHAKE line and "EARLY <text>" for accepted
//! 0-RTT data, then echoes lines; the line "keyupdate" makes it update its
//! keys and answer "keyupdate-done". The client makes conns connections (the
//! second one on resumes; with early=1 it sends 0-RTT data), prints a
//! HANDSHAKE line for each, sends "ping-<i>" and reads it back; with
//! keyupdate=1 it then updates its keys and sends "after-keyupdate-<i>".

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use rustls::crypto::aws_lc_rs as provider;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    if let Err(e) = run() {
        println!("ERROR {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let args: HashMap<String, String> = std::env::args()
        .skip(1)
        .filter_map(|a| a.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    let get = |k: &str| args.get(k).cloned().unwrap_or_default();
    let provider = Arc::new(make_provider(&get("suites"), &get("groups"))?);
    match get("role").as_str() {
        "server" => server(provider, &args),
        "client" => client(provider, &args),
        r => Err(format!("unknown role {r:?}").into()),
    }
}

fn codepoints(list: &str) -> Res<Vec<u16>> {
    list.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| Ok(u16::from_str_radix(s.trim_start_matches("0x"), 16)?))
        .collect()
}

/// The aws-lc-rs provider restricted to the given suites and groups, in that order.
fn make_provider(suites: &str, groups: &str) -> Res<CryptoProvider> {
    let mut p = provider::default_provider();
    if !suites.is_empty() {
        let mut v = Vec::new();
        for id in codepoints(suites)? {
            let s = provider::ALL_CIPHER_SUITES
                .iter()
                .find(|s| u16::from(s.suite()) == id)
                .ok_or(format!("rustls has no cipher suite {id:#06x}"))?;
            v.push(*s);
        }
        p.cipher_suites = v;
    }
    if !groups.is_empty() {
        let mut v = Vec::new();
        for id in codepoints(groups)? {
            let g = provider::ALL_KX_GROUPS
                .iter()
                .find(|g| u16::from(g.name()) == id)
                .ok_or(format!("rustls has no group {id:#06x}"))?;
            v.push(*g);
        }
        p.kx_groups = v;
    }
    Ok(p)
}

fn load_certs(path: &str) -> Res<Vec<rustls::pki_types::CertificateDer<'static>>> {
    let mut r = BufReader::new(std::fs::File::open(path)?);
    Ok(rustls_pemfile::certs(&mut r).collect::<Result<Vec<_>, _>>()?)
}

fn compressors(name: &str) -> Res<(Vec<&'static dyn rustls::compress::CertCompressor>, Vec<&'static dyn rustls::compress::CertDecompressor>)> {
    Ok(match name {
        "" | "none" => (vec![], vec![]),
        "brotli" => (vec![rustls::compress::BROTLI_COMPRESSOR], vec![rustls::compress::BROTLI_DECOMPRESSOR]),
        "zlib" => (vec![rustls::compress::ZLIB_COMPRESSOR], vec![rustls::compress::ZLIB_DECOMPRESSOR]),
        n => return Err(format!("unknown compression {n:?}").into()),
    })
}

fn hex(v: Option<u16>) -> String {
    v.map(|x| format!("{x:#06x}")).unwrap_or_else(|| "none".into())
}

fn describe(c: &Connection) -> String {
    let (suite, group, kind) = match c {
        Connection::Client(c) => (c.negotiated_cipher_suite(), c.negotiated_key_exchange_group(), c.handshake_kind()),
        Connection::Server(c) => (c.negotiated_cipher_suite(), c.negotiated_key_exchange_group(), c.handshake_kind()),
    };
    let kind = match kind {
        Some(rustls::HandshakeKind::Resumed) => "resumed",
        Some(rustls::HandshakeKind::FullWithHelloRetryRequest) => "hrr",
        Some(rustls::HandshakeKind::Full) => "full",
        None => "none",
    };
    format!(
        "suite={} group={} kind={}",
        hex(suite.map(|s| u16::from(s.suite()))),
        hex(group.map(|g| u16::from(g.name()))),
        kind
    )
}

fn server(provider: Arc<CryptoProvider>, args: &HashMap<String, String>) -> Res<()> {
    let certs = load_certs(&args["cert"])?;
    let key = rustls_pemfile::private_key(&mut BufReader::new(std::fs::File::open(&args["key"])?))?
        .ok_or("no private key")?;
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    if args.get("early").map(String::as_str) == Some("1") {
        cfg.max_early_data_size = 16384;
    }
    cfg.send_tls13_tickets = 2;
    cfg.cert_compressors = compressors(args.get("compress").map(String::as_str).unwrap_or(""))?.0;
    let cfg = Arc::new(cfg);
    let ln = TcpListener::bind(("127.0.0.1", args.get("port").map_or(Ok(0), |p| p.parse())?))?;
    println!("LISTEN {}", ln.local_addr()?.port());
    flush();
    for sock in ln.incoming() {
        let sock = sock?;
        if let Err(e) = serve_one(cfg.clone(), sock) {
            println!("CONNERROR {e}");
            flush();
        }
    }
    Ok(())
}

fn flush() {
    std::io::stdout().flush().ok();
}

fn serve_one(cfg: Arc<ServerConfig>, mut sock: TcpStream) -> Res<()> {
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut conn = ServerConnection::new(cfg)?;
    let mut early = Vec::new();
    // Drive the handshake by hand so 0-RTT data can be read as it arrives.
    while conn.is_handshaking() {
        while conn.wants_write() {
            conn.write_tls(&mut sock)?;
        }
        if !conn.is_handshaking() {
            break;
        }
        if conn.read_tls(&mut sock)? == 0 {
            return Err("EOF during the handshake".into());
        }
        conn.process_new_packets()?;
        if let Some(mut ed) = conn.early_data() {
            ed.read_to_end(&mut early)?;
        }
    }
    while conn.wants_write() {
        conn.write_tls(&mut sock)?;
    }
    let c = Connection::Server(conn);
    println!("HANDSHAKE {}", describe(&c));
    let Connection::Server(mut conn) = c else { unreachable!() };
    if !early.is_empty() {
        println!("EARLY {}", String::from_utf8_lossy(&early).trim_end());
    }
    flush();
    let mut tls = rustls::Stream::new(&mut conn, &mut sock);
    let mut r = BufReader::new(ReadHalf(&mut tls));
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let ReadHalf(tls) = r.get_mut();
        if line.trim_end() == "keyupdate" {
            tls.conn.refresh_traffic_keys()?;
            tls.write_all(b"keyupdate-done\n")?;
            println!("KEYUPDATE sent");
            flush();
        } else {
            tls.write_all(line.as_bytes())?;
        }
        tls.flush()?;
    }
}

/// ReadHalf lets a BufReader wrap a rustls Stream that is also written to.
struct ReadHalf<'a, 'b>(&'a mut rustls::Stream<'b, ServerConnection, TcpStream>);

impl Read for ReadHalf<'_, '_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

fn client(provider: Arc<CryptoProvider>, args: &HashMap<String, String>) -> Res<()> {
    let mut roots = RootCertStore::empty();
    for c in load_certs(&args["ca"])? {
        roots.add(c)?;
    }
    let mut cfg = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let early = args.get("early").map(String::as_str) == Some("1");
    cfg.enable_early_data = early;
    cfg.cert_decompressors = compressors(args.get("compress").map(String::as_str).unwrap_or(""))?.1;
    let cfg = Arc::new(cfg);
    let conns: usize = args.get("conns").map_or(Ok(1), |n| n.parse())?;
    let keyupdate = args.get("keyupdate").map(String::as_str) == Some("1");
    let port: u16 = args["port"].parse()?;
    for i in 0..conns {
        let mut sock = TcpStream::connect(("127.0.0.1", port))?;
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
        let mut conn = ClientConnection::new(cfg.clone(), ServerName::try_from("localhost")?.to_owned())?;
        let early_text = format!("early-from-rustls-{i}\n");
        let mut early_sent = false;
        if let Some(mut ed) = conn.early_data() {
            ed.write_all(early_text.as_bytes())?;
            early_sent = true;
        }
        conn.complete_io(&mut sock)?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        let accepted = conn.is_early_data_accepted();
        let c = Connection::Client(conn);
        let ed = if !early_sent { "none" } else if accepted { "accepted" } else { "rejected" };
        println!("HANDSHAKE {} early={ed}", describe(&c));
        flush();
        let Connection::Client(mut conn) = c else { unreachable!() };
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        echo_line(&mut tls, &format!("ping-{i}"))?;
        if keyupdate {
            tls.conn.refresh_traffic_keys()?;
            println!("KEYUPDATE sent");
            echo_line(&mut tls, &format!("after-keyupdate-{i}"))?;
        }
        tls.conn.send_close_notify();
        tls.flush()?;
    }
    println!("DONE");
    Ok(())
}

/// echo_line sends a line and reads it back, byte by byte (the line is short).
fn echo_line(tls: &mut rustls::Stream<'_, ClientConnection, TcpStream>, line: &str) -> Res<()> {
    tls.write_all(format!("{line}\n").as_bytes())?;
    tls.flush()?;
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while got.last() != Some(&b'\n') {
        if tls.read(&mut b)? == 0 {
            return Err(format!("EOF before the echo of {line:?}").into());
        }
        got.push(b[0]);
    }
    if got != format!("{line}\n").as_bytes() {
        return Err(format!("echo {:?}, want {line:?}", String::from_utf8_lossy(&got)).into());
    }
    println!("ECHO {line}");
    flush();
    Ok(())
}

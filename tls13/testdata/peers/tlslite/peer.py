#!/usr/bin/env python3
"""A tlslite-ng peer for ztls's interop tests (tls13/interop_tlslite_test.go).

Arguments are key=value pairs and the line protocol is the one in
../README.md: role=client|server port=N suites=... groups=... ca= cert= key=
conns=N keyupdate=1. Suites and groups use tlslite-ng's names (aes128gcm,
x25519, ...). tlslite-ng sends and accepts no 0-RTT data.

tlslite-ng checks the server's CertificateVerify but not its chain; the
client checks that the leaf is signed by the CA with pyca/cryptography.
"""

import socket
import sys

from tlslite.api import HandshakeSettings, TLSConnection, X509CertChain, parsePEMKey
from tlslite.constants import KeyUpdateMessageType


def settings_for(args):
    s = HandshakeSettings()
    s.minVersion = (3, 4)
    s.maxVersion = (3, 4)
    if args.get("suites"):
        s.cipherNames = args["suites"].split(",")
    if args.get("groups"):
        groups = args["groups"].split(",")
        s.eccCurves = groups
        s.keyShares = groups[:1]  # a client's share for its first group only
    s.certificate_compression_send = args["compress"].split(",") if args.get("compress") else []
    s.certificate_compression_receive = list(s.certificate_compression_send)
    return s


def check_chain(conn, ca_file):
    """Checks that the server's leaf is issued by the CA and names localhost."""
    from cryptography import x509

    ca = x509.load_pem_x509_certificate(open(ca_file, "rb").read())
    leaf = x509.load_der_x509_certificate(bytes(conn.session.serverCertChain.x509List[0].bytes))
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    if "localhost" not in names.get_values_for_type(x509.DNSName):
        raise ValueError("the server certificate does not name localhost")


class Lines:
    """Reads lines from a TLSConnection."""

    def __init__(self, conn):
        self.conn = conn
        self.buf = b""

    def readline(self):
        while b"\n" not in self.buf:
            data = self.conn.read()
            if not data:
                return None
            self.buf += bytes(data)
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()


def update_keys(conn):
    for _ in conn.send_keyupdate_request(KeyUpdateMessageType.update_requested):
        pass


def describe(conn):
    kind = "resumed" if conn.resumed else "full"
    return "suite=%s kind=%s" % (conn.getCipherName(), kind)


def server(args):
    chain = X509CertChain()
    chain.parsePemList(open(args["cert"]).read())
    key = parsePEMKey(open(args["key"]).read(), private=True)
    settings = settings_for(args)
    settings.ticketKeys = [bytearray(__import__("os").urandom(32))]
    ln = socket.socket()
    ln.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ln.bind(("127.0.0.1", int(args.get("port", "0"))))
    ln.listen(16)
    print("LISTEN %d" % ln.getsockname()[1], flush=True)
    while True:
        sock, _ = ln.accept()
        sock.settimeout(10)
        conn = TLSConnection(sock)
        try:
            conn.handshakeServer(certChain=chain, privateKey=key, settings=settings)
            print("HANDSHAKE " + describe(conn), flush=True)
            lines = Lines(conn)
            while True:
                line = lines.readline()
                if line is None:
                    break
                if line == "keyupdate":
                    update_keys(conn)
                    conn.write(b"keyupdate-done\n")
                    print("KEYUPDATE sent", flush=True)
                else:
                    conn.write((line + "\n").encode())
        except Exception as e:  # one connection's failure ends only it
            print("CONNERROR %r" % e, flush=True)
        finally:
            try:
                conn.close()
            except Exception:
                pass


def echo_line(conn, lines, text):
    conn.write((text + "\n").encode())
    got = lines.readline()
    if got != text:
        raise ValueError("echo %r, want %r" % (got, text))
    print("ECHO " + text, flush=True)


def client(args):
    settings = settings_for(args)
    session = None
    for i in range(int(args.get("conns", "1"))):
        sock = socket.create_connection(("127.0.0.1", int(args["port"])), timeout=10)
        conn = TLSConnection(sock)
        conn.handshakeClientCert(settings=settings, session=session, serverName="localhost")
        if not conn.resumed:
            check_chain(conn, args["ca"])
        print("HANDSHAKE %s early=none" % describe(conn), flush=True)
        lines = Lines(conn)
        echo_line(conn, lines, "ping-%d" % i)
        if args.get("keyupdate") == "1":
            update_keys(conn)
            print("KEYUPDATE sent", flush=True)
            echo_line(conn, lines, "after-keyupdate-%d" % i)
        session = conn.session  # holds the tickets read with the echo
        conn.close()
    print("DONE", flush=True)


def main():
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    try:
        {"server": server, "client": client}[args["role"]](args)
    except Exception as e:
        print("ERROR %r" % e, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()

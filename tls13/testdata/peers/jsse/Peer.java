// A JSSE (Java's own TLS) peer for ztls's interop tests
// (tls13/interop_jsse_test.go), compiled by the test with javac.
//
// Arguments are key=value pairs and the line protocol is the one in
// ../README.md: role=client|server port=N suites=... groups=... ca= cert=
// key= conns=N keyupdate=1. Suites are JSSE's names (the IANA ones), groups
// its jdk.tls.namedGroups names. JSSE has no 0-RTT. In TLS 1.3,
// startHandshake() on an established connection sends a KeyUpdate.

import java.io.*;
import java.net.*;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.security.*;
import java.security.cert.*;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.*;
import javax.net.ssl.*;

public class Peer {
    static Map<String, String> args = new HashMap<>();

    public static void main(String[] argv) {
        for (String a : argv) {
            int i = a.indexOf('=');
            if (i > 0) args.put(a.substring(0, i), a.substring(i + 1));
        }
        try {
            // The groups must be set before JSSE reads its configuration.
            if (args.containsKey("groups")) System.setProperty("jdk.tls.namedGroups", args.get("groups"));
            if (args.get("role").equals("server")) server(); else client();
        } catch (Exception e) {
            System.out.println("ERROR " + e);
            System.out.flush();
            System.exit(1);
        }
    }

    static List<X509Certificate> certs(String file) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        try (InputStream in = new FileInputStream(file)) {
            List<X509Certificate> out = new ArrayList<>();
            for (java.security.cert.Certificate c : cf.generateCertificates(in)) out.add((X509Certificate) c);
            return out;
        }
    }

    static PrivateKey key(String file) throws Exception {
        String pem = new String(Files.readAllBytes(Paths.get(file)), StandardCharsets.US_ASCII);
        String b64 = pem.replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        byte[] der = Base64.getDecoder().decode(b64);
        for (String alg : new String[] {"EC", "RSA", "Ed25519"}) {
            try {
                return KeyFactory.getInstance(alg).generatePrivate(new PKCS8EncodedKeySpec(der));
            } catch (Exception e) {
                // try the next algorithm
            }
        }
        throw new Exception("cannot parse the PKCS#8 key in " + file);
    }

    static SSLContext context(boolean server) throws Exception {
        KeyStore trust = KeyStore.getInstance("PKCS12");
        trust.load(null, null);
        int n = 0;
        for (X509Certificate c : certs(args.get("ca"))) trust.setCertificateEntry("ca" + n++, c);
        TrustManagerFactory tmf = TrustManagerFactory.getInstance("PKIX");
        tmf.init(trust);
        KeyManager[] kms = null;
        if (server) {
            KeyStore ks = KeyStore.getInstance("PKCS12");
            ks.load(null, null);
            char[] pw = "peer".toCharArray();
            ks.setKeyEntry("server", key(args.get("key")), pw, certs(args.get("cert")).toArray(new X509Certificate[0]));
            KeyManagerFactory kmf = KeyManagerFactory.getInstance("SunX509");
            kmf.init(ks, pw);
            kms = kmf.getKeyManagers();
        }
        SSLContext ctx = SSLContext.getInstance("TLSv1.3");
        ctx.init(kms, tmf.getTrustManagers(), null);
        return ctx;
    }

    static void configure(SSLSocket s) {
        s.setEnabledProtocols(new String[] {"TLSv1.3"});
        if (args.containsKey("suites")) s.setEnabledCipherSuites(args.get("suites").split(","));
    }

    static void server() throws Exception {
        SSLContext ctx = context(true);
        SSLServerSocket ln = (SSLServerSocket) ctx.getServerSocketFactory()
                .createServerSocket(Integer.parseInt(args.getOrDefault("port", "0")), 16, InetAddress.getByName("127.0.0.1"));
        System.out.println("LISTEN " + ln.getLocalPort());
        System.out.flush();
        while (true) {
            try (SSLSocket s = (SSLSocket) ln.accept()) {
                s.setSoTimeout(10000);
                configure(s);
                s.startHandshake();
                System.out.println("HANDSHAKE suite=" + s.getSession().getCipherSuite());
                System.out.flush();
                BufferedReader r = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
                OutputStream w = s.getOutputStream();
                String line;
                while ((line = r.readLine()) != null) {
                    if (line.equals("keyupdate")) {
                        s.startHandshake(); // TLS 1.3: a KeyUpdate
                        w.write("keyupdate-done\n".getBytes(StandardCharsets.UTF_8));
                        System.out.println("KEYUPDATE sent");
                        System.out.flush();
                    } else {
                        w.write((line + "\n").getBytes(StandardCharsets.UTF_8));
                    }
                    w.flush();
                }
            } catch (Exception e) {
                System.out.println("CONNERROR " + e);
                System.out.flush();
            }
        }
    }

    static void echo(BufferedReader r, OutputStream w, String line) throws Exception {
        w.write((line + "\n").getBytes(StandardCharsets.UTF_8));
        w.flush();
        String got = r.readLine();
        if (!line.equals(got)) throw new Exception("echo " + got + ", want " + line);
        System.out.println("ECHO " + line);
        System.out.flush();
    }

    static void client() throws Exception {
        SSLContext ctx = context(false);
        int port = Integer.parseInt(args.get("port"));
        int conns = Integer.parseInt(args.getOrDefault("conns", "1"));
        for (int i = 0; i < conns; i++) {
            Socket raw = new Socket(InetAddress.getByName("127.0.0.1"), port);
            // The name is "localhost" for SNI, the session cache and the name check.
            try (SSLSocket s = (SSLSocket) ctx.getSocketFactory().createSocket(raw, "localhost", port, true)) {
                s.setSoTimeout(10000);
                configure(s);
                SSLParameters p = s.getSSLParameters();
                p.setEndpointIdentificationAlgorithm("HTTPS");
                s.setSSLParameters(p);
                s.startHandshake();
                System.out.println("HANDSHAKE suite=" + s.getSession().getCipherSuite() + " early=none");
                System.out.flush();
                BufferedReader r = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
                OutputStream w = s.getOutputStream();
                echo(r, w, "ping-" + i);
                if ("1".equals(args.get("keyupdate"))) {
                    s.startHandshake(); // TLS 1.3: a KeyUpdate
                    System.out.println("KEYUPDATE sent");
                    echo(r, w, "after-keyupdate-" + i);
                }
            }
        }
        System.out.println("DONE");
        System.out.flush();
    }
}

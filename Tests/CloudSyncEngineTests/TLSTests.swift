import Foundation
import TestSupport
import Testing

/// A WebDAV server with a certificate of its own (a NAS at home: a private CA, not in the system's store), over
/// real TLS (`openssl` makes the CA and the server's certificate, the WebDAV fake serves HTTPS with it).
@Suite struct TLSTests {
    /// A CA and a certificate for 127.0.0.1 signed by it, in `dir`: ca.pem, server.pem, server.key; and another
    /// CA, other-ca.pem.
    static func makeCertificates(in dir: URL) throws {
        let script = """
            set -e
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=cloudsync test CA" \
                -keyout ca.key -out ca.pem 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile san.ext \
                -out server.pem 2>/dev/null
            openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=another CA" \
                -keyout other-ca.key -out other-ca.pem 2>/dev/null
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        process.currentDirectoryURL = dir
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw TestSupportError("openssl could not make the test certificates (apt-get install openssl; scripts/install-deps.sh does)")
        }
    }

    @Test func aServerWithItsOwnCAIsTrustedThroughCaFile() async throws {
        let certificates = try temporaryDirectory("tls")
        defer { try? FileManager.default.removeItem(at: certificates) }
        try Self.makeCertificates(in: certificates)
        let fake = try await PythonFake.start("webdav_fake.py", arguments: [
            "--tls-cert", certificates.appendingPathComponent("server.pem").path,
            "--tls-key", certificates.appendingPathComponent("server.key").path,
        ])
        defer { fake.stop() }
        let url = "https://127.0.0.1:\(fake.ports[0])/dav/"
        let env = try Env(url: url)
        defer { env.cleanup() }

        // Without ca_file the certificate is refused, and the message says what to set.
        let refused = try env.run(["ls"])
        #expect(refused.status == 3, "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("certificate") && refused.stderr.contains("ca_file"), "stderr: \(refused.stderr)")

        // With the CA as ca_file (relative to the config file's folder, as every path of the config) the listing,
        // the downloads and serve's on-demand fetches all go through.
        try FileManager.default.copyItem(at: certificates.appendingPathComponent("ca.pem"), to: env.dir.appendingPathComponent("nas-ca.pem"))
        try env.write(remoteLines: Env.webdavLines(url) + ["ca_file = \"nas-ca.pem\""])
        let pull = try env.run(["pull"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        #expect(FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent("Sub/Кино.mp3").path), "stderr: \(pull.stderr)")
        let verify = try env.run(["cache", "verify"])
        #expect(verify.status == 0 && verify.stdout.contains("0 mismatched"), "\(verify.stdout) \(verify.stderr)")
        // serve fetches a track the cache no longer holds from the same server.
        let removed = try env.run(["cache", "rm", "Sub/Кино.mp3"])
        #expect(removed.status == 0, "stderr: \(removed.stderr)")
        let serve = try env.start(["serve", "--port", "0"])
        defer { serve.stop() }
        let base = try serve.firstStdoutLine(timeout: 30).replacingOccurrences(of: "listening on ", with: "")
        let get = Process()
        get.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        let served = env.dir.appendingPathComponent("served.mp3")
        get.arguments = ["-sf", "-o", served.path, base + "tracks/lib/Sub/%D0%9A%D0%B8%D0%BD%D0%BE.mp3"]
        try get.run()
        get.waitUntilExit()
        #expect(get.terminationStatus == 0, "curl through serve: exit \(get.terminationStatus)")
        #expect(try Data(contentsOf: served).count > 0)
        let shown = try env.run(["config", "show"])
        #expect(shown.stdout.contains("ca_file = \"\(env.dir.appendingPathComponent("nas-ca.pem").path)\""), "\(shown.stdout)")

        // The server's own certificate will do too (what a self-signed one needs)…
        try env.write(remoteLines: Env.webdavLines(url) + ["ca_file = \"\(certificates.appendingPathComponent("server.pem").path)\""])
        let pinned = try env.run(["ls"])
        #expect(pinned.status == 0, "stderr: \(pinned.stderr)")
        // …but another CA is no help: the certificate is still refused.
        try env.write(remoteLines: Env.webdavLines(url) + ["ca_file = \"\(certificates.appendingPathComponent("other-ca.pem").path)\""])
        let wrong = try env.run(["ls"])
        #expect(wrong.status == 3 && wrong.stderr.contains("ca_file"), "stderr: \(wrong.stderr)")
    }

    /// A ca_file that is missing or holds no certificate is a configuration error at its line, before any request.
    @Test(arguments: [
        ("missing.pem", nil, "ca_file: cannot read"),
        ("key.pem", "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n", "holds no PEM certificate"),
        ("~root/ca.pem", nil, "~user is not expanded"),
    ] as [(String, String?, String)])
    func aCaFileThatIsNoCertificateIsAConfigError(name: String, contents: String?, message: String) throws {
        let env = try Env(url: "https://127.0.0.1:1/dav/")
        defer { env.cleanup() }
        if let contents { try contents.write(to: env.dir.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        try env.write(remoteLines: Env.webdavLines("https://127.0.0.1:1/dav/") + ["ca_file = \"\(name)\""])
        let r = try env.run(["ls"])
        #expect(r.status == 3, "stderr: \(r.stderr)")
        #expect(r.stderr.contains(message) && r.stderr.contains("config.toml:"), "stderr: \(r.stderr)")
    }
}

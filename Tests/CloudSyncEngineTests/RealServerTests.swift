import Foundation
import Testing
import TestSupport

/// Full pulls from real WebDAV servers (Debian's rclone, Apache mod_dav, nginx dav-ext), through the counting
/// proxy of files_fake.py so GETs can be counted.
@Suite(.serialized) struct RealServerTests {
    @Test(arguments: ["rclone", "apache", "nginx"])
    func fullPullOfHostileNamesIsByteIdenticalAndSecondPullFetchesNothing(server: String) throws {
        var sizes = Library.hostileNames.enumerated().map { ($0.element, 1000 + $0.offset * 37_000) }
        sizes.append(("Кино/Группа крови/cover notes.txt", 100))  // not audio: listed by the server, never fetched
        let root = try temporaryDirectory("real-\(server)")
        defer { try? FileManager.default.removeItem(at: root) }
        var library = try Library.make(in: root, seed: 7, files: sizes)
        // An old library, as real ones are: Apache gives a file modified within the last second a weak ETag
        // (W/"…") and a strong one later, which changes the fingerprint and refetches it once.
        for path in library.files.keys {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -7200)],
                                                  ofItemAtPath: root.appendingPathComponent(path).path)
        }

        // Output to files, not pipes: the server started in the background may inherit a pipe and keep it open.
        let started = Process()
        started.executableURL = try Paths.program("bash", package: "bash")
        started.arguments = [Paths.startWebDAV.path, server, root.path]
        let outFile = root.deletingLastPathComponent().appendingPathComponent(root.lastPathComponent + ".out")
        let errFile = root.deletingLastPathComponent().appendingPathComponent(root.lastPathComponent + ".err")
        defer { try? FileManager.default.removeItem(at: outFile); try? FileManager.default.removeItem(at: errFile) }
        _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
        started.standardOutput = try FileHandle(forWritingTo: outFile)
        started.standardError = try FileHandle(forWritingTo: errFile)
        started.standardInput = FileHandle.nullDevice
        try started.run()
        // The script prints "PORT PID STATEDIR" and exits; its exit is not always observed by Foundation's
        // Process on Linux once it has left a server behind, so wait for the line (or an error) instead.
        var line = ""
        let found = eventuallyBlocking(30) {
            line = (try? String(contentsOf: outFile, encoding: .utf8)) ?? ""
            let errors = (try? String(contentsOf: errFile, encoding: .utf8)) ?? ""
            return line.hasSuffix("\n") || !errors.isEmpty
        }
        let errors = (try? String(contentsOf: errFile, encoding: .utf8)) ?? ""
        try #require(found && line.hasSuffix("\n"), "start-webdav.sh \(server) did not start: \(errors)")
        let fields = line.split(separator: " ").map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) }
        let port = try #require(fields.first.flatMap { Int($0) }), pid = try #require(fields.dropFirst().first.flatMap { Int32($0) })
        defer {
            // The server leads its own session (setsid): stop its whole group. Apache may ignore SIGTERM
            // here, so SIGKILL follows when the group is still there after 3 s.
            kill(-pid, SIGTERM)
            if !eventuallyBlocking(3, { kill(-pid, 0) != 0 }) { kill(-pid, SIGKILL) }
            if fields.count > 2 { try? FileManager.default.removeItem(atPath: fields[2]) }
        }

        let proxy = try FakeServer(arguments: ["--proxy-to", "http://127.0.0.1:\(port)"])
        defer { proxy.stop() }
        let env = try Env(url: proxy.url)
        defer { env.cleanup() }

        let first = try env.run(["pull", "--json"])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        library.files["Кино/Группа крови/cover notes.txt"] = nil
        try env.expectTracksEqual(library)
        let gets = try proxy.log()
        #expect(Set(gets.map(\.path)).count == library.files.count, "GETs: \(gets.map(\.path))")
        #expect(!gets.contains { $0.path.hasSuffix(".txt") })

        try proxy.reset()
        let second = try env.run(["pull", "--json"])
        #expect(second.status == 0, "stderr: \(second.stderr)")
        let refetched = try proxy.log().map(\.path)
        #expect(try proxy.stats()["get"] == 0, "the second pull fetched again: \(refetched)")
        #expect(try proxy.stats()["propfind"] ?? 0 > 0)
        try env.expectTracksEqual(library)
    }
}

import Foundation
import TestSupport
import Testing

/// A server that lists sizes no file has (#19.2): 9223372036854775807 and a petabyte. Nothing traps — not the
/// listing, not the plan, not `ls --offline` afterwards, not `cache status` — and each such file fails alone
/// (exit 1, named), while its neighbours are fetched.
@Suite struct HostileSizeTests {
    @Test func absurdSizesFailTheirFileOnly() async throws {
        let fake = try await PythonFake.start("webdav_fake.py", arguments: [
            "--lie-size", "a b.mp3=9223372036854775807", "--lie-size", "Sub/Кино.mp3=1125899906842624000",
        ])
        defer { fake.stop() }
        let env = try Env(url: fake.baseURL().appendingPathComponent("dav/").absoluteString)
        defer { env.cleanup() }
        let ls = try env.run(["ls"])
        #expect(ls.status == 0, "stderr: \(ls.stderr)")
        #expect(ls.stdout.contains("a b.mp3"), "stdout: \(ls.stdout)")
        let pull = try env.run(["pull"])
        #expect(pull.status == 1, "stderr: \(pull.stderr)")
        #expect(pull.stderr.contains("a b.mp3") && pull.stderr.contains("Кино.mp3"), "stderr: \(pull.stderr)")
        for path in ["Sub/c+d&e [1].flac", "Sub/it's.ogg", "Sub/Deeper/東京 🎵.opus"] {
            #expect(FileManager.default.fileExists(atPath: env.tracks.appendingPathComponent(path).path), "\(path) was not fetched")
        }
        for command in [["ls", "--offline"], ["ls", "--offline", "--json"], ["cache", "status"], ["cache", "status", "--json"],
                        ["pull", "--dry-run"]] {
            let r = try env.run(command)
            #expect(r.status == 0 || (command.first == "pull" && r.status == 1), "\(command): \(r.status) \(r.stderr)")
            #expect(r.status < 128, "\(command) was killed by a signal")
        }
    }
}

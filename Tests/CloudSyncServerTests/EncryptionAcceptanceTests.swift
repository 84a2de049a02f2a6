#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// The acceptance of issue #26 (encryption at rest) with the built binary, ffmpeg-made tracks of every format
/// (covers, tags, `moov` at the end) in a WebDAV cloud (files_fake.py): after a head-first pull, a kill -9 in a
/// pull and its resume, a full pull and on-demand fills by serve, no 4 KiB window of any source is in any file
/// under cache.dir; serve returns the sources' bytes for ranges inside and across blocks, ffprobe reads through
/// it; a flipped bit is reported by `cache verify`, never served, and fetched again; keys and modes that do not
/// fit are refused with their exit codes.
@Suite(.serialized) struct EncryptionAcceptanceTests {
    @Test func anEncryptedCacheHoldsNoPlaintextAndServesTheSources() async throws {
        let fixtures = try AudioFixtures.shared()
        let dir = try TemporaryDirectory(prefix: "cloudsync-encrypt")
        let library = dir.file("library")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        var sources: [String: Data] = [:]
        for name in AudioFixtures.all {
            try FileManager.default.copyItem(at: fixtures.url(name), to: library.appendingPathComponent(name))
            sources[name] = try Data(contentsOf: fixtures.url(name))
        }
        let names = sources.keys.sorted()
        let scan = PlaintextWindows(sources: names.map { sources[$0]! })
        func expectNoPlaintext(_ env: BinaryEnv, _ moment: String) throws {
            let leaks = try scan.leaks(under: env.cacheDir)
            #expect(leaks.isEmpty, "\(moment): plaintext of a source in \(leaks.prefix(3))")
        }

        // 1. A head-first pull whose rest is refused: partial files holding start sets.
        let (headFake, env) = try await BinaryEnv.headOnly(root: library, head: 300 << 10, extra: "encrypt = true")
        headFake.stop()
        let keyFile = env.directory.file("state/cloudsync/cache.key")
        var st = stat()
        #expect(stat(keyFile.path, &st) == 0 && st.st_mode & 0o777 == 0o600, "cache.key is made 0600")
        #expect(stat(keyFile.deletingLastPathComponent().path, &st) == 0 && st.st_mode & 0o777 == 0o700)
        try expectNoPlaintext(env, "after a head-first pull")
        let heads = try InstantStartAcceptanceTests.listing(env)
        #expect(heads.allSatisfy { ($0["cached_bytes"] as? NSNumber)?.intValue ?? 0 > 0 }, "every track has bytes")

        // 1b. serve on those partly cached tracks: ranges inside the heads, across their ends (filled on demand,
        // sealed), and at the tails.
        let cloud = try await FilesFake(root: library)
        let partly = try BinaryEnv(davURL: cloud.davURL, extra: "encrypt = true", reusing: env)
        do {
            let (serve, port) = try await partly.serve()
            defer { serve.stop() }
            for name in ["mp3-cover.mp3", "m4a-end.m4a", "wav.wav", "opus.opus"] {
                let source = sources[name]!
                let n = source.count
                for (lo, hi) in [(1000, 70_000), (300_000, 340_000), (n - 70_000, n - 1), (0, n - 1)] where lo >= 0 && hi < n && lo <= hi {
                    let part = try await offPool { try RawClient(port: port).get("/tracks/lib/\(name)", headers: ["Range: bytes=\(lo)-\(hi)"]) }
                    #expect(part.status == 206 && part.body == source[lo ... hi], "partly cached \(name) bytes \(lo)-\(hi): \(part.status)")
                }
            }
        }
        cloud.stop()
        try expectNoPlaintext(env, "after serve filled partly cached tracks")

        // 2. A throttled pull killed with SIGKILL in the middle, then resumed to the end.
        let slow = try await FilesFake(root: library, rate: 1 << 20)
        defer { slow.stop() }
        let killed = try BinaryEnv(davURL: slow.davURL, extra: "encrypt = true", reusing: env)
        let child = try ChildProcess(try BinaryEnv.binary(), ["-q", "pull", "--remote", "lib", "--config", killed.config.path],
                                     environment: killed.environment)
        try await Task.sleep(for: .milliseconds(1500))
        kill(child.process.processIdentifier, SIGKILL)
        child.process.waitUntilExit()
        try expectNoPlaintext(killed, "after kill -9 in a pull")
        // The resume and what follows need no throttle (at 1 MiB/s the rest of the library took ~40 s).
        slow.stop()
        let fast = try await FilesFake(root: library)
        defer { fast.stop() }
        let resumedEnv = try BinaryEnv(davURL: fast.davURL, extra: "encrypt = true", reusing: killed)
        let resumed = try resumedEnv.run(["pull", "--remote", "lib"], timeout: 300)
        #expect(resumed.status == 0, "\(resumed.stderr)")
        try expectNoPlaintext(resumedEnv, "after the resumed pull")
        let rows = try InstantStartAcceptanceTests.listing(resumedEnv)
        #expect(rows.count == names.count && rows.allSatisfy { $0["state"] as? String == "cached" }, "\(rows.map { $0["state"] ?? "?" })")
        #expect(rows.allSatisfy { $0["local_path"] is NSNull && $0["encrypted"] as? Bool == true }, "ls shows no local path")
        let table = try resumedEnv.run(["ls", "--offline", "--remote", "lib"])
        #expect(table.stderr.contains("cloudsync serve"), "ls says why there is no local path: \(table.stderr)")

        // 3. serve: cached tracks, tracks dropped from the cache (filled on demand), ranges in and across blocks.
        let dropped = ["m4a-end.m4a", "mp3-cover.mp3", "flac-cover.flac"].filter { sources[$0] != nil }
        #expect(!dropped.isEmpty)
        let rm = try resumedEnv.run(["cache", "rm", "--remote", "lib"] + dropped)
        #expect(rm.status == 0, "\(rm.stderr)")
        let (serve, port) = try await resumedEnv.serve()
        defer { serve.stop() }
        for name in names {
            let source = sources[name]!
            let n = source.count
            let whole = try await offPool { try RawClient(port: port).get("/tracks/lib/\(name)") }
            #expect(whole.status == 200 && whole.body == source, "\(name): GET whole \(whole.status), \(whole.body.count) bytes")
            for (lo, hi) in [(0, 0), (100, 65_535), (65_530, 65_541), (65_536, 131_071), (n / 2 - 70_000, n / 2 + 70_000), (n - 5, n - 1)]
            where lo >= 0 && hi < n && lo <= hi {
                let part = try await offPool { try RawClient(port: port).get("/tracks/lib/\(name)", headers: ["Range: bytes=\(lo)-\(hi)"]) }
                #expect(part.status == 206 && part.body == source[lo ... hi], "\(name) bytes \(lo)-\(hi): \(part.status)")
            }
        }
        let probe = try await offPool {
            try Tool.run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0",
                                     "http://127.0.0.1:\(port)/tracks/lib/m4a-end.m4a"])
        }
        #expect(probe.status == 0 && Double(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) != nil,
                "ffprobe through serve: \(probe.stderr)")
        serve.stop()
        try expectNoPlaintext(resumedEnv, "after on-demand fills by serve")

        // 4. A flipped bit: verify reports it and drops the block; serve never sends it; the next pull repairs it.
        let victim = "wav.wav"
        let track = resumedEnv.cacheDir.appendingPathComponent("tracks/lib/\(victim)")
        var sealed = try Data(contentsOf: track)
        sealed[32 + 65_552 + 1000] ^= 0x10
        try sealed.write(to: track)
        let verify = try resumedEnv.run(["cache", "verify"])
        #expect(verify.status == 1 && verify.stdout.contains("damaged") && verify.stdout.contains(victim), "\(verify.stdout)")
        sealed = try Data(contentsOf: resumedEnv.cacheDir.appendingPathComponent("tracks/lib/flac-cover.flac"))
        sealed[40] ^= 0x01
        try sealed.write(to: resumedEnv.cacheDir.appendingPathComponent("tracks/lib/flac-cover.flac"))
        // 4a. Online, the request that meets damaged blocks mends them: the first, a middle and the last block of
        // a complete track fail their check as serve reads them, are dropped, fetched again and sent; the client
        // gets the source's bytes (not an error), and the track is complete and clean again.
        let mended = "aiff.aiff"
        let mendedTrack = resumedEnv.cacheDir.appendingPathComponent("tracks/lib/\(mended)")
        sealed = try Data(contentsOf: mendedTrack)
        #expect(sealed.count > 4 * 65_552, "\(mended) spans several blocks")
        for at in [32 + 100, 32 + 2 * 65_552 + 7, sealed.count - 20] { sealed[at] ^= 0x04 }
        try sealed.write(to: mendedTrack)
        // A flipped bit in a header's salt: every block fails (another key), and is mended the same way.
        let salted = "opus.opus"
        let saltedTrack = resumedEnv.cacheDir.appendingPathComponent("tracks/lib/\(salted)")
        var saltedBytes = try Data(contentsOf: saltedTrack)
        #expect(saltedBytes.count > 3 * 65_552, "\(salted) spans several blocks")
        saltedBytes[20] ^= 0x01
        try saltedBytes.write(to: saltedTrack)
        do {
            let (online, onlinePort) = try await resumedEnv.serve()
            defer { online.stop() }
            let got = try await offPool { try RawClient(port: onlinePort).get("/tracks/lib/\(mended)") }
            #expect(got.status == 200 && got.body == sources[mended]!, "\(mended) with damaged blocks: \(got.status), \(got.body.count) bytes")
            let resalted = try await offPool { try RawClient(port: onlinePort).get("/tracks/lib/\(salted)") }
            #expect(resalted.status == 200 && resalted.body == sources[salted]!, "\(salted) with a damaged salt: \(resalted.status), \(resalted.body.count) bytes")
            // Promoted by serve's session in its next group commit, a moment after the last byte.
            var mendedState: String?
            for _ in 0 ..< 100 {
                mendedState = try InstantStartAcceptanceTests.listing(resumedEnv).first { $0["path"] as? String == mended }?["state"] as? String
                if mendedState == "cached" { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(mendedState == "cached", "\(mended) is complete again: \(mendedState ?? "?")")
            online.stop()
        }
        let afterMend = try resumedEnv.run(["cache", "verify"])
        #expect(!afterMend.stdout.contains(mended), "\(mended) is clean again: \(afterMend.stdout)")

        fast.stop()  // offline: a damaged block must not be sent, and cannot be fetched
        let (offline, offlinePort) = try await resumedEnv.serve()
        defer { offline.stop() }
        let bad = try await offPool { try RawClient(port: offlinePort).get("/tracks/lib/flac-cover.flac", headers: ["Range: bytes=0-99"]) }
        #expect(bad.status != 206 || bad.body == sources["flac-cover.flac"]![0 ..< 100], "a damaged block was served")
        offline.stop()
        let repairFake = try await FilesFake(root: library)
        defer { repairFake.stop() }
        let repair = try BinaryEnv(davURL: repairFake.davURL, extra: "encrypt = true", reusing: resumedEnv)
        let again = try repair.run(["pull", "--remote", "lib"])
        #expect(again.status == 0, "\(again.stderr)")
        let clean = try repair.run(["cache", "verify"])
        #expect(clean.status == 0, "\(clean.stdout)")
        try expectNoPlaintext(repair, "after the repair")
        let (last, lastPort) = try await repair.serve()
        defer { last.stop() }
        for name in [victim, "flac-cover.flac"] {
            let whole = try await offPool { try RawClient(port: lastPort).get("/tracks/lib/\(name)") }
            #expect(whole.body == sources[name]!, "\(name) after the repair")
        }
    }

    /// Keys and modes that do not fit the cache are refused, each with its exit code and what to do.
    @Test func missingWrongAndMismatchedKeysAreClearErrors() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-encrypt-keys")
        let library = dir.file("library")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        try Data((0 ..< 200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: library.appendingPathComponent("a.mp3"))
        let fake = try await FilesFake(root: library)
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL, extra: "encrypt = true")
        #expect(try env.run(["pull", "--remote", "lib"]).status == 0)
        let keyFile = env.directory.file("state/cloudsync/cache.key")
        let key = try String(contentsOf: keyFile, encoding: .utf8)

        // cache.encrypt = false on an encrypted cache: exit 3, names `cache decrypt`.
        let plain = try BinaryEnv(davURL: fake.davURL, reusing: env)
        let mismatch = try plain.run(["ls", "--offline"])
        #expect(mismatch.status == 3 && mismatch.stderr.contains("cloudsync cache decrypt"), "\(mismatch.status): \(mismatch.stderr)")
        // A readable-by-others key file: exit 3.
        chmod(keyFile.path, 0o644)
        let open = try env.run(["ls", "--offline"])
        #expect(open.status == 3 && open.stderr.contains("chmod 600"), "\(open.stderr)")
        chmod(keyFile.path, 0o600)
        // The key file gone: exit 3, no new key made over the old cache.
        try FileManager.default.removeItem(at: keyFile)
        let missing = try env.run(["ls", "--offline"])
        #expect(missing.status == 3 && missing.stderr.contains("missing"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: keyFile.path))
        // Another key: exit 4.
        try (String(repeating: "ab", count: 32) + "\n").write(to: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile.path, 0o600)
        let wrong = try env.run(["ls", "--offline"])
        #expect(wrong.status == 4 && wrong.stderr.contains("not the key"), "\(wrong.status): \(wrong.stderr)")
        // cache.key_command: its first line is the key; garbage or a failure is exit 3, and the key never prints.
        let commanded = try BinaryEnv(davURL: fake.davURL, extra: "encrypt = true\nkey_command = \"printf '%s\\\\nrest' \(key.trimmingCharacters(in: .whitespacesAndNewlines))\"", reusing: env)
        let good = try commanded.run(["ls", "--offline"])
        #expect(good.status == 0, "\(good.stderr)")
        let garbage = try BinaryEnv(davURL: fake.davURL, extra: "encrypt = true\nkey_command = \"echo hunter2\"", reusing: env)
        let bad = try garbage.run(["ls", "--offline"])
        #expect(bad.status == 3 && bad.stderr.contains("openssl rand -hex 32") && !bad.stderr.contains("hunter2"), "\(bad.stderr)")
        let failing = try BinaryEnv(davURL: fake.davURL, extra: "encrypt = true\nkey_command = \"echo nope >&2; exit 7\"", reusing: env)
        let failed = try failing.run(["ls", "--offline"])
        #expect(failed.status == 3 && failed.stderr.contains("status 7"), "\(failed.stderr)")

        // Decrypt in place, then the plaintext cache works with cache.encrypt = false, and encrypt goes back.
        let decrypt = try commanded.run(["cache", "decrypt"])
        #expect(decrypt.status == 0 && decrypt.stderr.contains("cache.encrypt = false"), "\(decrypt.stdout)\(decrypt.stderr)")
        let track = env.cacheDir.appendingPathComponent("tracks/lib/a.mp3")
        #expect(try Data(contentsOf: track) == Data(contentsOf: library.appendingPathComponent("a.mp3")))
        #expect(try plain.run(["ls", "--offline"]).status == 0)
        let refused = try commanded.run(["pull", "--remote", "lib"])
        #expect(refused.status == 3 && refused.stderr.contains("cloudsync cache encrypt"), "\(refused.stderr)")
        let encrypt = try commanded.run(["cache", "encrypt"])
        #expect(encrypt.status == 0, "\(encrypt.stderr)")
        #expect(try PlaintextWindows(sources: [Data(contentsOf: library.appendingPathComponent("a.mp3"))]).leaks(under: env.cacheDir).isEmpty)
    }
}

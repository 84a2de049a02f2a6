#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// Players and tools that keep a library browse serve's WebDAV face: a real mpd (Debian package) and rclone.
@Suite(.serialized) struct LibraryClientTests {
    /// Runs `program` (on PATH) to its end; fails the test after `timeout` seconds. Returns status and stdout.
    static func run(_ program: String, _ arguments: [String], environment: [String: String]? = nil,
                    timeout: TimeInterval = 120) throws -> (Int32, String) {
        guard let path = which(program) else {
            throw TestSupportError("\(program) is not installed; scripts/install-deps.sh installs it (Debian package \(program))")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.standardError
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            throw TestSupportError("\(program) \(arguments.prefix(2)) did not finish within \(Int(timeout)) s")
        }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// Tracks made with ffmpeg: an MP3 (ID3v2 + Xing header), a FLAC and an Ogg Vorbis file, 3 minutes of pink
    /// noise each at the sizes music has (MP3 320 kbit/s: 7 MB, FLAC: 19 MB, Vorbis q8: 4 MB). A player's input
    /// buffer (mpd's curl input keeps up to 512 KiB) and the kernel's socket buffers must be small beside a
    /// track, as they are for music: a sine would shrink to a few hundred KB, less than what they absorb.
    static func makeLibrary(in root: URL) throws -> [String: Data] {
        let noise = { (seed: Int) in "anoisesrc=duration=180:color=pink:amplitude=0.2:seed=\(seed)" }
        let tracks: [(String, String, [String])] = [
            ("Artist/Album One/01 Tone [A].mp3", noise(5), ["-c:a", "libmp3lame", "-b:a", "320k", "-write_xing", "1"]),
            ("Artist/Album One/02 Ёлка & 東京.flac", noise(6), ["-c:a", "flac"]),
            ("Другой/Альбом/03 emoji 🎵.ogg", noise(17), ["-c:a", "libvorbis", "-q:a", "8"]),
        ]
        var contents: [String: Data] = [:]
        for (i, (path, source, codec)) in tracks.enumerated() {
            let url = root.appendingPathComponent(path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            let (status, _) = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", source,
                                                 "-ac", "2", "-ar", "44100"] + codec
                                                 + ["-metadata", "title=Track \(i + 1)", "-metadata", "artist=Tester", url.path])
            guard status == 0 else { throw TestSupportError("ffmpeg could not make \(path)") }
            contents[path] = try Data(contentsOf: url)
        }
        return contents
    }

    /// mpd's library is serve's WebDAV face over a cache holding only the first 128 KiB of each track: the scan
    /// lists every track with its duration without downloading tracks, and `mpc play` plays.
    /// The same with an encrypted cache (`cache.encrypt`, #26): mpd has no other way to read it.
    /// The cloud sends 1 MiB/s per answer (a DSL line). mpd's input thread reads on while its scanner parses (and
    /// before it seeks to an Ogg file's end), and serve fetches what the connection takes (mpd's buffer and both
    /// sockets' buffers), so what a scan costs is the cloud's rate times how long mpd holds a track open: on a
    /// machine loaded to 4 runnable threads per core, 0.2–0.6 s for the Ogg file. At loopback speed that is
    /// the whole track; at this rate mpd would have to hold it for 1.8 s to take half of it.
    @Test(.serialized, arguments: [false, true]) func mpdScansAHeadOnlyLibraryAndPlays(encrypted: Bool) async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-mpd")
        let contents = try Self.makeLibrary(in: dir.file("library"))
        let head = 128 << 10
        let (fake, env) = try await BinaryEnv.headOnly(root: dir.file("library"), head: head, rate: 1 << 20,
                                                           extra: encrypted ? "encrypt = true" : "")
        defer { fake.stop() }
        try fake.setFaults("[]")
        try fake.reset()
        let (serve, port) = try await env.serve()
        defer { serve.stop() }

        let (mpd, mpc) = try Self.startMPD(musicDirectory: "http://127.0.0.1:\(port)/dav/lib/", in: dir)
        defer { mpd.stop() }

        let (updated, _) = try await offPool { try mpc(["--wait", "update"]) }
        #expect(updated == 0)
        let (_, listing) = try await offPool { try mpc(["-f", "%file%\t%time%", "listall"]) }
        var durations: [String: String] = [:]
        for line in listing.split(separator: "\n") {
            let parts = line.split(separator: "\t", omittingEmptySubsequences: false)
            if parts.count == 2 { durations[String(parts[0])] = String(parts[1]) }
        }
        #expect(Set(durations.keys) == Set(contents.keys), "mpd listed \(listing)")
        // mpd 0.23 reports no duration for Ogg Vorbis over WebDAV (the same against `rclone serve webdav`).
        for (path, time) in durations where !path.hasSuffix(".ogg") {
            #expect(time == "3:00", "\(path): duration \(time) in \(durations)")
        }
        let scan = try fake.log()
        var scanned: [String: Int64] = [:]
        for get in scan { scanned[get.path, default: 0] += get.bytes }
        for (path, data) in contents {
            let bytes = scanned["/dav/" + path] ?? 0
            #expect(bytes < Int64(max(1, data.count - head)) / 2, "the scan downloaded \(bytes) bytes of \(path) (\(data.count) bytes)")
        }
        let summary = contents.keys.sorted().map { "\($0.split(separator: "/").last ?? ""): \(scanned["/dav/" + $0] ?? 0) of \(contents[$0]?.count ?? 0) B" }
        print("mpd: update over \(contents.count) head-only tracks (\(head >> 10) KiB each) fetched from the cloud: \(summary.joined(separator: ", "))")

        // Play the MP3: mpd reads it through serve, past its start set.
        let mp3 = "Artist/Album One/01 Tone [A].mp3"
        #expect(try mpc(["add", mp3]).0 == 0)
        #expect(try mpc(["play"]).0 == 0)
        var playing = false
        for _ in 0 ..< 200 where !playing {
            playing = (try? mpc(["status"]).1)?.contains("[playing]") == true
            if !playing { usleep(50_000) }
        }
        #expect(playing, "mpc status: \((try? mpc(["status"]).1) ?? "")")
        let played = try await eventually(20) { try fake.log().contains { $0.path == "/dav/" + mp3 && $0.bytes > 0 } }
        #expect(played, "playing fetched nothing past the start set from the cloud")
        _ = try? mpc(["stop"])
    }

    /// rclone lists the face with the right sizes and copies a folder byte for byte.
    @Test func rcloneListsAndCopies() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-rclone")
        var contents: [String: Data] = [:]
        var random = SeededRandom(seed: 22)
        for (path, size) in [("Album/01 one.flac", 700_000), ("Album/02 two #2.flac", 300_000), ("Album/Disc [2]/03 three 50%.mp3", 200_000),
                             ("Other/Ёж/04 четыре.ogg", 100_000), ("05 top 東京 🎧.mp3", 5_000)] {
            let url = dir.file("library/\(path)")
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            contents[path] = random.bytes(size)
            try contents[path]?.write(to: url)
        }
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let env = try BinaryEnv(davURL: fake.davURL)
        #expect(try env.run(["ls", "--remote", "lib"]).status == 0)
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let rcloneEnv = ["PATH": "/usr/bin:/bin", "HOME": dir.path, "RCLONE_CONFIG": "/dev/null"]
        let url = "http://127.0.0.1:\(port)/dav/"

        let (listed, json) = try await offPool {
            try Self.run("rclone", ["lsjson", "-R", "--files-only", "--webdav-url", url, ":webdav:lib"], environment: rcloneEnv)
        }
        #expect(listed == 0)
        let rows = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]] ?? []
        var sizes: [String: Int] = [:]
        for row in rows { sizes[row["Path"] as? String ?? ""] = (row["Size"] as? NSNumber)?.intValue }
        #expect(sizes == contents.mapValues(\.count), "rclone saw \(sizes)")

        let (copied, _) = try await offPool {
            try Self.run("rclone", ["copy", "--webdav-url", url, ":webdav:lib/Album", dir.file("copy").path], environment: rcloneEnv)
        }
        #expect(copied == 0)
        for (path, data) in contents where path.hasPrefix("Album/") {
            let local = try? Data(contentsOf: dir.file("copy/" + String(path.dropFirst("Album/".count))))
            #expect(local == data, "\(path) differs after rclone copy")
        }
    }

    /// An mpd (null output) whose library is `musicDirectory`, its state in `dir/mpd`, and an `mpc` for it; waits
    /// until it answers.
    /// `realTime`: false makes the null output take audio as fast as mpd decodes it (a track plays in a moment).
    static func startMPD(musicDirectory: String, in dir: TemporaryDirectory, realTime: Bool = true) throws
        -> (ChildProcess, @Sendable ([String]) throws -> (Int32, String)) {
        guard which("mpd") != nil, which("mpc") != nil else {
            throw TestSupportError("mpd and mpc are not installed; scripts/install-deps.sh installs them (Debian packages mpd, mpc)")
        }
        let mpdPort = try freePort()
        try FileManager.default.createDirectory(at: dir.file("mpd/cache"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: dir.file("mpd/playlists"), withIntermediateDirectories: true)
        let config = """
            music_directory "\(musicDirectory)"
            database {
                plugin "simple"
                path "\(dir.file("mpd/db").path)"
                cache_directory "\(dir.file("mpd/cache").path)"
            }
            playlist_directory "\(dir.file("mpd/playlists").path)"
            pid_file "\(dir.file("mpd/pid").path)"
            bind_to_address "127.0.0.1"
            port "\(mpdPort)"
            auto_update "no"
            zeroconf_enabled "no"
            audio_output {
                type "null"
                name "null"
                sync "\(realTime ? "yes" : "no")"
            }

            """
        try config.write(to: dir.file("mpd/mpd.conf"), atomically: true, encoding: .utf8)
        let mpd = try ChildProcess("mpd", ["--no-daemon", "--stderr", dir.file("mpd/mpd.conf").path])
        let mpc = { @Sendable (arguments: [String]) throws -> (Int32, String) in
            try run("mpc", ["-h", "127.0.0.1", "-p", String(mpdPort)] + arguments, timeout: 120)
        }
        var ready = false
        for _ in 0 ..< 200 where !ready {
            ready = (try? mpc(["status"]).0) == 0
            if !ready { usleep(50_000) }
        }
        guard ready else {
            mpd.stop()
            throw TestSupportError("mpd did not start")
        }
        return (mpd, mpc)
    }

    /// With the cloud unreachable, mpd scans serve's WebDAV face over a cache holding heads shortened to fit the
    /// budget: its input reads ahead past a short head while its scanner needs only the start, so a response cut
    /// at the first missing byte made each track fail and be retried by every decoder (minutes a track); serve
    /// now lets the scanner close first. Every track is listed with its title, and the MP3 and FLAC with their
    /// durations.
    @Test func mpdScansShortHeadsOffline() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-mpd-offline")
        let contents = try Self.makeLibrary(in: dir.file("library"))
        let fake = try await FilesFake(root: dir.file("library"))
        defer { fake.stop() }
        let scratch = try BinaryEnv(davURL: fake.davURL)
        #expect(try scratch.run(["pull", "--remote", "lib"]).status == 0)
        let full = try InstantStartAcceptanceTests.headBytes(scratch)
        let env = try BinaryEnv(davURL: fake.davURL, extra: "max_size = \"\(full * 2 / 5)B\"\nmin_free = \"0B\"")
        let pulled = try env.run(["pull", "--remote", "lib"])
        #expect(pulled.status == 0 && pulled.stderr.contains("heads shortened to "), "\(pulled.stderr)")
        let heads = try InstantStartAcceptanceTests.listing(env)
        #expect(heads.count == contents.count && heads.allSatisfy { $0["state"] as? String == "head" && (($0["head_bytes"] as? NSNumber)?.intValue ?? 0) < 512 << 10 },
                "\(heads.map { "\($0["path"] ?? "?") \($0["state"] ?? "?") \($0["head_bytes"] ?? "?")" })")
        fake.stop()
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let (mpd, mpc) = try Self.startMPD(musicDirectory: "http://127.0.0.1:\(port)/dav/lib/", in: dir)
        defer { mpd.stop() }

        let ((updated, _), seconds) = try await offPool { try timed { try mpc(["--wait", "update"]) } }
        #expect(updated == 0)
        let (_, listing) = try await offPool { try mpc(["-f", "%file%\t%time%\t%title%", "listall"]) }
        var found: [String: (time: String, title: String)] = [:]
        for line in listing.split(separator: "\n") {
            let parts = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            if parts.count == 3 { found[parts[0]] = (parts[1], parts[2]) }
        }
        #expect(Set(found.keys) == Set(contents.keys), "mpd listed \(listing)")
        for (path, facts) in found {
            #expect(facts.title.hasPrefix("Track "), "\(path): title '\(facts.title)'")
            if !path.hasSuffix(".ogg") { #expect(facts.time == "3:00", "\(path): duration \(facts.time)") }
        }
        print("mpd: offline update over \(contents.count) tracks with shortened heads took \(String(format: "%.2f", seconds)) s")
    }

    /// A 40 s 256 kbit/s MP3 `0<index>.mp3` with a sine of `frequency` in `library` (ffmpeg).
    static func encodeSine(_ index: Int, frequency: Int, in library: URL) throws {
        let (status, _) = try run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=\(frequency):duration=40",
                                             "-ac", "2", "-c:a", "libmp3lame", "-b:a", "256k", "-metadata", "title=Track \(index)",
                                             library.appendingPathComponent("0\(index).mp3").path])
        guard status == 0 else { throw TestSupportError("ffmpeg could not make track \(index)") }
    }

    /// Two such tracks (Artist/01.mp3, 02.mp3) in a cloud, a cache holding only their heads (a budget with room
    /// for the two heads, 640 KiB each at the defaults, not for a whole track), the cloud stopped, `serve` on the
    /// cache and mpd (a null output that does not keep time: a head plays at once) on its `/dav/`, both queued.
    final class OfflineMPD: @unchecked Sendable {
        let dir: TemporaryDirectory
        let library: URL
        let env: BinaryEnv
        let cloudPort: Int
        let port: Int
        let mpc: @Sendable ([String]) throws -> (Int32, String)
        private let serve: ChildProcess
        private let mpd: ChildProcess

        init(prefix: String) async throws {
            dir = try TemporaryDirectory(prefix: prefix)
            library = dir.file("library/Artist")
            try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
            try LibraryClientTests.encodeSine(1, frequency: 400, in: library)
            try LibraryClientTests.encodeSine(2, frequency: 500, in: library)
            let fake = try await FilesFake(root: dir.file("library"))
            defer { fake.stop() }
            env = try BinaryEnv(davURL: fake.davURL, extra: "max_size = \"1536KiB\"\nmin_free = \"0B\"")
            let pulled = try env.run(["pull", "--remote", "lib"])
            let states = try InstantStartAcceptanceTests.listing(env).map { $0["state"] as? String ?? "?" }
            guard pulled.status == 0, states == ["head", "head"] else {
                throw TestSupportError("the pull should keep two heads: exit \(pulled.status), \(states): \(pulled.stderr)")
            }
            cloudPort = fake.port
            fake.stop()
            (serve, port) = try await env.serve()
            do {
                (mpd, mpc) = try LibraryClientTests.startMPD(musicDirectory: "http://127.0.0.1:\(port)/dav/lib/", in: dir, realTime: false)
            } catch {
                serve.stop()
                throw error
            }
            let mpc = self.mpc
            guard try await offPool({ try mpc(["--wait", "update"]).0 == 0 && mpc(["add", "Artist"]).0 == 0 }) else {
                stop()
                throw TestSupportError("mpc could not update and queue the library")
            }
        }

        func stop() {
            mpd.stop()
            serve.stop()
        }

        /// Polls `mpc -f %file% status` (e.g. "Artist/01.mp3 [playing] #1/2   0:16/0:40 (40%)") every 0.2 s until
        /// `done` holds, up to `seconds`; the last reading. Throws when mpc fails (mpd does not answer).
        func status(within seconds: Double = 0, until done: @escaping @Sendable (String) -> Bool = { _ in true }) async throws -> String {
            let mpc = self.mpc
            return try await offPool {
                let deadline = Date().addingTimeInterval(seconds)
                var last = ""
                repeat {
                    let (status, out) = try mpc(["-f", "%file%", "status"])
                    guard status == 0 else { throw TestSupportError("mpc status exited \(status): \(out)") }
                    last = out.split(separator: "\n").prefix(2).joined(separator: " ")
                    if done(last) { break }
                    usleep(200_000)
                } while Date() < deadline
                return last
            }
        }
    }

    /// mpd plays a head-only track with the cloud unplugged: the head plays, and mpd (0.23.12 in Debian 12, which
    /// freezes at 100 % CPU on a response cut short: MPD issue #1727) still answers while it waits at the hole,
    /// and when the cloud comes back plays on past the head from where it stopped, then the next track whole.
    /// Fails with the cut: `mpc status` then times out. (No `mpc next` while it waits: that mpd can deadlock
    /// skipping a stream that stalls, 2 runs in ~6 with another mpd test beside it; docs/serve.md.)
    @Test func mpdPlaysAHeadOfflineAndGoesOnWhenTheCloudIsBack() async throws {
        let f = try await OfflineMPD(prefix: "cloudsync-mpd-comeback")
        defer { f.stop() }
        let mpc = f.mpc
        #expect(try await offPool { try mpc(["play"]).0 } == 0)
        // The head plays, then mpd waits at the hole; a cut would have frozen it here.
        let atHole = try await f.status(within: 20) { $0.contains("01.mp3 [playing] #1/2   0:1") }
        #expect(atHole.contains("01.mp3 [playing] #1/2   0:1"), "\(atHole)")
        try await Task.sleep(for: .seconds(3))
        let still = try await f.status()
        #expect(still.contains("01.mp3 [playing] #1/2   0:1"), "mpd after 3 s at the hole: \(still)")

        // The cloud comes back on its address: the body goes on from the hole, and mpd plays both tracks to their end.
        let fake = try await FilesFake(root: f.dir.file("library"), port: f.cloudPort)
        defer { fake.stop() }
        let ended = try await f.status(within: 90) { !$0.contains("[playing]") }
        #expect(!ended.contains("[playing]"), "mpd did not play on once the cloud was back: \(ended)")
        let served = Set(try fake.log().map(\.path))
        #expect(served == ["/dav/Artist/01.mp3", "/dav/Artist/02.mp3"], "serve fetched \(served) once the cloud was back")
        // Each track's bytes past its head came from the cloud (the budget, room for the heads only, then takes
        // them back: docs/serve.md "The budget").
        for row in try InstantStartAcceptanceTests.listing(f.env) {
            let path = row["path"] as? String ?? "?"
            let size = (row["size"] as? NSNumber)?.int64Value ?? 0, head = (row["head_bytes"] as? NSNumber)?.int64Value ?? 0
            let fetched = try fake.bytes(of: path)
            #expect(head > 0 && fetched + head >= size, "\(path): \(fetched) bytes fetched, head \(head) of \(size)")
            #expect(["head", "cached"].contains(row["state"] as? String ?? "?"), "\(row)")
        }
    }

    /// mpd waits at the end of a head with the cloud unplugged; the track is replaced in the cloud meanwhile
    /// (same size), and the cloud comes back: the bytes after the head are another version's, so the response
    /// never goes on with them (a splice), and since a cut would freeze this mpd it is held open: mpd still
    /// answers, at the head; a new request gets the new version whole. Fails with the cut (`mpc status` times
    /// out) and with the splice (mpd plays on into track 2).
    @Test func mpdAtAHeadWhoseTrackChangedInTheCloudIsHeldThere() async throws {
        let f = try await OfflineMPD(prefix: "cloudsync-mpd-changed")
        defer { f.stop() }
        let mpc = f.mpc
        #expect(try await offPool { try mpc(["play"]).0 } == 0)
        let atHole = try await f.status(within: 20) { $0.contains("01.mp3 [playing] #1/2   0:1") }
        #expect(atHole.contains("01.mp3 [playing] #1/2   0:1"), "\(atHole)")

        // Replaced in the cloud, which comes back: serve's probe finds it, the fetch meets the new version.
        try Self.encodeSine(1, frequency: 700, in: f.library)
        let replaced = try Data(contentsOf: f.library.appendingPathComponent("01.mp3"))
        let fake = try await FilesFake(root: f.dir.file("library"), port: f.cloudPort)
        defer { fake.stop() }
        // The next fetch of track 1 asks for the old version (If-Range) and is told of the new one.
        try await offPool { () throws -> Void in
            let changed = Date()
            while try fake.log().first(where: { $0.path == "/dav/Artist/01.mp3" }) == nil, Date().timeIntervalSince(changed) < 60 {
                usleep(200_000)
            }
        }
        try await Task.sleep(for: .seconds(2))
        let held = try await f.status()
        #expect(held.contains("01.mp3 [playing] #1/2   0:1"), "mpd went on past the head with another version's bytes: \(held)")
        // Another client asks again: the new version, whole.
        let again = try await offPool { try RawClient(port: f.port).get("/tracks/lib/Artist/01.mp3") }
        #expect(again.status == 200 && again.body == replaced, "\(again.status), \(again.body.count) bytes, the new version: \(again.body == replaced)")
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound else { throw TestSupportError("no free port") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import CloudSyncHTTP
import CloudSyncServer
import Foundation
import Testing
import TestSupport
import WebDAV

/// A real player against a real WebDAV server: ffprobe and ffmpeg read an uncached track through `serve`.
@Suite(.serialized) struct PlayerTests {
    /// Runs `program` to completion (bounded by `timeout`), returning its exit status and stdout.
    static func run(_ program: String, _ arguments: [String], timeout: TimeInterval = 60) throws -> (Int32, String) {
        guard let path = which(program) else {
            throw TestSupportError("\(program) is not installed; install the Debian package ffmpeg (scripts/install-deps.sh does)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            process.terminate()
            throw TestSupportError("\(program) did not finish within \(timeout) s")
        }
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test func ffprobeAndFfmpegPlayAnUncachedTrack() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-player")
        let library = dir.file("library/Album")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        // 24 s of stereo 44.1 kHz PCM: about 4 MiB.
        let (made, _) = try Self.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=24",
                                                "-ac", "2", "-ar", "44100", library.appendingPathComponent("tone.wav").path])
        #expect(made == 0)
        let source = try Data(contentsOf: library.appendingPathComponent("tone.wav"))

        let script = RepositoryPaths.root.appendingPathComponent("Tests/servers/start-webdav.sh").path
        let (_, line) = try await ChildProcess.startReadingFirstLine("bash", [script, "rclone", dir.file("library").path],
                                                                           timeout: 20)
        let fields = line.split(separator: " ")
        guard fields.count == 3, let port = Int(fields[0]), let pid = Int32(fields[1]) else {
            throw TestSupportError("start-webdav.sh printed '\(line)'")
        }
        defer {
            kill(pid, SIGTERM)
            try? FileManager.default.removeItem(atPath: String(fields[2]))
        }

        let cache = try Cache.open(root: dir.file("cache"))
        let transport = try CurlTransport()
        let pacer = Pacer()
        let provider = WebDAVProvider(options: WebDAVOptions(remoteName: "dav", url: URL(string: "http://127.0.0.1:\(port)/dav/")!,
                                                             user: "demo", password: "demo-pass"),
                                      transport: transport, pacer: pacer, audio: AudioFilter(), logger: .silent)
        let sync = Sync(remote: "dav", providerName: "webdav", provider: provider, transport: transport, pacer: pacer, cache: cache,
                        options: SyncOptions(), logger: .silent, events: { _ in })
        let listed = try await sync.refreshIndex()
        #expect(listed == ["Album/tone.wav"])
        #expect(try cache.entry(remote: "dav", path: "Album/tone.wav")?.state == .missing)

        let onDemand = OnDemand(remote: "dav", provider: provider, transport: transport, pacer: pacer, cache: cache)
        let server = TrackServer(cache: cache, sources: ["dav": onDemand], options: ServerOptions(port: 0))
        let serverPort = try server.start()
        defer { server.stop() }
        let url = "http://127.0.0.1:\(serverPort)/tracks/dav/Album/tone.wav"

        // The players block while they read; keep them off the cooperative pool, which serves the fetches.
        let (probed, output) = try await offPool { try Self.run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", url]) }
        #expect(probed == 0)
        #expect(Double(output.trimmingCharacters(in: .whitespacesAndNewlines)).map { abs($0 - 24) < 0.1 } == true, "ffprobe said '\(output)'")
        let (decoded, _) = try await offPool { try Self.run("ffmpeg", ["-v", "error", "-i", url, "-t", "2", "-f", "null", "-"]) }
        #expect(decoded == 0)

        // The cache now holds what was fetched, and those bytes are the source's.
        let entry = try #require(try cache.entry(remote: "dav", path: "Album/tone.wav"))
        #expect(entry.state != .missing)
        #expect(entry.presentBytes > 0)
        let reader = try cache.openReader(remote: "dav", path: "Album/tone.wav")
        let head = try reader.presentRanges().presentPrefix(of: 0 ..< Int64(source.count))
        #expect(!head.isEmpty)
        #expect(try reader.read(head) == source.subdata(in: Int(head.lowerBound) ..< Int(head.upperBound)))
        reader.close()
    }

    /// With the cloud stopped, ffprobe and ffmpeg on a head-only MP3 (its ID3v1 tag at the end is missing):
    /// the tail read gets a 503 at once instead of a 60 s wait, and the head still decodes.
    @Test func ffmpegOnAHeadOnlyTrackWithTheCloudStoppedAnswersAtOnce() async throws {
        let dir = try TemporaryDirectory(prefix: "cloudsync-player-offline")
        let album = dir.file("library/Album")
        try FileManager.default.createDirectory(at: album, withIntermediateDirectories: true)
        let (made, _) = try Self.run("ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=20", "-ac", "2",
                                                "-ar", "44100", "-c:a", "libmp3lame", "-b:a", "128k", "-write_id3v1", "1",
                                                "-metadata", "title=Tone", album.appendingPathComponent("tone.mp3").path])
        #expect(made == 0)
        let head = 64 << 10
        let (fake, env) = try await BinaryEnv.headOnly(root: dir.file("library"), head: head)
        fake.stop()
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let url = "http://127.0.0.1:\(port)/tracks/lib/Album/tone.mp3"
        let tail = try await offPool { try RawClient(port: port).get("/tracks/lib/Album/tone.mp3", headers: ["Range: bytes=-128"]) }
        #expect(tail.status == 503, "the ID3v1 tag is not cached and the cloud is gone: \(String(decoding: tail.body, as: UTF8.self))")

        let ((probed, output), probeSeconds) = try await offPool {
            try timed { try Self.run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", url], timeout: 90) }
        }
        #expect(probeSeconds < 20, "ffprobe took \(probeSeconds) s")
        let ((decoded, _), decodeSeconds) = try await offPool {
            try timed { try Self.run("ffmpeg", ["-v", "error", "-i", url, "-t", "2", "-f", "null", "-"], timeout: 90) }
        }
        #expect(decoded == 0, "the head (4 s of audio) decodes")
        #expect(decodeSeconds < 20, "ffmpeg took \(decodeSeconds) s")
        print("player-offline: ffprobe exit \(probed) ('\(output.trimmingCharacters(in: .whitespacesAndNewlines))') in "
            + "\(String(format: "%.2f", probeSeconds)) s; ffmpeg -t 2 exit \(decoded) in \(String(format: "%.2f", decodeSeconds)) s")
    }
}

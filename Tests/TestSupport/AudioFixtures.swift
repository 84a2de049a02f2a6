// Real audio fixtures for every test target that needs them: `make-audio-fixtures.sh` (next to this file, the
// one generator, also used by bench/instant-start.sh) run once per process and length, and the tag values it
// writes, for tests to compare with. ffprobe on the complete file stays the truth for durations.
import Foundation
import Synchronization

/// The tag values every fixture carries (as `make-audio-fixtures.sh` writes them), by which tags a format holds.
public enum AudioFixtureTags {
    public static let title = "Café — Пётр 東京 🎵"
    public static let artist = "Mötley Crüe & Björk"
    public static let albumArtist = "Various Ärtists"
    public static let album = "Ünïcode Album ½"

    /// Which tag fields a file carries.
    public enum Kind: Sendable {
        /// Every field: ID3v2, APEv2, Vorbis comments, MP4 ilst.
        case all
        /// ffmpeg's RIFF INFO: no album artist, no disc, no track total.
        case riff
        /// ID3v1.1: no album artist, no disc, no track total.
        case id3v1
    }

    /// The fields of `kind` by `ls --json` key: title, artist, album_artist, album, track, disc, date, genre
    /// (numbers as `Int`, text as `String`).
    public static func fields(_ kind: Kind) -> [String: any Sendable] {
        var out: [String: any Sendable] = ["title": title, "artist": artist, "album": album, "track": 9, "date": "2019",
                                           "genre": "Jazz"]
        if kind == .all {
            out["album_artist"] = albumArtist
            out["disc"] = 1
        }
        return out
    }
}

/// A directory of fixtures made by `make-audio-fixtures.sh`, removed when the test process exits.
public final class AudioFixtures: Sendable {
    public let directory: URL
    /// Length of the audio of every file, in seconds.
    public let seconds: Int

    /// The ten files of issue #17, with the tags each carries.
    public static let instantStart: [(name: String, tags: AudioFixtureTags.Kind)] = [
        ("mp3-cover.mp3", .all), ("mp3-id3v1.mp3", .id3v1), ("flac-cover.flac", .all), ("m4a-end.m4a", .all),
        ("m4a-faststart.m4a", .all), ("m4a-cover.m4a", .all), ("vorbis.ogg", .all), ("opus.opus", .all),
        ("opus-cover.opus", .all), ("wav.wav", .riff),
    ]

    /// Every file the generator makes (the ten above and the others it documents).
    public static let all: [String] = instantStart.map(\.name) + [
        "mp3-vbr.mp3", "aac-adts.aac", "flac-id3.flac", "ogg-flac.oga", "wav-list-after-data.wav", "wav-rf64.wav", "aiff.aiff",
    ]

    private init(directory: URL, seconds: Int) {
        self.directory = directory
        self.seconds = seconds
    }

    public func url(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// A library folder `dir` holding copies of the ten files of ``instantStart``.
    public func copyInstantStart(to dir: URL) throws {
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        for (name, _) in Self.instantStart {
            try FileManager.default.copyItem(at: url(name), to: dir.appendingPathComponent(name))
        }
    }

    private static let made = Mutex<[Int: Result<AudioFixtures, any Error>]>([:])

    /// The fixtures of `seconds` of audio, made on first use (about a minute on a busy machine) and shared by
    /// every test of the process; a clear error when ffmpeg is missing or a step failed.
    public static func shared(seconds: Int = 40) throws -> AudioFixtures {
        // Made under the lock: concurrent tests wait for the one generation instead of starting their own.
        try made.withLock { cache in
            if let result = cache[seconds] { return try result.get() }
            let result: Result<AudioFixtures, any Error>
            do { result = .success(try make(seconds: seconds)) } catch { result = .failure(error) }
            cache[seconds] = result
            return try result.get()
        }
    }

    private static func make(seconds: Int) throws -> AudioFixtures {
        guard which("ffmpeg") != nil, which("ffprobe") != nil else {
            throw TestSupportError("ffmpeg and ffprobe are needed to make the audio fixtures: apt-get install ffmpeg (scripts/install-deps.sh does)")
        }
        let name = "cloudsync-audio-fixtures-\(getpid())-\(seconds)s"
        let dir = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(name)
        try? FileManager.default.removeItem(at: dir)
        AudioFixtureCleanup.register(dir)
        let script = RepositoryPaths.root.appendingPathComponent("Tests/TestSupport/make-audio-fixtures.sh").path
        let started = Date()
        let output: Tool.Output
        do { output = try Tool.run("/bin/bash", [script, dir.path, String(seconds)], timeout: 600) } catch {
            throw TestSupportError("make-audio-fixtures.sh: \(error)")
        }
        guard output.status == 0 else {
            throw TestSupportError("make-audio-fixtures.sh exited \(output.status): \(output.stderr)")
        }
        for file in all where !FileManager.default.fileExists(atPath: dir.appendingPathComponent(file).path) {
            throw TestSupportError("make-audio-fixtures.sh did not make \(file) in \(dir.path)")
        }
        print("audio fixtures: \(all.count) files of \(seconds) s made in \(String(format: "%.1f", Date().timeIntervalSince(started))) s under \(dir.path)")
        return AudioFixtures(directory: dir, seconds: seconds)
    }
}

/// Removes the fixture directories of this process when it exits.
private enum AudioFixtureCleanup {
    static let directories = Mutex<[URL]>([])
    static let installed = Mutex(false)

    static func register(_ dir: URL) {
        directories.withLock { $0.append(dir) }
        installed.withLock { done in
            guard !done else { return }
            done = true
            atexit { AudioFixtureCleanup.directories.withLock { $0.forEach { try? FileManager.default.removeItem(at: $0) } } }
        }
    }
}

/// Runs command-line tools for the tests, bounded in time.
public enum Tool {
    public struct Output: Sendable {
        public let status: Int32
        public let stdout: String
        public let stderr: String
    }

    /// Runs `program arguments` to completion (at most `timeout` seconds, then it is killed and this throws).
    /// Output goes through files, so a chatty child can never block on a full pipe.
    public static func run(_ program: String, _ arguments: [String], timeout: TimeInterval = 120) throws -> Output {
        guard let path = which(program) else {
            throw TestSupportError("\(program) is not installed; install the Debian package providing it (scripts/install-deps.sh does)")
        }
        let dir = try TemporaryDirectory(prefix: "cloudsync-tool-run")
        let out = dir.file("stdout"), err = dir.file("stderr")
        guard FileManager.default.createFile(atPath: out.path, contents: nil),
              FileManager.default.createFile(atPath: err.path, contents: nil)
        else { throw TestSupportError("cannot create output files in \(dir.path)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw TestSupportError("\(program) \(arguments.prefix(4).joined(separator: " ")) … did not finish within \(timeout) s")
        }
        return Output(status: process.terminationStatus,
                      stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                      stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    /// Runs and throws with the tool's stderr unless it exits 0.
    @discardableResult
    public static func check(_ program: String, _ arguments: [String], timeout: TimeInterval = 120) throws -> String {
        let output = try run(program, arguments, timeout: timeout)
        guard output.status == 0 else {
            throw TestSupportError("\(program) \(arguments.joined(separator: " ")) exited \(output.status): \(output.stderr)")
        }
        return output.stdout
    }
}

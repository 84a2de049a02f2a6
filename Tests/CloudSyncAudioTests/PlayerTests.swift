@testable import CloudSyncAudio
import Foundation
import Testing
import TestSupport

/// The proof that start sets are right for a real player: a server (Tests/Fakes/files_fake.py with its "only"
/// rule) that holds nothing but a fixture's start set: a body stops at the first byte outside it and the
/// connection closes there, a request that starts outside it gets 503. ffmpeg must then decode five seconds with no
/// error output, and ffprobe must report the same tags and duration as on the complete file.
///
/// The start sets are those of the tight policy (16 KiB minimum audio, 8 KiB tail): with the defaults, 512 KiB
/// of audio and a 128 KiB tail are most of these 40-second files, and a default start set holds every byte a
/// tight one holds, so what plays from the tight one plays from the default one.
///
/// ffmpeg and ffprobe run with `-short_seek_size 32768`, ffmpeg's own short-seek threshold: left at 0, its HTTP
/// client takes the TCP receive buffer as the threshold (autotuned by Linux up to `tcp_rmem`'s maximum, megabytes
/// on loopback once a cover has streamed) and reads forward through any gap shorter than that instead of seeking,
/// so what it reads would depend on the kernel's tuning, not on the file. Start sets merge holes below 64 KiB
/// (buffer + threshold), so with the threshold pinned nothing a reader skips is a hole it reads through.
///
/// Files with a cover get `-map 0:a`: ffmpeg 5.1 maps the attached picture as a video output stream whose one
/// frame never reaches `-t 5`, so without it the command demuxes to the end of the input whatever it holds
/// (that reads the whole file even when it is complete, and is no playback need).
@Suite struct PlayerTests {
    @Test(arguments: Fixtures.specs)
    func ffmpegPlaysTheStartSetAlone(_ spec: FixtureSpec) async throws {
        let fixture = try Fixtures.fixture(spec.name)
        let library = try Fixtures.library()
        let run = AnalysisRun(fixture.data, name: spec.name, policy: Policies.tight)
        let ranges = run.startSet.ranges.ranges.map { [$0.lowerBound, $0.upperBound] }
        let rule: [[String: Any]] = [["path": spec.name, "kind": "only", "count": -1, "ranges": ranges]]
        let faults = String(decoding: try JSONSerialization.data(withJSONObject: rule), as: UTF8.self)
        let server = try await PythonFake.start("files_fake.py", arguments: ["--root", library.directory.path, "--faults", faults])
        defer { server.stop() }
        let url = "http://demo:demo-pass@127.0.0.1:\(server.ports[0])/dav/\(spec.name)"
        let where_ = "\(spec.name) (start set \(run.startSet.ranges))"

        let audioOnly = spec.bigCover ? ["-map", "0:a"] : []
        let decoded = try Tool.run("ffmpeg", ["-nostdin", "-v", "error", "-short_seek_size", "32768", "-i", url]
            + audioOnly + ["-t", "5", "-f", "null", "-"])
        #expect(decoded.status == 0, "\(where_): ffmpeg exited \(decoded.status)")
        #expect(decoded.stderr.isEmpty, "\(where_): ffmpeg said: \(decoded.stderr)")

        let complete = fixture.probe.facts
        let probed = try Probe.tagsAndDuration(url, options: ["-short_seek_size", "32768"])
        #expect(probed.errors.isEmpty, "\(where_): ffprobe said: \(probed.errors)")
        #expect(probed.tags == complete.tags, "\(where_)")
        let duration = try #require(probed.duration, "\(where_): ffprobe reported no duration")
        #expect(abs(duration - fixture.probe.duration) < 0.5, "\(where_): \(duration) s, complete file \(fixture.probe.duration) s")
        #expect(probed.sampleRate == complete.sampleRate && probed.channels == complete.channels, "\(where_)")
    }

    /// The harness can fail: the same start sets without what the format says players read elsewhere (the
    /// trailing moov, the region where a reader finds the last Ogg page, the ID3v1 tag) break ffmpeg or ffprobe.
    @Test(arguments: [("m4a-end.m4a", "moov"), ("vorbis.ogg", "last 65307 bytes"), ("mp3-id3v1.mp3", "ID3v1")])
    func withoutWhatPlayersReadAtTheEndTheyFail(_ name: String, _ region: String) async throws {
        let fixture = try Fixtures.fixture(name)
        let library = try Fixtures.library()
        var ranges = AnalysisRun(fixture.data, name: name, policy: Policies.tight).startSet.ranges
        let removed = try #require(Structure.regionsPlayersRead(fixture).first { $0.name == region })
        ranges.remove(contentsOf: removed.range)
        let rule: [[String: Any]] = [["path": name, "kind": "only", "count": -1,
                                      "ranges": ranges.ranges.map { [$0.lowerBound, $0.upperBound] }]]
        let faults = String(decoding: try JSONSerialization.data(withJSONObject: rule), as: UTF8.self)
        let server = try await PythonFake.start("files_fake.py", arguments: ["--root", library.directory.path, "--faults", faults])
        defer { server.stop() }
        let url = "http://demo:demo-pass@127.0.0.1:\(server.ports[0])/dav/\(name)"
        let decoded = try Tool.run("ffmpeg", ["-nostdin", "-v", "error", "-short_seek_size", "32768", "-i", url, "-t", "5",
                                              "-f", "null", "-"])
        let probed = try? Probe.tagsAndDuration(url, options: ["-short_seek_size", "32768"])
        let broken = decoded.status != 0 || !decoded.stderr.isEmpty || probed == nil || probed?.errors.isEmpty == false
            || probed?.tags != fixture.probe.facts.tags || probed?.duration.map({ abs($0 - fixture.probe.duration) < 0.5 }) != true
        #expect(broken, "\(name) without its \(region) \(removed.range) still played and probed the same")
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TestSupport

/// mpv and VLC, the desktop players README names, on `serve` over a library of which only the start sets are
/// cached (real files made by ffmpeg): with the cloud stopped mpv — ffmpeg's HTTP client — plays a head to its
/// end and goes on, and so does VLC, whose HTTP client is its own; with the cloud back mpv plays every track of
/// `/playlist.m3u`.
@Suite(.serialized) struct DesktopPlayerTests {
    /// Short heads (2 s, 64 KiB) so that VLC, which plays in real time, is done in seconds.
    static let heads = "[pull]\nhead_first = \"64KiB\"\nhead_seconds = 2"

    @Test func mpvAndVLCPlayHeadsOfflineAndThePlaylistOnline() async throws {
        let fixtures = try AudioFixtures.shared(seconds: 40)
        let dir = try TemporaryDirectory(prefix: "cloudsync-desktop-players")
        let library = dir.file("library")
        try fixtures.copyInstantStart(to: library)
        let fake = try await FilesFake(root: library)
        defer { fake.stop() }

        // A budget of the start sets (their sizes from a scratch pull of everything) and 16 KiB: heads only.
        let scratch = try BinaryEnv(davURL: fake.davURL, extra: Self.heads)
        let full = try scratch.run(["pull", "--remote", "lib"])
        #expect(full.status == 0, "\(full.stderr)")
        let heads = try InstantStartAcceptanceTests.headBytes(scratch)
        let env = try BinaryEnv(davURL: fake.davURL, extra: "max_size = \"\(heads + (16 << 10))B\"\nmin_free = \"0B\"\n" + Self.heads)
        let pulled = try env.run(["pull", "--remote", "lib"])
        #expect(pulled.status == 0, "\(pulled.stderr)")
        let states = try InstantStartAcceptanceTests.listing(env).map { "\($0["path"] ?? "?") \($0["state"] ?? "?")" }
        #expect(states.allSatisfy { $0.hasSuffix(" head") }, "after the pull: \(states)")

        // Offline first, while every track is a head.
        let cloudPort = fake.port
        fake.stop()
        let (serve, port) = try await env.serve()
        defer { serve.stop() }
        let base = "http://127.0.0.1:\(port)"

        // mpv plays the head of an MP4 whose moov is at the end (the start set holds it) to the hole, where its
        // ffmpeg reconnects 0, 1, 3 and 7 s later and gets 503 each time; then it ends: exit 0, the head decoded.
        let out = dir.file("mpv.wav")
        let (mpv, mpvSeconds) = try await offPool {
            try timed {
                try Tool.run("mpv", ["--no-config", "--ao=pcm", "--ao-pcm-file=\(out.path)", "--vo=null", "--msg-level=all=info",
                                     "\(base)/tracks/lib/m4a-end.m4a"], timeout: 90)
            }
        }
        #expect(mpv.status == 0, "mpv exited \(mpv.status): \(mpv.stdout.suffix(2000))")
        let mpvDecoded = try InstantStartAcceptanceTests.ffprobeDuration(out)
        #expect(mpvDecoded >= 1.9 && mpvDecoded < 20, "mpv decoded \(mpvDecoded) s of the head of m4a-end.m4a")
        print("desktop players: offline, mpv played \(String(format: "%.1f", mpvDecoded)) s of the head of m4a-end.m4a and was done "
            + "after \(String(format: "%.1f", mpvSeconds)) s")

        // VLC plays the head of an MP3 whose ID3v1 tag is at the end to the hole, in real time, and exits. (Not an
        // M4A head this short: VLC's MP4 demuxer reads 15 s ahead and drops the track and what it decoded when a
        // read fails, docs/serve.md.)
        let (vlc, vlcDecoded, vlcSeconds) = try await offPool { try Self.vlcPlays("\(base)/tracks/lib/mp3-id3v1.mp3") }
        #expect(vlc.status == 0, "VLC exited \(vlc.status): \(vlc.stderr.suffix(2000))")
        #expect(vlcDecoded >= 1.9 && vlcDecoded < 20, "VLC played \(vlcDecoded) s of the head of mp3-id3v1.mp3")
        print("desktop players: offline, VLC played \(String(format: "%.1f", vlcDecoded)) s of the head of mp3-id3v1.mp3 and was done "
            + "after \(String(format: "%.1f", vlcSeconds)) s")

        // The cloud is back: mpv plays 2 s of every track of the playlist (without waiting for the clock), the
        // missing bytes fetched on demand. Exit 0: each one played.
        let cloud = try await FilesFake(root: library, port: cloudPort)
        defer { cloud.stop() }
        let online = try await offPool {
            try Tool.run("mpv", ["--no-config", "--ao=null", "--ao-null-untimed", "--vo=null", "--length=2",
                                 "--msg-level=all=info", "\(base)/playlist.m3u"], timeout: 120)
        }
        let played = online.stdout.components(separatedBy: "\n").filter { $0.hasPrefix("Playing: \(base)/tracks/lib/") }
        #expect(online.status == 0, "mpv exited \(online.status): \(online.stdout.suffix(2000)) \(online.stderr.suffix(1000))")
        #expect(played.count == AudioFixtures.instantStart.count, "mpv played \(played)")
    }

    /// `cvlc --play-and-exit` of `url` into a WAV file (the `afile` output, in real time): its status, the seconds
    /// it holds and the wall time. VLC refuses to run as root, so as root it runs as `nobody` (`runuser`) with a
    /// HOME and output directory of its own.
    static func vlcPlays(_ url: String) throws -> (Tool.Output, Double, Double) {
        let home = try TemporaryDirectory(prefix: "cloudsync-vlc")
        chmod(home.path, 0o777)
        let out = home.file("vlc.wav")
        let vlc = ["cvlc", "--play-and-exit", "--no-video", "--aout=afile", "--audiofile-file=\(out.path)", url]
        let (output, seconds) = try timed {
            try getuid() == 0
                ? Tool.run("runuser", ["-u", "nobody", "--", "env", "HOME=\(home.path)"] + vlc, timeout: 90)
                : Tool.run("env", ["HOME=\(home.path)"] + vlc, timeout: 90)
        }
        guard FileManager.default.fileExists(atPath: out.path) else {
            throw TestSupportError("VLC wrote no audio (exit \(output.status)): \(output.stderr.suffix(2000))")
        }
        return (output, try InstantStartAcceptanceTests.ffprobeDuration(out), seconds)
    }
}

import Foundation
import TestSupport
import Testing

/// A cache on a USB stick or SD card: a real exFAT file system (exfat-fuse on a loop device), which refuses
/// `"*:<>?|` in names. Needs root, /dev/fuse and exfatprogs + exfat-fuse (scripts/install-deps.sh); skipped
/// otherwise.
@Suite struct PortableNamesTests {
    static let available = getuid() == 0 && FileManager.default.fileExists(atPath: "/dev/fuse")
        && which("mkfs.exfat") != nil && which("mount.exfat-fuse") != nil && which("losetup") != nil

    /// A 64 MiB exFAT image mounted for one test.
    struct ExFATDisk {
        let image: URL
        let mountPoint: URL
        let device: String

        init() throws {
            let dir = try temporaryDirectory("exfat")
            image = dir.appendingPathComponent("disk.img")
            mountPoint = dir.appendingPathComponent("mnt")
            try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
            try Self.run("truncate", ["-s", "64M", image.path])
            try Self.run("mkfs.exfat", [image.path])
            device = try Self.run("losetup", ["-f", "--show", image.path], output: true).trimmingCharacters(in: .whitespacesAndNewlines)
            do {
                try Self.mount(device, at: mountPoint.path)
            } catch {
                _ = try? Self.run("losetup", ["-d", device])
                throw error
            }
        }

        /// Runs `program`; its output is read only when `output` (mount.exfat-fuse leaves a daemon holding
        /// whatever it was given as stdout, so a pipe would never end).
        @discardableResult
        static func run(_ program: String, _ arguments: [String], output: Bool = false) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: which(program) ?? "/usr/sbin/\(program)")
            process.arguments = arguments
            let out = Pipe()
            process.standardOutput = output ? out : FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = output ? out.fileHandleForReading.readDataToEndOfFile() : Data()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw TestSupportError("\(program) \(arguments) failed (\(process.terminationStatus))") }
            return String(decoding: data, as: UTF8.self)
        }

        /// mount.exfat-fuse forks its daemon, which keeps every descriptor it was given; Foundation's `Process` then
        /// never sees the mount command end. So: posix_spawn with /dev/null for stdin, stdout and stderr, and
        /// the mount table as the answer.
        static func mount(_ device: String, at path: String) throws {
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            for fd: Int32 in 0 ... 2 { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
            let words: [String] = ["mount.exfat-fuse", device, path]
            let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var pid: pid_t = 0
            guard posix_spawnp(&pid, "mount.exfat-fuse", &actions, nil, argv, environ) == 0 else {
                throw TestSupportError("mount.exfat-fuse could not be started")
            }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                let table = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
                if table.contains(" \(path) ") { return }
                usleep(20_000)
            }
            throw TestSupportError("mount.exfat-fuse \(device) \(path) did not mount")
        }

        func remove() {
            _ = try? Self.run("umount", [mountPoint.path])
            _ = try? Self.run("losetup", ["-d", device])
            try? FileManager.default.removeItem(at: image.deletingLastPathComponent())
        }
    }

    static let files: [(String, Int)] = [
        ("Case/what?.mp3", 30_000), ("Case/AC:DC <live>.mp3", 31_000), ("Loose/It's \"Quoted\" | *.mp3", 32_000),
        ("Vol. 1./t.mp3", 33_000), ("Plain/ok.mp3", 34_000),
    ]
    /// Where each of `files` lands under tracks/lib on exFAT: the refused characters as full-width look-alikes.
    static let local = [
        "Case/what\u{FF1F}.mp3", "Case/AC\u{FF1A}DC \u{FF1C}live\u{FF1E}.mp3", "Loose/It's \u{FF02}Quoted\u{FF02} \u{FF5C} \u{FF0A}.mp3",
        "Vol. 1\u{FF0E}/t.mp3", "Plain/ok.mp3",
    ]

    /// Runs `body` with a fixture of `files` whose cache is on a fresh exFAT disk.
    func onExFAT(seed: UInt64, files: [(String, Int)], pull: [String] = [], _ body: (Fixture, URL) throws -> Void) throws {
        let fixture = try Fixture(seed: seed, files: files, pull: pull)
        defer { fixture.cleanup() }
        let disk = try ExFATDisk()
        defer { disk.remove() }
        let cacheDir = disk.mountPoint.appendingPathComponent("cache")
        try fixture.env.moveCache(to: cacheDir)
        try body(fixture, cacheDir)
    }

    func expectTracks(in tracks: URL, _ fixture: Fixture, sourceLocation: SourceLocation = #_sourceLocation) {
        for ((path, _), local) in zip(Self.files, Self.local) {
            let data = try? Data(contentsOf: tracks.appendingPathComponent(local))
            #expect(data == fixture.library.files[path], "\(path) as \(local)", sourceLocation: sourceLocation)
        }
    }

    /// Every track is fetched, under a name exFAT takes. Before, the first such name failed its rename into
    /// tracks/ and stopped the whole pull (exit 74).
    @Test(.enabled(if: available, "needs root, /dev/fuse, exfatprogs and exfat-fuse"))
    func aCacheOnExFATNamesTracksSoTheDiskTakesThem() throws {
        try onExFAT(seed: 95, files: Self.files) { fixture, cacheDir in
            let pull = try fixture.env.run(["pull"])
            #expect(pull.status == 0, "stderr: \(pull.stderr)")
            expectTracks(in: cacheDir.appendingPathComponent("tracks/lib"), fixture)
            let again = try fixture.env.run(["pull"])
            #expect(again.status == 0 && again.stderr.contains("fetched 0 files"), "stderr: \(again.stderr)")
            let verify = try fixture.env.run(["cache", "verify"])
            #expect(verify.status == 0 && verify.stdout.contains("0 missing"), "\(verify.stdout) \(verify.stderr)")
            // The remote's names are what ls shows and what serve answers to.
            let ls = try fixture.env.run(["ls", "--offline"])
            #expect(ls.stdout.contains("Case/what?.mp3") && ls.stdout.contains("It's \"Quoted\" | *.mp3"), "\(ls.stdout)")
        }
    }

    /// A file and a folder whose names differ only in case cannot both be on exFAT: the one that comes second fails
    /// alone (exit 1, named), the others are fetched. It stopped the whole pull as a damaged cache (exit 74).
    @Test(.enabled(if: available, "needs root, /dev/fuse, exfatprogs and exfat-fuse"))
    func aNameTheDiskCannotHoldFailsOnlyItsFile() throws {
        let files = [("A/Live.mp3", 30_000), ("A/live.mp3/t.mp3", 31_000), ("B/ok.mp3", 32_000), ("B/ok 2.mp3", 33_000)]
        try onExFAT(seed: 97, files: files, pull: ["jobs = 1"]) { fixture, cacheDir in
            let pull = try fixture.env.run(["pull"])
            #expect(pull.status == 1, "stderr: \(pull.stderr)")
            #expect(pull.stderr.contains("cannot hold") && pull.stderr.contains("1 failed"), "stderr: \(pull.stderr)")
            let tracks = cacheDir.appendingPathComponent("tracks/lib")
            for (path, _) in files.suffix(2) {
                #expect((try? Data(contentsOf: tracks.appendingPathComponent(path))) == fixture.library.files[path], "\(path)")
        }
        let one = (try? Data(contentsOf: tracks.appendingPathComponent("A/Live.mp3"))) == fixture.library.files["A/Live.mp3"]
        let other = (try? Data(contentsOf: tracks.appendingPathComponent("A/live.mp3/t.mp3"))) == fixture.library.files["A/live.mp3/t.mp3"]
        #expect(one != other, "exactly one of the two fits: \(pull.stderr)")
        }
    }

    /// A cache moved onto exFAT from a disk that took every name (its index copied over): the entries get names
    /// exFAT takes, and the next pull fetches the tracks that could not come along.
    @Test(.enabled(if: available, "needs root, /dev/fuse, exfatprogs and exfat-fuse"))
    func aCacheMovedOntoExFATIsRenamedAndRefetched() throws {
        let fixture = try Fixture(seed: 96, files: Self.files)
        defer { fixture.cleanup() }
        let first = try fixture.env.run(["pull"])
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(FileManager.default.fileExists(atPath: fixture.env.tracks.appendingPathComponent("Case/what?.mp3").path))
        let disk = try ExFATDisk()
        defer { disk.remove() }
        let cacheDir = disk.mountPoint.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: cacheDir, withIntermediateDirectories: true)
        for name in try FileManager.default.contentsOfDirectory(atPath: fixture.env.cacheDir.path) where name.hasPrefix("index.sqlite") {
            try FileManager.default.copyItem(at: fixture.env.cacheDir.appendingPathComponent(name), to: cacheDir.appendingPathComponent(name))
        }
        try fixture.env.moveCache(to: cacheDir)
        let pull = try fixture.env.run(["pull"])
        #expect(pull.status == 0, "stderr: \(pull.stderr)")
        expectTracks(in: cacheDir.appendingPathComponent("tracks/lib"), fixture)
    }
}

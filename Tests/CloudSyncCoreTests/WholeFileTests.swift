import CloudSyncCore
import Foundation
import Glibc
import Testing

/// `WholeFile` reads what a user names to its end: a pipe, a /proc file, a regular file; a limit is a failure.
@Suite struct WholeFileTests {
    @Test func aPipeIsReadToItsEnd() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        let payload = Data((0 ..< 300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })  // beyond a pipe's 64 KiB
        let writeEnd = fds[1]
        let writer = Thread {
            let handle = FileHandle(fileDescriptor: writeEnd, closeOnDealloc: true)
            handle.write(payload)
            try? handle.close()
        }
        writer.start()
        defer { close(fds[0]) }
        #expect(try WholeFile.read("/dev/fd/\(fds[0])", limit: 1 << 20) == payload)
    }

    @Test func aProcFileIsReadBeyondItsFirstPage() throws {
        let maps = try WholeFile.read("/proc/self/maps", limit: 64 << 20)
        // A Swift test process maps far more than 4 KiB worth of lines.
        #expect(maps.count > 4096)
        #expect(String(decoding: maps, as: UTF8.self).hasSuffix("\n"))
    }

    @Test func limitsAndMissingFilesAreFailures() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("wholefile-\(UUID().uuidString)")
        try Data(repeating: 65, count: 1000).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(try WholeFile.read(url.path, limit: 1000).count == 1000)
        #expect(throws: WholeFile.Failure.self) { try WholeFile.read(url.path, limit: 999) }
        do {
            _ = try WholeFile.read(url.path + "-missing", limit: 10)
            Issue.record("a missing file was read")
        } catch {
            #expect(error.errno == ENOENT && error.reason == "No such file or directory")
        }
    }
}

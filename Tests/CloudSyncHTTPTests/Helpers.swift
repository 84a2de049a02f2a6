import CloudSyncCore
import Foundation
import Synchronization
import Testing
import TestSupport
@testable import CloudSyncHTTP

/// Byte i of version v of a fault-server file: (i·7 + v·13) mod 256.
func served(_ size: Int, version: Int = 1, from start: Int = 0, to end: Int? = nil) -> Data {
    Data((start..<(end ?? size)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ version &* 13) })
}

/// A sink keeping every write (offset → bytes) in memory; can be told to fail.
final class MemorySink: ByteSink {
    struct Failure: Error, Equatable {}
    private let writes = Mutex<[(Int64, Data)]>([])
    private let failAfter: Int?
    let writeBatchBytes: Int

    /// Heads offered to ``acceptsVersion(_:totalSize:)``, with the size each names.
    private let heads = Mutex<[(head: HTTPResponseHead, totalSize: Int64?)]>([])
    private let refusesVersions: Bool

    init(failAfter: Int? = nil, batch: Int = 0, refusesVersions: Bool = false) {
        self.failAfter = failAfter
        writeBatchBytes = batch
        self.refusesVersions = refusesVersions
    }

    func acceptsVersion(_ head: HTTPResponseHead, totalSize: Int64?) -> Bool {
        heads.withLock { $0.append((head, totalSize)) }
        return !refusesVersions
    }

    /// The statuses of the heads offered to ``acceptsVersion(_:totalSize:)``.
    var offered: [Int] { heads.withLock { $0.map(\.head.status) } }

    /// The total sizes those heads named.
    var offeredSizes: [Int64?] { heads.withLock { $0.map(\.totalSize) } }

    /// The size of each write, in order.
    var sizes: [Int] { writes.withLock { $0.map(\.1.count) } }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws {
        try writes.withLock { w in
            if let failAfter, w.reduce(0, { $0 + $1.1.count }) >= failAfter { throw Failure() }
            w.append((offset, Data(bytes)))
        }
    }

    var count: Int { writes.withLock { $0.reduce(0) { $0 + $1.1.count } } }

    /// The bytes written, assembled; nil when writes overlap or leave holes inside `range`.
    func assembled(_ range: Range<Int64>) -> Data? {
        writes.withLock { w in
            var out = Data(count: Int(range.count))
            var covered = 0
            for (offset, data) in w {
                guard offset >= range.lowerBound, offset + Int64(data.count) <= range.upperBound else { return nil }
                out.replaceSubrange(Int(offset - range.lowerBound)..<Int(offset - range.lowerBound) + data.count, with: data)
                covered += data.count
            }
            return covered == range.count ? out : nil
        }
    }

    var lowestOffset: Int64? { writes.withLock { $0.map(\.0).min() } }
}

/// A clock that only moves when slept on.
final class FakeClock: Sendable {
    private let state = Mutex<(now: Date, sleeps: [TimeInterval])>((Date(timeIntervalSince1970: 1_000_000), []))
    var now: Date { state.withLock { $0.now } }
    var sleeps: [TimeInterval] { state.withLock { $0.sleeps } }
    func sleep(_ seconds: TimeInterval) async throws {
        state.withLock { $0.now += seconds; $0.sleeps.append(seconds) }
        await Task.yield()
    }
}

/// Collects log lines.
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var logger: Logger { Logger(level: .debug) { [self] _, m in lines.withLock { $0.append(m) } } }
    var all: [String] { lines.withLock { $0 } }
}

/// One fault server for the whole test process.
actor SharedFaultServer {
    static let shared = SharedFaultServer()
    private var starting: Task<FaultServer, any Error>?
    func get() async throws -> FaultServer {
        if let starting { return try await starting.value }
        let task = Task { try await FaultServer() }
        starting = task
        return try await task.value
    }
}

func faultServer() async throws -> FaultServer { try await SharedFaultServer.shared.get() }

func stats(_ server: FaultServer, _ transport: CurlTransport) async throws -> [String: Int] {
    let r = try await transport.send(HTTPRequest(url: server.url("/stats")))
    return try JSONDecoder().decode([String: Int].self, from: r.body)
}

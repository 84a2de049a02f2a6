import CloudSyncCache
import CloudSyncCore
@testable import CloudSyncHTTP
import Foundation
import Testing
@testable import CloudSyncEngine

/// What serve's fetch session asks the cloud for next, as a table: the newest need first, exactly its
/// missing bytes rounded to a block, read-ahead only for what the client reads on.
@Suite struct FetchSchedulingTests {
    static let K: Int64 = 1024
    static let block: Int64 = 64 << 10
    static let chunk: Int64 = 2 << 20
    static let size: Int64 = 10 << 20

    static func missing(_ ranges: [Range<Int64>]) -> ByteRanges {
        var set = ByteRanges()
        for r in ranges { set.insert(contentsOf: r) }
        return set
    }

    static func demand(_ id: UInt64, _ position: Int64, _ end: Int64, window: Int64 = block, sequential: Bool = false,
                       sequence: UInt64) -> Demand {
        Demand(id: id, position: position, requestEnd: end, window: window, sequential: sequential, sequence: sequence)
    }

    struct Case: Sendable {
        var name: String
        var demands: [Demand]
        var missing: ByteRanges
        var expected: Fetch?
    }

    static let cases: [Case] = [
        Case(name: "a 128-byte tail read of a missing track costs its 128 bytes",
             demands: [demand(1, size - 128, size, sequence: 1)], missing: missing([0 ..< size]),
             expected: Fetch(range: size - 128 ..< size, neededEnd: size)),
        Case(name: "a seek into the middle fetches one block from there",
             demands: [demand(1, 5 << 20, size, sequence: 1)], missing: missing([0 ..< size]),
             expected: Fetch(range: (5 << 20) ..< (5 << 20) + block, neededEnd: (5 << 20) + block)),
        Case(name: "a small hole is fetched exactly, never over present bytes",
             demands: [demand(1, 1000, 2000, sequence: 1)], missing: missing([1000 ..< 1500]),
             expected: Fetch(range: 1000 ..< 1500, neededEnd: 1500)),
        Case(name: "the newest request beats an older reader's read-ahead",
             demands: [demand(1, 0, size, window: 4 << 20, sequence: 1), demand(2, size - 128, size, sequence: 2)],
             missing: missing([1 << 20 ..< size]),
             expected: Fetch(range: size - 128 ..< size, neededEnd: size)),
        Case(name: "a needed byte of an older request beats read-ahead of the newest",
             demands: [demand(1, 3 << 20, size, sequence: 1), demand(2, 0, size, window: 1 << 20, sequence: 2)],
             missing: missing([100 * K ..< size]),
             expected: Fetch(range: (3 << 20) ..< (3 << 20) + block, neededEnd: (3 << 20) + block)),
        Case(name: "a request the cache answers fetches nothing",
             demands: [demand(1, 0, 256 * K, window: 1 << 20, sequence: 1)], missing: missing([512 * K ..< size]),
             expected: nil),
        Case(name: "a reader that has read on gets its window of read-ahead, at most a chunk per GET",
             demands: [demand(1, 200 * K, size, window: 4 << 20, sequence: 1)], missing: missing([256 * K ..< size]),
             expected: Fetch(range: 256 * K ..< 256 * K + chunk, neededEnd: 256 * K)),
        Case(name: "a reader at a hole with a grown window fetches its window in the same GET",
             demands: [demand(1, 256 * K, size, window: 1 << 20, sequence: 1)], missing: missing([256 * K ..< size]),
             expected: Fetch(range: 256 * K ..< 256 * K + (1 << 20), neededEnd: 256 * K + block)),
        Case(name: "read-ahead stops at the request's end for a lone request",
             demands: [demand(1, 0, 100 * K, window: 1 << 20, sequence: 1)], missing: missing([64 * K ..< size]),
             expected: Fetch(range: 64 * K ..< 100 * K, neededEnd: 64 * K)),
        Case(name: "read-ahead passes the request's end for a client reading request after request",
             demands: [demand(1, 0, 100 * K, window: 1 << 20, sequential: true, sequence: 1)], missing: missing([64 * K ..< size]),
             expected: Fetch(range: 64 * K ..< 1 << 20, neededEnd: 64 * K)),
        Case(name: "a file of Int64.max bytes: the last byte, no overflow",
             demands: [demand(1, .max - 1, .max, window: .max, sequential: true, sequence: 1)], missing: missing([0 ..< .max]),
             expected: Fetch(range: .max - 1 ..< .max, neededEnd: .max)),
        Case(name: "a window reaching past Int64.max is clamped",
             demands: [demand(1, .max - 10, .max, window: .max, sequential: true, sequence: 1)], missing: missing([.max - 5 ..< .max]),
             expected: Fetch(range: .max - 5 ..< .max, neededEnd: .max - 5)),
    ]

    @Test(arguments: cases.indices)
    func nextFetch(_ i: Int) {
        let c = Self.cases[i]
        let size = c.demands.contains { $0.requestEnd == .max } ? Int64.max : Self.size
        let got = FetchSession.nextFetch(c.demands, missing: c.missing, size: size, block: Self.block, chunk: Self.chunk)
        #expect(got == c.expected, "\(c.name): got \(String(describing: got))")
    }

    @Test func preemptionSparesTheNeededPartAndBytesAboutToArrive() {
        let size = Self.size
        let readAhead = Fetch(range: 1 << 20 ..< 3 << 20, neededEnd: 1 << 20)
        let tail = Self.demand(2, size - 128, size, sequence: 2)
        // Read-ahead in flight: a tail read elsewhere cancels it.
        #expect(FetchSession.preempts(tail, inFlight: readAhead, missing: Self.missing([1 << 20 ..< size]), block: Self.block))
        // A byte the GET brings within one block: no cancel.
        let close = Self.demand(2, (1 << 20) + 1000, size, sequence: 2)
        #expect(!FetchSession.preempts(close, inFlight: readAhead, missing: Self.missing([1 << 20 ..< size]), block: Self.block))
        // The needed part of a GET (another client waits for it) is never cancelled.
        let needed = Fetch(range: 1 << 20 ..< 3 << 20, neededEnd: (1 << 20) + Self.block)
        #expect(!FetchSession.preempts(tail, inFlight: needed, missing: Self.missing([1 << 20 ..< size]), block: Self.block))
        // ...but once it arrived, the rest is read-ahead.
        #expect(FetchSession.preempts(tail, inFlight: needed, missing: Self.missing([(1 << 20) + Self.block ..< size]), block: Self.block))
        // A demand whose byte is present needs nothing.
        #expect(!FetchSession.preempts(tail, inFlight: readAhead, missing: Self.missing([1 << 20 ..< 3 << 20]), block: Self.block))
    }

    @Test func unreachableClassification() {
        let refused = ProviderError(.transient, "connect failed", cause: InterruptedTransfer(delivered: 0 ..< 0, curlCode: 7, detail: "refused"))
        let cut = ProviderError(.transient, "cut", cause: InterruptedTransfer(delivered: 0 ..< 10, curlCode: 7, detail: "reset"))
        let timeout = ProviderError(.transient, "slow", cause: InterruptedTransfer(delivered: 0 ..< 0, curlCode: 28, detail: "timeout"))
        #expect(OnDemand.isUnreachable(ProviderError(.unreachable, "no route")))
        // The transport classifies: a transient failure is not taken for an unreachable cloud here.
        #expect(!OnDemand.isUnreachable(refused))
        #expect(!OnDemand.isUnreachable(cut), "bytes arrived: the host was reachable")
        #expect(!OnDemand.isUnreachable(timeout))
        #expect(!OnDemand.isUnreachable(ProviderError(.rateLimited, "429")))
    }
}

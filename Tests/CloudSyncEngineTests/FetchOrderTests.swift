@testable import CloudSyncEngine
import Foundation
import TestSupport
import Testing

/// `pull --order` (#25): the order of work, rclone's `--order-by` spelling; which tracks fit stays the planner's.
@Suite struct FetchOrderTests {
    @Test(arguments: [
        ("name", FetchOrder(key: .name, ascending: true)),
        ("size", FetchOrder(key: .size, ascending: true)),
        ("modified", FetchOrder(key: .modified, ascending: false)),
        ("added", FetchOrder(key: .added, ascending: false)),
        ("size,desc", FetchOrder(key: .size, ascending: false)),
        ("Modified,ASC", FetchOrder(key: .modified, ascending: true)),
        ("name,descending", FetchOrder(key: .name, ascending: false)),
    ] as [(String, FetchOrder)])
    func parses(text: String, expected: FetchOrder) {
        #expect(FetchOrder(parsing: text) == expected)
    }

    @Test(arguments: ["", "bogus", "size,", "size,up", "size,asc,desc", ",asc"])
    func refuses(text: String) {
        #expect(FetchOrder(parsing: text) == nil)
    }

    struct Item: Equatable { var path: String; var size: Int64; var modified: Double; var added: Double }

    /// Sorting is a stable permutation, by the key in the asked direction; ties keep the priority order.
    @Test func sortsAStablePermutation() {
        var random = SeededRandom(seed: 25)
        for _ in 0 ..< 200 {
            let items = (0 ..< Int(random.next() % 12)).map { i in
                Item(path: "p\(random.next() % 5)/\(i)", size: Int64(random.next() % 4), modified: Double(random.next() % 3),
                     added: Double(random.next() % 3))
            }
            for key in FetchOrder.Key.allCases {
                for ascending in [true, false] {
                    let order = FetchOrder(key: key, ascending: ascending)
                    let sorted = order.sorted(items, path: \.path, size: \.size, modified: \.modified, added: \.added)
                    #expect(sorted.count == items.count)
                    #expect(Set(sorted.map(\.path)) == Set(items.map(\.path)))
                    for (a, b) in zip(sorted, sorted.dropFirst()) {
                        let (x, y): (Double, Double) = switch key {
                        case .name: (a.path < b.path ? 0 : a.path == b.path ? 1 : 2, 1)
                        case .size: (Double(a.size), Double(b.size))
                        case .modified: (a.modified, b.modified)
                        case .added: (a.added, b.added)
                        }
                        #expect(ascending ? x <= y : x >= y)
                        if x == y, key != .name {
                            let ia = items.firstIndex(of: a)!, ib = items.firstIndex(of: b)!
                            #expect(ia < ib, "ties must keep the priority order")
                        }
                    }
                }
            }
        }
    }

    /// Against the fault fake, one job at a time: GETs follow the asked order.
    @Test func pullFetchesInTheAskedOrder() throws {
        let fixture = try Fixture(seed: 2512, files: [("b.mp3", 300_000), ("a.mp3", 100_000), ("c.mp3", 200_000)])
        defer { fixture.cleanup() }
        let r = try fixture.env.run(["pull", "--order", "size,desc", "--jobs", "1"])
        #expect(r.status == 0, "stderr: \(r.stderr)")
        var firstGet: [String] = []
        for served in try fixture.server.log() where !firstGet.contains(served.path) { firstGet.append(served.path) }
        #expect(firstGet.map { ($0 as NSString).lastPathComponent } == ["b.mp3", "c.mp3", "a.mp3"], "\(firstGet)")
        let bad = try fixture.env.run(["pull", "--order", "biggest"])
        #expect(bad.status == 2 && bad.stderr.contains("name, size, modified or added"), "\(bad.stderr)")
    }
}

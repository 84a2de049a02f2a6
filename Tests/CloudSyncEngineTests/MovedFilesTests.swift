import CloudSyncCore
import CloudSyncEngine
import Foundation
import TestSupport
import Testing

/// Which listed files are cached files moved on the remote (`MovedFiles`), in-process.
@Suite struct MovedFilesTests {
    static func file(_ path: String, size: Int64 = 4_000_000, modified: TimeInterval = 1_700_000_000, revision: String = "",
                     id: String? = nil, hashes: [(HashKind, String)] = []) -> RemoteFile {
        RemoteFile(path: path, providerID: id, size: size, modified: Date(timeIntervalSince1970: modified), revision: revision,
                   hashes: hashes.map { ContentHash(kind: $0.0, value: $0.1) })
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var old: RemoteFile
        var new: RemoteFile
        var same: Bool
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "Dropbox content_hash equal, rev and id changed",
             old: file("A/x.mp3", revision: "015a1", id: "id:1", hashes: [(.dropbox, "ab12")]),
             new: file("B/y.mp3", revision: "015b2", id: "id:2", hashes: [(.dropbox, "ab12")]), same: true),
        Case(name: "a hash that differs says no, whatever else agrees",
             old: file("A/x.mp3", revision: "e1", id: "id:1", hashes: [(.md5, "aa")]),
             new: file("B/x.mp3", revision: "e1", id: "id:1", hashes: [(.md5, "bb")]), same: false),
        Case(name: "hex hashes compare without case",
             old: file("A/x.mp3", hashes: [(.sha1, "ABCDEF")]), new: file("B/z.mp3", hashes: [(.sha1, "abcdef")]), same: true),
        Case(name: "QuickXor (base64) compares exactly",
             old: file("A/x.mp3", hashes: [(.quickXor, "AbC=")]), new: file("B/x.mp3", hashes: [(.quickXor, "abc=")]), same: false),
        Case(name: "only the kinds both have count",
             old: file("A/x.mp3", hashes: [(.md5, "aa"), (.sha256, "11")]),
             new: file("B/x.mp3", hashes: [(.sha256, "11")]), same: true),
        Case(name: "sizes always agree",
             old: file("A/x.mp3", size: 10, hashes: [(.md5, "aa")]), new: file("B/x.mp3", size: 11, hashes: [(.md5, "aa")]),
             same: false),
        Case(name: "an empty file is never matched",
             old: file("A/x.mp3", size: 0, revision: "e"), new: file("B/x.mp3", size: 0, revision: "e"), same: false),
        Case(name: "same provider id and fingerprint, no hash",
             old: file("A/x.mp3", revision: "c1", id: "item-7"), new: file("B/renamed.mp3", revision: "c1", id: "item-7"),
             same: true),
        Case(name: "another provider id",
             old: file("A/x.mp3", revision: "c1", id: "item-7"), new: file("B/x.mp3", revision: "c1", id: "item-8"), same: false),
        Case(name: "WebDAV: the same ETag, mtime and name in another folder",
             old: file("Björk/Homogenic/Jóga.flac", revision: "\"5f-1a\""),
             new: file("Björk (Iceland)/Homogenic/Jóga.flac", revision: "\"5f-1a\""), same: true),
        Case(name: "WebDAV: a weak and a strong ETag name one version",
             old: file("A/x.mp3", revision: "W/\"5f-1a\""), new: file("B/x.mp3", revision: "\"5f-1a\""), same: true),
        Case(name: "WebDAV: a renamed file is not recognised without a hash",
             old: file("A/x.mp3", revision: "\"5f-1a\""), new: file("A/01 x.mp3", revision: "\"5f-1a\""), same: false),
        Case(name: "WebDAV: another mtime",
             old: file("A/x.mp3", revision: "\"e\""), new: file("B/x.mp3", modified: 1_700_000_001, revision: "\"e\""),
             same: false),
        Case(name: "WebDAV without ETags (nginx): size, mtime and name",
             old: file("A/x.mp3"), new: file("B/x.mp3"), same: true),
        Case(name: "WebDAV without ETags: renamed",
             old: file("A/x.mp3"), new: file("B/y.mp3"), same: false),
    ]

    @Test(arguments: cases)
    func sameContents(_ c: Case) {
        #expect(MovedFiles.sameContents(c.old, c.new) == c.same)
        #expect(MovedFiles.sameContents(c.new, c.old) == c.same, "symmetric")
    }

    /// Two new copies of one gone file: the first by path takes it (the other is fetched). Two gone candidates for one
    /// new file: the one of the same name wins, then the one holding more bytes.
    @Test func ambiguousCandidatesAreResolvedByNameThenBytesThenPath() {
        let hash: [(HashKind, String)] = [(.md5, "aa")]
        let copies = MovedFiles.match(gone: [.init(file: Self.file("Old/a.mp3", hashes: hash), heldBytes: 5)],
                                      appeared: [Self.file("New2/a.mp3", hashes: hash), Self.file("New1/a.mp3", hashes: hash)])
        #expect(copies.map(\.from) == ["Old/a.mp3"] && copies.map(\.to.path) == ["New1/a.mp3"])

        let gone: [MovedFiles.Gone] = [
            .init(file: Self.file("X/other name.mp3", hashes: hash), heldBytes: 4_000_000),
            .init(file: Self.file("Y/a.mp3", hashes: hash), heldBytes: 10),
            .init(file: Self.file("Z/a.mp3", hashes: hash), heldBytes: 20),
            .init(file: Self.file("W/nothing held.mp3", hashes: hash), heldBytes: 0),
        ]
        let moves = MovedFiles.match(gone: gone, appeared: [Self.file("N/a.mp3", hashes: hash),
                                                             Self.file("N/b.mp3", hashes: hash),
                                                             Self.file("N/c.mp3", hashes: hash),
                                                             Self.file("N/d.mp3", hashes: hash)])
        #expect(moves.map { "\($0.from) → \($0.to.path)" } == [
            "Z/a.mp3 → N/a.mp3", "X/other name.mp3 → N/b.mp3", "Y/a.mp3 → N/c.mp3",
        ], "a file holding no byte is never moved")
    }

    /// Over random libraries where files move, get renamed, change, and are copied: every move pairs files of the
    /// same contents, each gone file is used at most once, no appeared file is left unmatched while a matching gone
    /// file is unused, and the result does not depend on the order of the inputs.
    @Test func seededLibrariesMoveConsistently() {
        let s = seed("seededLibrariesMoveConsistently")
        var random = SeededRandom(seed: s)
        for _ in 0..<300 {
            var gone: [MovedFiles.Gone] = []
            var appeared: [RemoteFile] = []
            for i in 0..<Int.random(in: 0...12, using: &random) {
                let size = Int64.random(in: 0...3, using: &random)
                let kind = Int.random(in: 0...2, using: &random)
                let hashes: [(HashKind, String)] = kind == 0 ? [(.md5, "h\(Int.random(in: 0...3, using: &random))")] : []
                let id: String? = kind == 1 ? "id\(Int.random(in: 0...3, using: &random))" : nil
                let name = "n\(Int.random(in: 0...2, using: &random)).mp3"
                let old = Self.file("old\(i)/\(name)", size: size, modified: Double(Int.random(in: 0...1, using: &random)),
                                    revision: "e\(Int.random(in: 0...1, using: &random))", id: id, hashes: hashes)
                gone.append(.init(file: old, heldBytes: Int64.random(in: 0...2, using: &random)))
                // Moved as it is, renamed, changed, or copied twice.
                for copy in 0..<Int.random(in: 0...2, using: &random) {
                    var new = old
                    new.path = "new\(i)-\(copy)/" + (Bool.random(using: &random) ? name : "renamed.mp3")
                    if Int.random(in: 0...3, using: &random) == 0 { new.revision += "x" }
                    appeared.append(new)
                }
            }
            let moves = MovedFiles.match(gone: gone, appeared: appeared)
            let byPath = Dictionary(gone.map { ($0.file.path, $0) }, uniquingKeysWith: { a, _ in a })
            #expect(Set(moves.map(\.from)).count == moves.count, "seed \(s): a gone file is used once")
            #expect(Set(moves.map(\.to.path)).count == moves.count, "seed \(s): an appeared file takes one")
            for move in moves {
                let old = byPath[move.from]
                #expect(old.map { MovedFiles.sameContents($0.file, move.to) && $0.heldBytes > 0 } == true, "seed \(s)")
            }
            let used = Set(moves.map(\.from)), taken = Set(moves.map(\.to.path))
            for new in appeared where !taken.contains(new.path) {
                #expect(!gone.contains { !used.contains($0.file.path) && $0.heldBytes > 0 && MovedFiles.sameContents($0.file, new) },
                        "seed \(s): \(new.path) left unmatched beside a free match")
            }
            let shuffled = MovedFiles.match(gone: gone.shuffled(using: &random), appeared: appeared.shuffled(using: &random))
            #expect(shuffled == moves, "seed \(s): the order of the inputs does not matter")
        }
    }
}

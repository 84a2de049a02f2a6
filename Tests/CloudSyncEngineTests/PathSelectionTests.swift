@testable import CloudSyncEngine
import Testing

/// PATH arguments of `pull` (#20.5): what they select, and the closest path when they select nothing.
@Suite struct PathSelectionTests {
    static let library: Set<String> = ["Rock/Queen/01 Bohemian.flac", "Rock/Queen/02 Love.flac", "Jazz/Miles/So What.mp3", "single.mp3"]

    @Test(arguments: [
        (["Rock"], "Rock/Queen/01 Bohemian.flac", true),
        (["/Rock/"], "Rock/Queen/02 Love.flac", true),
        (["Rock/Queen/01 Bohemian.flac"], "Rock/Queen/01 Bohemian.flac", true),
        (["Roc"], "Rock/Queen/01 Bohemian.flac", false),
        (["home/Rock"], "Rock/Queen/01 Bohemian.flac", true),
        (["home"], "Jazz/Miles/So What.mp3", true),
        (["other/Rock"], "Rock/Queen/01 Bohemian.flac", false),
        (["rock"], "Rock/Queen/01 Bohemian.flac", false),
        ([], "anything.mp3", true),
    ])
    func selects(paths: [String], path: String, expected: Bool) {
        #expect(PathSelection(paths, remote: "home").selects(path) == expected)
    }

    @Test(arguments: [
        ("Nope/Path", nil),
        ("rock/queen", "Rock/Queen"),
        ("Rock/Quen/01 Bohemian.flac", "Rock/Queen/01 Bohemian.flac"),
        ("Jazz/Miles/So What.flac", "Jazz/Miles/So What.mp3"),
        ("Rock/Queen/99 Nothing Like It Anywhere.flac", "Rock/Queen"),
        ("Rock/*", "Rock"),
        ("1MiB", nil),
        ("home/Jaz", "Jazz"),
    ] as [(String, String?)])
    func unmatchedPathsNameTheClosest(path: String, closest: String?) {
        let misses = PathSelection([path, "Rock"], remote: "home").unmatched(in: Self.library)
        #expect(misses == [.init(path: path, closest: closest)])
    }

    @Test func everyPathMatchingMeansNothingUnmatched() {
        #expect(PathSelection(["Rock", "home/single.mp3", "Jazz/"], remote: "home").unmatched(in: Self.library).isEmpty)
        #expect(PathSelection([], remote: "home").unmatched(in: []).isEmpty)
    }
}

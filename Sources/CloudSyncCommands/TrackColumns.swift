import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import Foundation

/// `ls` by tag: the `--artist`/`--album` selection, the `--sort` order, and the tag columns of the table and the
/// JSON (``TrackLabel``: tags and duration from the index, offline). Pure, table-tested.
struct TrackColumns {
    /// `--sort`: `path` (remote, then path), `artist` (artist, album, disc, track, path), `album` (album, disc,
    /// track, path), `added` (newest first, then path). Tracks without the tag sort after those with it.
    enum Order: String, CaseIterable {
        case path, artist, album, added
    }

    var artist: String?
    var album: String?
    var order: Order = .path

    /// Reads `--artist`, `--album` and `--sort`; an unknown order is a usage error that names the valid ones.
    init(_ args: ParsedArguments) throws {
        artist = args.value("artist")
        album = args.value("album")
        if let text = args.value("sort") {
            guard let order = Order(rawValue: text) else {
                throw UsageError(message: "cloudsync: --sort \(text): unknown order; use one of \(Order.allCases.map(\.rawValue).joined(separator: ", "))",
                                 hint: "Run 'cloudsync ls --help' for usage.")
            }
            self.order = order
        }
    }

    init(artist: String? = nil, album: String? = nil, order: Order = .path) {
        self.artist = artist
        self.album = album
        self.order = order
    }

    /// The rows whose artist (or album artist) and album tags contain the `--artist`/`--album` text, ignoring
    /// case, in the chosen order.
    func apply(_ rows: [CacheEntryInfo]) -> [CacheEntryInfo] {
        let byPath = { (a: CacheEntryInfo, b: CacheEntryInfo) in (a.remote, a.path) < (b.remote, b.path) }
        if artist == nil && album == nil && order == .path { return rows.sorted(by: byPath) }
        var labelled = rows.map { (row: $0, label: TrackLabel($0)) }
        if let artist {
            labelled = labelled.filter { Self.contains($0.label.tags.artist, artist) || Self.contains($0.label.tags.albumArtist, artist) }
        }
        if let album { labelled = labelled.filter { Self.contains($0.label.tags.album, album) } }
        switch order {
        case .path:
            labelled.sort { byPath($0.row, $1.row) }
        case .added:
            labelled.sort { $0.row.added != $1.row.added ? $0.row.added > $1.row.added : byPath($0.row, $1.row) }
        case .artist, .album:
            let keyed = labelled.map { item -> (key: [String], number: [Int], row: CacheEntryInfo) in
                let t = item.label.tags
                let text = order == .artist ? [Self.key(t.artist ?? t.albumArtist), Self.key(t.album)] : [Self.key(t.album)]
                return (text, [t.disc ?? Int.max, t.track ?? Int.max], item.row)
            }
            return keyed.sorted { a, b in
                if a.key != b.key { return a.key.lexicographicallyPrecedes(b.key) }
                if a.number != b.number { return a.number.lexicographicallyPrecedes(b.number) }
                return byPath(a.row, b.row)
            }.map(\.row)
        }
        return labelled.map(\.row)
    }

    /// A sort key: lowercased, and after every real value when absent.
    private static func key(_ text: String?) -> String { text.map { "0" + $0.lowercased() } ?? "1" }

    private static func contains(_ value: String?, _ part: String) -> Bool {
        guard let value else { return false }
        return value.range(of: part, options: [.caseInsensitive]) != nil
    }

    /// The table's columns for a row: its duration (`3:05`, `-` unknown) and, when tagged, "Artist – Title".
    static func tableColumns(_ label: TrackLabel) -> (duration: String, line: String?) {
        (label.durationText, label.tags.title != nil || label.tags.artist != nil ? label.line : nil)
    }

    /// The `duration_s` member of a row's JSON object: seconds to the millisecond, or null.
    static func jsonDuration(_ label: TrackLabel) -> String {
        "\"duration_s\":" + (label.duration.map { String(($0 * 1000).rounded() / 1000) } ?? "null")
    }

    /// The `tags` member of a row's JSON object: the tags present, keys sorted (`{}` without tags).
    static func jsonTags(_ label: TrackLabel) -> String {
        let t = label.tags
        var object = JSONText.Object()
        object.add("album", t.album)
        object.add("album_artist", t.albumArtist)
        object.add("artist", t.artist)
        object.add("date", t.date)
        object.add("disc", t.disc)
        object.add("genre", t.genre)
        object.add("title", t.title)
        object.add("track", t.track)
        return "\"tags\":" + object.text
    }
}

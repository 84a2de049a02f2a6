import CloudSyncCache
import CloudSyncCore
import CloudSyncEngine
import Foundation

/// Extended M3U playlists of indexed tracks. Pure; shared by `GET /playlist.m3u` and `cloudsync ls --m3u`.
public enum Playlist {
    /// `#EXTM3U`, then for each entry `#EXTINF:<whole seconds>,<Artist> - <Title>` (``TrackLabel``: the tags of
    /// its start set; -1 and the file name without extension when the index knows none; control characters
    /// replaced by spaces) and its URL under `baseURL` (e.g. `http://127.0.0.1:8765`). With `token`, each URL
    /// carries `?token=` so players can use it as is.
    public static func m3u(_ entries: [CacheEntryInfo], baseURL: String, token: String? = nil) -> String {
        var out = "#EXTM3U\n"
        let suffix = token.map { "?token=" + PercentEncoding.encode($0) } ?? ""
        for entry in entries {
            let label = TrackLabel(entry)
            out += "#EXTINF:\(label.playlistSeconds),\(label.playlistLine)\n"
            out += baseURL + TrackPaths.urlPath(remote: entry.remote, path: entry.path) + suffix + "\n"
        }
        return out
    }

    /// The display title of a remote path: its last component without the extension.
    public static func title(of path: String) -> String { TrackLabel.printable(TrackLabel.fileTitle(of: path)) }
}

/// The plain HTML index: remotes and tracks with their cache state. No scripts; every name escaped.
enum IndexPage {
    static func html(_ entries: [CacheEntryInfo], remotes: [String], unavailable: [String: String], token: String?) -> String {
        let suffix = token.map { "?token=" + PercentEncoding.encode($0) } ?? ""
        var out = """
        <!DOCTYPE html>
        <html><head><meta charset="utf-8"><title>cloudsync</title></head><body>
        <h1>cloudsync</h1>
        <p><a href="/playlist.m3u\(suffix)">playlist.m3u</a> (every track) · <a href="/playlist.m3u\(suffix.isEmpty ? "?" : suffix + "&amp;")cached=1">cached tracks only</a></p>

        """
        let byRemote = Dictionary(grouping: entries, by: \.remote)
        for remote in remotes {
            let rows = byRemote[remote] ?? []
            let cached = rows.filter { $0.state == .complete }.count
            out += "<h2>\(Markup.escape(remote))</h2>\n<p>\(rows.count) tracks, \(cached) cached"
            if let why = unavailable[remote] { out += "; missing bytes cannot be fetched: \(Markup.escape(why))" }
            out += "</p>\n<table>\n<tr><th>state</th><th>size</th><th>time</th><th>track</th><th>album</th><th>file</th></tr>\n"
            for row in rows {
                let href = TrackPaths.urlPath(remote: row.remote, path: row.path) + suffix
                out += "<tr><td>\(Markup.escape(state(row)))</td><td>\(Markup.escape(ByteSize.format(row.file.size)))</td>"
                let label = TrackLabel(row)
                out += "<td>\(Markup.escape(label.durationText))</td><td>\(Markup.escape(label.line))</td>"
                out += "<td>\(Markup.escape(label.album ?? ""))</td>"
                out += "<td><a href=\"\(Markup.escape(href))\">\(Markup.escape(row.path))</a></td></tr>\n"
            }
            out += "</table>\n"
        }
        out += "</body></html>\n"
        return out
    }

    static func state(_ row: CacheEntryInfo) -> String {
        switch row.state {
        case .complete: return "cached"
        case .missing: return "missing"
        case .partial:
            let pct = row.file.size > 0 ? Int(Double(row.presentBytes) * 100 / Double(row.file.size)) : 0
            return "partial \(min(pct, 99))%"
        }
    }

}

/// Escaping shared by the HTML index and WebDAV's XML.
enum Markup {
    /// Escapes `& < > " '` for text and attribute values of HTML and XML; characters neither can carry (controls
    /// but tab, DEL, U+FFFE, U+FFFF) become U+FFFD.
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for ch in text.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default:
                let v = ch.value
                let legal = v == 0x9 || (v >= 0x20 && v != 0x7F && v != 0xFFFE && v != 0xFFFF)
                out.unicodeScalars.append(legal ? ch : "\u{FFFD}")
            }
        }
        return out
    }
}

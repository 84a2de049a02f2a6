/// Players whose known bugs `serve` works around, recognised by their `User-Agent`. Pure.
enum ClientQuirks {
    /// Whether the client freezes when a response ends short of its `Content-Length`: mpd 0.21 to 0.23.12. Its
    /// curl input sits under a `BufferingInputStream` (files up to 128 MiB with ranges), whose thread, once the
    /// transfer has failed, seeks the broken stream to where it stopped, a no-op, and loops: one core at 100 %
    /// holding the player's mutex, so mpd answers no command until it is killed (MPD issue #1727, fixed in
    /// 0.23.13 by commit 541468f0c; Debian 12 ships 0.23.12). Other clients treat the cut as the failed read it
    /// is.
    static func freezesOnCutBody(userAgent: String?) -> Bool {
        guard let version = mpdVersion(userAgent) else { return false }
        return version.lexicographicallyPrecedes([0, 21]) == false && version.lexicographicallyPrecedes([0, 23, 13])
    }

    /// The version mpd's curl input sends (`Music Player Daemon 0.23.12`) as numbers (a part that is not a number
    /// ends it: `0.24~git` is `[0, 24]`), or nil for another client.
    static func mpdVersion(_ userAgent: String?) -> [Int]? {
        let prefix = "Music Player Daemon "
        guard let userAgent, userAgent.hasPrefix(prefix) else { return nil }
        let text = userAgent.dropFirst(prefix.count).prefix { $0 != " " }
        var parts: [Int] = []
        for piece in text.split(separator: ".", omittingEmptySubsequences: false) {
            let digits = piece.prefix { $0.isASCII && $0.isNumber }
            guard !digits.isEmpty, digits.count <= 6, let number = Int(digits) else { break }
            parts.append(number)
            if digits.count < piece.count { break }
        }
        return parts.isEmpty ? nil : parts
    }
}

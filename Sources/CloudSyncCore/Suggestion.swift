/// "Did you mean …?": the closest of some names to a mistyped one.
public enum Suggestion {
    /// The candidate closest to `word` by edit distance (case-insensitive), when close enough to be a
    /// plausible typo: at most 2 edits, or a third of the word's letters for long words. A candidate equal
    /// to `word` but for case always wins.
    public static func closest(to word: String, among candidates: some Sequence<String>) -> String? {
        let lower = word.lowercased()
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(lower, candidate.lowercased())
            if best == nil || distance < best?.distance ?? .max { best = (candidate, distance) }
            if distance == 0 { break }
        }
        guard let best, best.distance <= max(2, word.count / 3) else { return nil }
        return best.name
    }

    /// Levenshtein distance over Unicode scalars.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.unicodeScalars), b = Array(b.unicodeScalars)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0 ... b.count)
        var current = previous
        for i in 1 ... a.count {
            current[0] = i
            for j in 1 ... b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

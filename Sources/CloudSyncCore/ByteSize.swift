import Foundation

/// Parses and prints byte sizes ("8MiB", "10GiB", "512KiB", "1.5GB", "300") and rates ("2MiB/s").
public enum ByteSize {
    private static let units: [(String, Double)] = [
        ("kib", 1024), ("mib", 1024 * 1024), ("gib", 1024 * 1024 * 1024), ("tib", 1024 * 1024 * 1024 * 1024),
        ("kb", 1000), ("mb", 1_000_000), ("gb", 1_000_000_000), ("tb", 1_000_000_000_000),
        ("k", 1024), ("m", 1024 * 1024), ("g", 1024 * 1024 * 1024), ("b", 1),
    ]

    /// Bytes for `text`, or nil when it is not a size. Units are case-insensitive; no unit means bytes.
    public static func parse(_ text: String) -> Int64? {
        let s = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard !s.isEmpty else { return nil }
        var number = s
        var factor = 1.0
        for (suffix, f) in units where s.hasSuffix(suffix) {
            number = String(s.dropLast(suffix.count)).trimmingCharacters(in: .whitespaces)
            factor = f
            break
        }
        guard let value = Double(number), value >= 0, value.isFinite else { return nil }
        let bytes = value * factor
        guard bytes < 9.2e18 else { return nil }
        return Int64(bytes.rounded())
    }

    /// Bytes per second for "2MiB/s" or "2MiB"; nil for "off" handled by the caller.
    public static func parseRate(_ text: String) -> Int64? {
        var s = text.trimmingCharacters(in: .whitespaces)
        if s.lowercased().hasSuffix("/s") { s = String(s.dropLast(2)) }
        return parse(s)
    }

    /// "1.5 GiB", "812 KiB", "17 B".
    public static func format(_ bytes: Int64) -> String {
        let b = Double(bytes)
        if bytes < 1024 { return "\(bytes) B" }
        for (name, f) in [("TiB", 1099511627776.0), ("GiB", 1073741824.0), ("MiB", 1048576.0), ("KiB", 1024.0)] where b >= f {
            let v = b / f
            return v >= 100 ? "\(Int(v.rounded())) \(name)" : "\((v * 10).rounded() / 10) \(name)"
        }
        return "\(bytes) B"
    }
}

/// Parses durations "90d", "12h", "30m", "45s", "1.5h"; a bare number is seconds.
public enum TimeSpan {
    public static func parse(_ text: String) -> TimeInterval? {
        let s = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard let last = s.last else { return nil }
        let factors: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800]
        let (num, f): (Substring, Double) = factors[last].map { (s.dropLast(), $0) } ?? (Substring(s), 1)
        guard let v = Double(num.trimmingCharacters(in: .whitespaces)), v >= 0, v.isFinite else { return nil }
        return v * f
    }
}

extension Int64 {
    /// `self + other`, clamped to `Int64.min...Int64.max` instead of trapping: for sizes and offsets that come
    /// from the wire, the index or a file header.
    public func addingSaturating(_ other: Int64) -> Int64 {
        let (value, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : value
    }
}

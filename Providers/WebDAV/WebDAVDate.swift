import CloudSyncCore
import Foundation

/// Parses `getlastmodified` and `Retry-After` dates without `DateFormatter` (not Sendable, slow per call).
/// Accepts RFC 1123 (`Mon, 30 Nov 2026 20:55:24 GMT`), RFC 1123 with a numeric zone (`+0100`), an unpadded
/// day, RFC 850 (`Monday, 30-Nov-26 20:55:24 GMT`), asctime / Unix date (`Mon Nov 30 20:55:24 [UTC] 2026`)
/// and RFC 3339 (`2026-11-30T20:55:24.5+01:00`): the formats rclone's WebDAV backend accepts.
enum WebDAVDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// The instant `text` names, or nil when it is none of the accepted formats.
    static func parse(_ text: String) -> Date? {
        let s = ASCII.trimmed(text)
        if let d = parseIMFFixdate(s) { return d }
        if let d = parseRFC3339(s) { return d }
        return parseHTTP(s)
    }

    /// The fixed-length form every server we know sends, `Sun, 06 Nov 1994 08:49:37 GMT` (RFC 9110
    /// §5.6.7), read by position: a listing has one per file, and the general parser costs ~20 µs each.
    private static func parseIMFFixdate(_ s: String) -> Date? {
        var s = s
        return s.withUTF8 { b -> Date? in
            guard b.count == 29, b[3] == UInt8(ascii: ","), b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20,
                  b[19] == UInt8(ascii: ":"), b[22] == UInt8(ascii: ":"), b[25] == 0x20,
                  b[26] == UInt8(ascii: "G"), b[27] == UInt8(ascii: "M"), b[28] == UInt8(ascii: "T") else { return nil }
            func num(_ r: Range<Int>) -> Int? {
                var v = 0
                for i in r { guard (48...57).contains(b[i]) else { return nil }; v = v * 10 + Int(b[i] - 48) }
                return v
            }
            let monthText = String(decoding: b[8..<11], as: UTF8.self).lowercased()
            guard let day = num(5..<7), let year = num(12..<16), let hour = num(17..<19), let minute = num(20..<22),
                  let second = num(23..<25), let month = months.firstIndex(of: monthText) else { return nil }
            return makeDate(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second,
                            fraction: 0, offset: 0)
        }
    }

    private static func parseHTTP(_ s: String) -> Date? {
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?, offset = 0
        let tokens = s.replacingOccurrences(of: ",", with: " ").split(whereSeparator: \.isWhitespace)
        for token in tokens {
            let lower = token.lowercased()
            if token.contains(":") {
                let parts = token.split(separator: ":").map { Int($0) }
                guard parts.count == 3, let h = parts[0], let m = parts[1], let sec = parts[2] else { return nil }
                time = (h, m, sec)
            } else if token.filter({ $0 == "-" }).count == 2, !token.hasPrefix("-") {
                // RFC 850 date part: 30-Nov-26
                let parts = token.split(separator: "-")
                guard parts.count == 3, let d = Int(parts[0]), let mi = monthIndex(parts[1]), let y = Int(parts[2]) else { return nil }
                (day, month, year) = (d, mi, parts[2].count <= 2 ? (y < 50 ? 2000 + y : 1900 + y) : y)
            } else if (token.hasPrefix("+") || token.hasPrefix("-")), token.count == 5, let v = Int(token.dropFirst()) {
                offset = (token.hasPrefix("-") ? -1 : 1) * ((v / 100) * 3600 + (v % 100) * 60)
            } else if let v = Int(token) {
                if token.count == 4 || v > 31 { year = v } else { day = v }
            } else if let mi = monthIndex(token), month == nil {
                month = mi
            } else if isWeekday(lower) || ["gmt", "utc", "ut", "z"].contains(lower) {
                continue
            } else if token.allSatisfy(\.isLetter), token.count <= 5 {
                continue  // another zone abbreviation: taken as UTC, like Go's time.Parse does for unknown ones
            } else {
                return nil
            }
        }
        guard let day, let month, let year, let time else { return nil }
        return makeDate(year: year, month: month, day: day, hour: time.0, minute: time.1, second: time.2, fraction: 0, offset: offset)
    }

    private static let weekdays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    private static let monthNames = ["january", "february", "march", "april", "may", "june", "july", "august",
                                     "september", "october", "november", "december"]

    private static func isWeekday(_ lower: String) -> Bool {
        weekdays.contains(lower) || weekdays.contains { $0.prefix(3) == lower }
    }

    /// 1...12 for a three-letter or full English month name.
    private static func monthIndex(_ token: Substring) -> Int? {
        let lower = token.lowercased()
        if let i = months.firstIndex(of: lower) { return i + 1 }
        return monthNames.firstIndex(of: lower).map { $0 + 1 }
    }

    /// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`; a space may replace the `T`.
    private static func parseRFC3339(_ s: String) -> Date? {
        let b = Array(s.utf8)
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return nil }
        func num(_ r: Range<Int>) -> Int? {
            var v = 0
            for i in r { guard (48...57).contains(b[i]) else { return nil }; v = v * 10 + Int(b[i] - 48) }
            return v
        }
        guard let y = num(0..<4), let mo = num(5..<7), let d = num(8..<10), let h = num(11..<13), let mi = num(14..<16),
              let sec = num(17..<19) else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            while i < b.count, (48...57).contains(b[i]) { fraction += Double(b[i] - 48) * scale; scale /= 10; i += 1 }
        }
        guard i < b.count else { return nil }
        var offset = 0
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            guard i + 1 == b.count else { return nil }
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard i + 6 == b.count, b[i + 3] == UInt8(ascii: ":"), let oh = num(i + 1..<i + 3), let om = num(i + 4..<i + 6) else { return nil }
            offset = (b[i] == UInt8(ascii: "-") ? -1 : 1) * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        return makeDate(year: y, month: mo, day: d, hour: h, minute: mi, second: sec, fraction: fraction, offset: offset)
    }

    private static func makeDate(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, fraction: Double, offset: Int) -> Date? {
        guard (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute),
              (0...60).contains(second), (1...9999).contains(year) else { return nil }
        // Days from civil (Howard Hinnant's algorithm), proleptic Gregorian.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        let seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}

import Foundation

/// HTTP-dates (RFC 9110 §5.6.7), parsed and written by hand: no `DateFormatter` (not Sendable, ~20 µs a call),
/// so a listing with a date per file and every `Retry-After` share one fast path.
///
/// Parsing accepts what recipients must (IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`, RFC 850
/// `Sunday, 06-Nov-94 08:49:37 GMT`, asctime `Sun Nov  6 08:49:37 1994`) and what real servers send besides, as
/// rclone's WebDAV backend does: a numeric zone (`+0100`), an unpadded day, upper-case names, a Unix `date` line
/// (`Mon Nov 30 20:55:24 UTC 2026`); an unknown zone abbreviation counts as UTC.
public enum HTTPDate {
    static let monthAbbreviations = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    private static let monthNames = ["january", "february", "march", "april", "may", "june", "july", "august",
                                     "september", "october", "november", "december"]
    private static let weekdays = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]

    /// The instant `text` names, or nil when it is no HTTP-date (or names a day, hour or year out of range).
    public static func parse(_ text: String) -> Date? {
        let s = ASCII.trimmed(text)
        return parseIMFFixdate(s) ?? parseGeneral(s)
    }

    /// IMF-fixdate for `date`, e.g. `Tue, 14 Nov 2023 22:13:20 GMT`; seconds are truncated, and dates outside the
    /// years 0001–9999 are clamped into them (a hostile listing may hold any date).
    public static func format(_ date: Date) -> String {
        let c = CivilTime(date)
        let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
        let weekday = days[((c.daysSinceEpoch % 7) + 7) % 7]
        let month = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][c.month - 1]
        return "\(weekday), \(pad(c.day, 2)) \(month) \(pad(c.year, 4)) \(pad(c.hour, 2)):\(pad(c.minute, 2)):\(pad(c.second, 2)) GMT"
    }

    /// The fixed-length form every server we know sends, read by position.
    private static func parseIMFFixdate(_ s: String) -> Date? {
        let b = Array(s.utf8)
        guard b.count == 29, b[3] == UInt8(ascii: ","), b[4] == 0x20, b[7] == 0x20, b[11] == 0x20, b[16] == 0x20,
              b[19] == UInt8(ascii: ":"), b[22] == UInt8(ascii: ":"), b[25] == 0x20,
              b[26] == UInt8(ascii: "G"), b[27] == UInt8(ascii: "M"), b[28] == UInt8(ascii: "T") else { return nil }
        let monthText = String(decoding: b[8..<11], as: UTF8.self).lowercased()
        guard let day = decimal(b, 5..<7), let year = decimal(b, 12..<16), let hour = decimal(b, 17..<19),
              let minute = decimal(b, 20..<22), let second = decimal(b, 23..<25),
              let month = monthAbbreviations.firstIndex(of: monthText) else { return nil }
        return CivilTime.date(year: year, month: month + 1, day: day, hour: hour, minute: minute, second: second)
    }

    /// Every other accepted form, token by token.
    private static func parseGeneral(_ s: String) -> Date? {
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?, offset = 0
        let tokens = s.replacingOccurrences(of: ",", with: " ").split(whereSeparator: \.isWhitespace)
        for token in tokens {
            let lower = token.lowercased()
            if token.contains(":") {
                let parts = token.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count == 3, parts.allSatisfy({ (1...2).contains($0.count) && $0.allSatisfy(\.isASCIIDigitCharacter) }),
                      let h = Int(parts[0]), let m = Int(parts[1]), let sec = Int(parts[2]) else { return nil }
                time = (h, m, sec)
            } else if token.filter({ $0 == "-" }).count == 2, !token.hasPrefix("-") {
                // RFC 850 date part: 30-Nov-26
                let parts = token.split(separator: "-")
                guard parts.count == 3, let d = Int(parts[0]), let mi = monthIndex(parts[1]), let y = Int(parts[2]) else { return nil }
                (day, month, year) = (d, mi, parts[2].count <= 2 ? (y < 50 ? 2000 + y : 1900 + y) : y)
            } else if token.hasPrefix("+") || token.hasPrefix("-") {
                guard token.count == 5, token.dropFirst().allSatisfy(\.isASCIIDigitCharacter), let v = Int(token.dropFirst()) else { return nil }
                offset = (token.hasPrefix("-") ? -1 : 1) * ((v / 100) * 3600 + (v % 100) * 60)
            } else if token.allSatisfy(\.isASCIIDigitCharacter), let v = Int(token) {
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
        return CivilTime.date(year: year, month: month, day: day, hour: time.0, minute: time.1, second: time.2, offset: offset)
    }

    private static func isWeekday(_ lower: String) -> Bool {
        weekdays.contains(lower) || weekdays.contains { $0.prefix(3) == lower }
    }

    /// 1...12 for a three-letter or full English month name.
    private static func monthIndex(_ token: Substring) -> Int? {
        let lower = token.lowercased()
        if let i = monthAbbreviations.firstIndex(of: lower) { return i + 1 }
        return monthNames.firstIndex(of: lower).map { $0 + 1 }
    }
}

/// RFC 3339 timestamps (`2026-11-30T20:55:24.5+01:00`), parsed and written by hand: what the JSON APIs print
/// (Drive `modifiedTime`, Graph `lastModifiedDateTime`, Yandex `modified`, Dropbox `server_modified`), WebDAV
/// `creationdate`, and the token store. No `ISO8601DateFormatter` per call.
public enum RFC3339 {
    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `t`, `z` and a space for the `T` are accepted, white space
    /// around it is ignored. Nil for anything else or a field out of range.
    public static func parse(_ text: some StringProtocol) -> Date? {
        let b = Array(ASCII.trimmed(text).utf8)
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":") else { return nil }
        guard let y = decimal(b, 0..<4), let mo = decimal(b, 5..<7), let d = decimal(b, 8..<10), let h = decimal(b, 11..<13),
              let mi = decimal(b, 14..<16), let sec = decimal(b, 17..<19) else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            var digits = 0, scale = 1.0
            while i < b.count, (48...57).contains(b[i]) {
                if i - start < 15 { digits = digits * 10 + Int(b[i] - 48); scale *= 10 }  // beyond femtoseconds: ignored
                i += 1
            }
            guard i > start else { return nil }
            fraction = Double(digits) / scale
        }
        guard i < b.count else { return nil }
        var offset = 0
        if b[i] == UInt8(ascii: "Z") || b[i] == UInt8(ascii: "z") {
            guard i + 1 == b.count else { return nil }
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard i + 6 == b.count, b[i + 3] == UInt8(ascii: ":"), let oh = decimal(b, i + 1..<i + 3),
                  let om = decimal(b, i + 4..<i + 6), oh <= 23, om <= 59 else { return nil }
            offset = (b[i] == UInt8(ascii: "-") ? -1 : 1) * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        return CivilTime.date(year: y, month: mo, day: d, hour: h, minute: mi, second: sec, fraction: fraction, offset: offset)
    }

    /// `2023-11-14T22:13:20Z`: UTC, whole seconds (truncated), years clamped to 0001–9999.
    public static func format(_ date: Date) -> String {
        let c = CivilTime(date)
        return "\(pad(c.year, 4))-\(pad(c.month, 2))-\(pad(c.day, 2))T\(pad(c.hour, 2)):\(pad(c.minute, 2)):\(pad(c.second, 2))Z"
    }
}

/// A UTC calendar time, proleptic Gregorian (Howard Hinnant's days-from-civil and civil-from-days).
package struct CivilTime {
    package var year, month, day, hour, minute, second: Int
    package var daysSinceEpoch: Int

    /// Whole seconds since 1970 of the first and last second of the years 0001–9999.
    package static let earliest: Int64 = -62_135_596_800
    package static let latest: Int64 = 253_402_300_799

    /// `date` broken down, clamped to years 0001–9999 (NaN and infinities count as the epoch).
    package init(_ date: Date) {
        let t = date.timeIntervalSince1970
        let seconds: Int64 = t.isFinite ? Int64(max(Double(Self.earliest), min(Double(Self.latest), t.rounded(.down)))) : 0
        let days = Int(seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400)
        let rest = Int(seconds - Int64(days) * 86400)
        daysSinceEpoch = days
        (hour, minute, second) = (rest / 3600, rest % 3600 / 60, rest % 60)
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        day = doy - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// The instant of a calendar time at `offset` seconds east of UTC; nil when a field is out of range
    /// (second 60 is accepted as a leap second and lands on the next minute).
    static func date(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, fraction: Double = 0,
                     offset: Int = 0) -> Date? {
        guard (1...9999).contains(year), (1...12).contains(month), (1...31).contains(day), (0...23).contains(hour),
              (0...59).contains(minute), (0...60).contains(second) else { return nil }
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        let seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }
}

/// The decimal number of `b[range]`, nil unless every byte is a digit.
private func decimal(_ b: [UInt8], _ range: Range<Int>) -> Int? {
    var v = 0
    for i in range { guard (48...57).contains(b[i]) else { return nil }; v = v * 10 + Int(b[i] - 48) }
    return v
}

/// `value` in decimal, zero-padded to `width` digits (non-negative values).
private func pad(_ value: Int, _ width: Int) -> String {
    let text = String(max(0, value))
    return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { ("0"..."9").contains(self) }
}

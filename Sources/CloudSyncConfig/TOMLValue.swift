/// A 1-based line and column (counted in Unicode scalars) in a TOML document.
public struct TOMLPosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let line: Int
    public let column: Int

    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    public static func < (a: TOMLPosition, b: TOMLPosition) -> Bool {
        (a.line, a.column) < (b.line, b.column)
    }

    public var description: String { "\(line):\(column)" }
}

/// A calendar date as written in TOML (`1979-05-27`); always a valid proleptic Gregorian date.
public struct TOMLDate: Sendable, Hashable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    public init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    public var description: String { pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) }
}

/// A wall-clock time as written in TOML (`07:32:00.999`); fractions beyond nanoseconds are truncated.
public struct TOMLTime: Sendable, Hashable, CustomStringConvertible {
    public let hour: Int
    public let minute: Int
    /// 0...60 (60 only for a leap second).
    public let second: Int
    public let nanosecond: Int

    public init(hour: Int, minute: Int, second: Int, nanosecond: Int = 0) {
        self.hour = hour
        self.minute = minute
        self.second = second
        self.nanosecond = nanosecond
    }

    public var description: String {
        var s = pad(hour, 2) + ":" + pad(minute, 2) + ":" + pad(second, 2)
        if nanosecond > 0 {
            var frac = pad(nanosecond, 9)
            while frac.hasSuffix("0") { frac.removeLast() }
            s += "." + frac
        }
        return s
    }
}

private func pad(_ value: Int, _ width: Int) -> String {
    let s = String(value)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

/// A TOML value with its type. Tables and arrays hold `TOMLNode`s so every value keeps its position.
public enum TOMLValue: Sendable, Equatable {
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)
    /// `1979-05-27T07:32:00-08:00`; `offsetMinutes` east of UTC (`Z` is 0).
    case offsetDateTime(TOMLDate, TOMLTime, offsetMinutes: Int)
    case localDateTime(TOMLDate, TOMLTime)
    case localDate(TOMLDate)
    case localTime(TOMLTime)
    case array([TOMLNode])
    case table(TOMLTable)

    /// The type's name as used in error messages: "string", "integer", "float", "boolean",
    /// "offset date-time", "local date-time", "local date", "local time", "array", "table".
    public var typeName: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .float: "float"
        case .boolean: "boolean"
        case .offsetDateTime: "offset date-time"
        case .localDateTime: "local date-time"
        case .localDate: "local date"
        case .localTime: "local time"
        case .array: "array"
        case .table: "table"
        }
    }
}

/// A value and where it starts in the document (its first character).
public struct TOMLNode: Sendable, Equatable {
    public var value: TOMLValue
    public var position: TOMLPosition

    public init(_ value: TOMLValue, at position: TOMLPosition) {
        self.value = value
        self.position = position
    }
}

/// A TOML table: keys in the order they were first defined, each with its value and the position of
/// the key itself (the last segment of a dotted key, or the header that opened a sub-table).
public struct TOMLTable: Sendable, Equatable {
    /// Where the table was opened: its `[header]`, the key that created it, or 1:1 for the root.
    public var position: TOMLPosition
    public private(set) var keys: [String] = []
    private var nodes: [String: TOMLNode] = [:]
    private var keyPositions: [String: TOMLPosition] = [:]

    public init(position: TOMLPosition = TOMLPosition(line: 1, column: 1)) {
        self.position = position
    }

    public subscript(key: String) -> TOMLNode? { nodes[key] }

    /// Where `key` was written, or nil when the table has no such key.
    public func keyPosition(_ key: String) -> TOMLPosition? { keyPositions[key] }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    /// Entries in definition order.
    public var entries: [(key: String, node: TOMLNode)] { keys.compactMap { k in nodes[k].map { (k, $0) } } }

    /// Sets `key`, keeping its first definition order when it already exists.
    public mutating func set(_ key: String, _ node: TOMLNode, keyPosition: TOMLPosition) {
        if nodes[key] == nil { keys.append(key) }
        nodes[key] = node
        keyPositions[key] = keyPosition
    }

    /// Equal when the keys, their order, the values and all positions are equal.
    public static func == (a: TOMLTable, b: TOMLTable) -> Bool {
        a.position == b.position && a.keys == b.keys && a.nodes == b.nodes && a.keyPositions == b.keyPositions
    }
}

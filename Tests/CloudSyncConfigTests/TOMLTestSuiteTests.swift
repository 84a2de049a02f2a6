import CloudSyncConfig
import Foundation
import Testing

/// The toml-test suite (valid and invalid documents with expected JSON), see toml-test/README.md.
enum TOMLTestSuite {
    static let root: URL = {
        if let url = Bundle.module.url(forResource: "toml-test", withExtension: nil) { return url }
        return URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("toml-test")
    }()

    /// Relative paths ("valid/array/empty") of every `.toml` case under `kind`, sorted.
    static func cases(_ kind: String) -> [String] {
        let base = root.appendingPathComponent(kind)
        guard let walker = FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil) else { return [] }
        var found: [String] = []
        for case let url as URL in walker where url.pathExtension == "toml" {
            let relative = url.path.dropFirst(root.path.count + 1)
            found.append(String(relative.dropLast(".toml".count)))
        }
        return found.sorted()
    }

    static func bytes(_ name: String, _ ext: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: root.appendingPathComponent(name + "." + ext)))
    }
}

/// toml-test's JSON form: every scalar a {"type", "value"} pair of strings, compared with normalisation
/// of floats (numeric value; every NaN alike) and offset date-times (the instant).
indirect enum Tagged: Equatable, CustomStringConvertible {
    case table([String: Tagged])
    case array([Tagged])
    case scalar(type: String, value: String)

    var description: String {
        switch self {
        case .table(let t): "{" + t.keys.sorted().map { "\($0): \(t[$0]?.description ?? "")" }.joined(separator: ", ") + "}"
        case .array(let a): "[" + a.map(\.description).joined(separator: ", ") + "]"
        case .scalar(let type, let value): "\(type)(\(value))"
        }
    }

    init(json: Any) throws {
        if let array = json as? [Any] {
            self = .array(try array.map(Tagged.init(json:)))
        } else if let dict = json as? [String: Any] {
            if dict.count == 2, let type = dict["type"] as? String, let value = dict["value"] {
                if type == "array", let items = value as? [Any] {
                    self = .array(try items.map(Tagged.init(json:)))
                } else if let string = value as? String {
                    self = .scalar(type: type, value: try Tagged.normalise(type: type, value: string))
                } else {
                    throw CocoaError(.coderInvalidValue)
                }
            } else {
                self = .table(try dict.mapValues(Tagged.init(json:)))
            }
        } else {
            throw CocoaError(.coderInvalidValue)
        }
    }

    init(_ table: TOMLTable) {
        var out: [String: Tagged] = [:]
        for (key, node) in table.entries { out[key] = Tagged(node.value) }
        self = .table(out)
    }

    init(_ value: TOMLValue) {
        switch value {
        case .string(let s): self = .scalar(type: "string", value: s)
        case .integer(let i): self = .scalar(type: "integer", value: String(i))
        case .float(let d): self = .scalar(type: "float", value: Tagged.canonical(d))
        case .boolean(let b): self = .scalar(type: "bool", value: String(b))
        case .offsetDateTime(let date, let time, let offset):
            self = .scalar(type: "datetime", value: Tagged.instant(date, time, offset))
        case .localDateTime(let date, let time): self = .scalar(type: "datetime-local", value: "\(date)T\(time)")
        case .localDate(let date): self = .scalar(type: "date-local", value: "\(date)")
        case .localTime(let time): self = .scalar(type: "time-local", value: "\(time)")
        case .array(let items): self = .array(items.map { Tagged($0.value) })
        case .table(let table): self = Tagged(table)
        }
    }

    static func canonical(_ d: Double) -> String { d.isNaN ? "nan" : d == 0 ? "0.0" : "\(d)" }

    /// Seconds since 1970-01-01T00:00:00Z and nanoseconds, for comparing offset date-times.
    static func instant(_ date: TOMLDate, _ time: TOMLTime, _ offsetMinutes: Int) -> String {
        // Days from civil (Howard Hinnant's algorithm).
        let y = date.month <= 2 ? date.year - 1 : date.year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (date.month + 9) % 12
        let doy = (153 * mp + 2) / 5 + date.day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        let seconds = days * 86400 + time.hour * 3600 + time.minute * 60 + time.second - offsetMinutes * 60
        return "\(seconds).\(time.nanosecond)"
    }

    /// Expected values written as strings, brought to the form `init(_ value:)` produces.
    static func normalise(type: String, value: String) throws -> String {
        switch type {
        case "float":
            if value.hasSuffix("nan") { return "nan" }
            guard let d = Double(value) else { throw CocoaError(.coderInvalidValue) }
            return canonical(d)
        case "datetime", "datetime-local", "date-local", "time-local":
            let table = try TOMLParser.parse("v = \(value)", file: "expected")
            guard let node = table["v"], case .scalar(_, let normalised) = Tagged(node.value) else {
                throw CocoaError(.coderInvalidValue)
            }
            return normalised
        default:
            return value
        }
    }
}

@Suite("toml-test suite")
struct TOMLTestSuiteTests {
    @Test("the suite's files are present")
    func suiteIsPresent() {
        #expect(TOMLTestSuite.cases("valid").count >= 99)
        #expect(TOMLTestSuite.cases("invalid").count >= 234)
    }

    @Test("valid documents parse to the expected values", arguments: TOMLTestSuite.cases("valid"))
    func valid(name: String) throws {
        let toml = try TOMLTestSuite.bytes(name, "toml")
        let json = try JSONSerialization.jsonObject(with: Data(try TOMLTestSuite.bytes(name, "json")),
                                                    options: [.fragmentsAllowed])
        let expected = try Tagged(json: json)
        do {
            let table = try TOMLParser.parse(bytes: toml, file: name + ".toml")
            #expect(Tagged(table) == expected)
        } catch {
            Issue.record("\(name): unexpected error \(error)")
        }
    }

    @Test("invalid documents are rejected with a positioned error", arguments: TOMLTestSuite.cases("invalid"))
    func invalid(name: String) throws {
        let toml = try TOMLTestSuite.bytes(name, "toml")
        do {
            let table = try TOMLParser.parse(bytes: toml, file: name + ".toml")
            Issue.record("\(name): accepted, parsed as \(Tagged(table))")
        } catch {
            #expect(error.line >= 1 && error.column >= 1)
            #expect(error.description.hasPrefix("\(name).toml:\(error.line):\(error.column): "))
            #expect(error.exitCode == .config)
        }
    }
}

import CloudSyncCore

/// The order `pull --order` fetches what the plan selected (which tracks fit is always the planner's
/// priority; only the order of work changes). Spelled like rclone's `--order-by`: `KEY[,asc|,desc]`.
public struct FetchOrder: Sendable, Hashable {
    public enum Key: String, Sendable, CaseIterable {
        /// Path, A to Z by default.
        case name
        /// Smallest first by default (many tracks ready soon).
        case size
        /// Newest on the remote first by default.
        case modified
        /// Most recently added to the index first by default.
        case added
    }

    public var key: Key
    public var ascending: Bool

    public init(key: Key, ascending: Bool? = nil) {
        self.key = key
        self.ascending = ascending ?? (key == .name || key == .size)
    }

    /// Parses `name`, `size,desc`, `modified,asc`…; nil for anything else.
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard (1 ... 2).contains(parts.count), let key = Key(rawValue: parts[0]) else { return nil }
        var ascending: Bool?
        if parts.count == 2 {
            switch parts[1] {
            case "asc", "ascending": ascending = true
            case "desc", "descending": ascending = false
            default: return nil
            }
        }
        self.init(key: key, ascending: ascending)
    }

    /// `items` in this order; ties keep the given (priority) order, so the result is deterministic.
    public func sorted<T>(_ items: [T], path: (T) -> String, size: (T) -> Int64, modified: (T) -> Double,
                          added: (T) -> Double) -> [T] {
        let indexed = Array(items.enumerated())
        return indexed.sorted { a, b in
            let order: Bool?
            switch key {
            case .name: order = path(a.element) == path(b.element) ? nil : (path(a.element) < path(b.element)) == ascending
            case .size: order = size(a.element) == size(b.element) ? nil : (size(a.element) < size(b.element)) == ascending
            case .modified: order = modified(a.element) == modified(b.element) ? nil : (modified(a.element) < modified(b.element)) == ascending
            case .added: order = added(a.element) == added(b.element) ? nil : (added(a.element) < added(b.element)) == ascending
            }
            return order ?? (a.offset < b.offset)
        }.map(\.element)
    }
}
